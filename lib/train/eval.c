#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/nn/loss.h"
#include "lib/train/eval.h"
#include "lib/train/metrics.h"
#include "lib/util/mem.h"

int dlk_evaluate(struct dlk_net *net, const struct dlk_dataset *ds, int batch, struct dlk_eval *out,
                 struct dlk_err *err)
{
	const struct dlk_backend *be = net->be;
	int k = net->n_classes, ret = -1;
	float *xdev = NULL, *xhost = NULL, *logits = NULL;
	double loss = 0;
	long long correct = 0;

	*out = (struct dlk_eval)DLK_EVAL_INIT;
	if (ds->sample_size != net->input_size)
		return dlk_errf(err, DLK_EXIT_CONFIG, "evaluation data has %zu values per sample but the model takes %zu",
		                ds->sample_size, net->input_size);
	if (batch <= 0) /* the buffers the net already has: no second set just for evaluation */
		batch = net->batch_cap > 0 ? net->batch_cap : 256;
	if (dlk_net_reserve(net, batch, err))
		return -1;
	out->n_classes = k;
	out->confusion = xcalloc((size_t)k * k, sizeof(long long));
	out->precision = xcalloc((size_t)k, sizeof(double));
	out->recall = xcalloc((size_t)k, sizeof(double));
	logits = xmalloc(sizeof(float) * (size_t)batch * k);
	if (!(xdev = be->alloc(sizeof(float) * (size_t)batch * ds->sample_size))) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for an evaluation batch", be->name);
		goto out;
	}
	/* on the CPU backend the samples are gathered in place */
	xhost = be == dlk_backend_cpu() ? xdev : xmalloc(sizeof(float) * (size_t)batch * ds->sample_size);
	for (size_t start = 0; start < ds->n; start += (size_t)batch) {
		int nb = ds->n - start < (size_t)batch ? (int)(ds->n - start) : batch;
		dlk_dataset_gather_range(ds, start, (size_t)nb, xhost);
		if (dlk_dataset_failed(ds, err))
			goto out;
		be->to_device(xdev, xhost, sizeof(float) * (size_t)nb * ds->sample_size);
		const float *z = dlk_net_forward(net, xdev, nb, 0);
		be->to_host(logits, z, sizeof(float) * (size_t)nb * k);
		for (int b = 0; b < nb; b++) {
			const float *row = logits + (size_t)b * k;
			int y = ds->y[start + b], best = 0;
			if (y < 0 || y >= k) {
				dlk_errf(err, DLK_EXIT_CONFIG, "sample %zu: label %d is outside the model's %d classes",
				         start + b, y, k);
				goto out;
			}
			double m = row[0];
			for (int j = 1; j < k; j++) {
				if (row[j] > row[best])
					best = j;
				if (row[j] > m)
					m = row[j];
			}
			double s = 0;
			for (int j = 0; j < k; j++)
				s += exp(row[j] - m);
			loss += log(s) - (row[y] - m);
			correct += best == y;
			out->confusion[(size_t)y * k + best]++;
		}
	}
	{
		char msg[256];
		if (be->check(msg, sizeof(msg))) {
			dlk_errf(err, DLK_EXIT_FAIL, "%s: %s", be->name, msg);
			goto out;
		}
	}
	out->n = ds->n;
	out->loss = ds->n ? loss / (double)ds->n : 0;
	out->accuracy = ds->n ? (double)correct / (double)ds->n : 0;
	out->task = DLK_TASK_CLASSIFICATION;
	out->n_metrics = 1;
	out->metrics[0] = (struct dlk_metric){ "accuracy", out->accuracy, 1 };
	for (int c = 0; c < k; c++) {
		long long tp = out->confusion[(size_t)c * k + c], pred = 0, truth = 0;
		for (int j = 0; j < k; j++) {
			pred += out->confusion[(size_t)j * k + c];
			truth += out->confusion[(size_t)c * k + j];
		}
		out->precision[c] = pred ? (double)tp / (double)pred : 0;
		out->recall[c] = truth ? (double)tp / (double)truth : 0;
	}
	ret = 0;
out:
	if (xhost != xdev)
		free(xhost);
	be->free(xdev);
	free(logits);
	if (ret)
		dlk_eval_release(out);
	return ret;
}

static void add_metric(struct dlk_eval *ev, const char *name, double v, int higher)
{
	if (ev->n_metrics < DLK_EVAL_MAX_METRICS)
		ev->metrics[ev->n_metrics++] = (struct dlk_metric){ name, v, higher };
}

/* task lm: the mean next-token cross-entropy over every counted position of the split (each
 * batch's mean weighted back by its positions), and its exponential, the perplexity. The logits
 * are never kept beyond a batch. */
static int evaluate_lm(struct dlk_net *net, const struct dlk_dataset *ds, int batch, struct dlk_eval *out,
                       struct dlk_err *err)
{
	const struct dlk_backend *be = net->be;
	size_t T = ds->target_size, counted = 0;
	float *xdev = NULL, *xhost = NULL, *logits = NULL;
	double loss = 0;
	int ret = -1;

	*out = (struct dlk_eval)DLK_EVAL_INIT;
	if (ds->sample_size != net->input_size || !ds->t || T != ds->sample_size || T == 0 ||
	    (size_t)net->n_classes % T)
		return dlk_errf(err, DLK_EXIT_CONFIG, "evaluation data is not a token corpus of the model's %zu tokens "
		                "per sequence", net->input_size);
	if (batch <= 0)
		batch = net->batch_cap > 0 ? net->batch_cap : 64;
	if (dlk_net_reserve(net, batch, err))
		return -1;
	out->task = DLK_TASK_LM;
	out->n_classes = net->n_classes;
	if (!(xdev = be->alloc(sizeof(float) * (size_t)batch * ds->sample_size))) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for an evaluation batch", be->name);
		goto out;
	}
	xhost = be == dlk_backend_cpu() ? xdev : xmalloc(sizeof(float) * (size_t)batch * ds->sample_size);
	logits = xmalloc(sizeof(float) * (size_t)batch * (size_t)net->n_classes);
	for (size_t start = 0; start < ds->n; start += (size_t)batch) {
		int nb = ds->n - start < (size_t)batch ? (int)(ds->n - start) : batch, rows = nb, V;
		const float *tg = ds->t + start * T;
		size_t c = 0;
		dlk_dataset_gather_range(ds, start, (size_t)nb, xhost);
		be->to_device(xdev, xhost, sizeof(float) * (size_t)nb * ds->sample_size);
		be->to_host(logits, dlk_net_forward(net, xdev, nb, 0), sizeof(float) * (size_t)nb * (size_t)net->n_classes);
		dlk_loss_rows(net, &rows, &V);
		for (size_t i = 0; i < (size_t)rows; i++)
			c += tg[i] >= 0;
		loss += (double)dlk_loss_ref(DLK_LOSS_TOKEN_CE, logits, NULL, tg, rows, V, 0, NULL) * (double)c;
		counted += c;
	}
	{
		char msg[256];
		if (be->check(msg, sizeof(msg))) {
			dlk_errf(err, DLK_EXIT_FAIL, "%s: %s", be->name, msg);
			goto out;
		}
	}
	out->n = ds->n;
	out->loss = counted ? loss / (double)counted : 0;
	add_metric(out, "perplexity", exp(out->loss), 0);
	ret = 0;
out:
	if (xhost != xdev)
		free(xhost);
	be->free(xdev);
	free(logits);
	return ret;
}

int dlk_evaluate_task(struct dlk_net *net, const struct dlk_dataset *ds, int batch, const struct dlk_model *model,
                      const struct dlk_training *training, struct dlk_eval *out, struct dlk_err *err)
{
	const struct dlk_backend *be = net->be;
	struct dlk_loss_spec ls = dlk_loss_of(model, training);
	int k = net->n_classes, ret = -1;
	float *xdev = NULL, *xhost = NULL, *pred = NULL, *tbuf = NULL;
	const float *tg;
	double loss = 0;

	if (model->task == DLK_TASK_CLASSIFICATION) {
		/* the test loss is plain cross-entropy, label smoothing or not: what a model's
		 * confidence on the truth is, comparable across runs */
		return dlk_evaluate(net, ds, batch, out, err);
	}
	if (model->task == DLK_TASK_LM)
		return evaluate_lm(net, ds, batch, out, err);
	*out = (struct dlk_eval)DLK_EVAL_INIT;
	if (ds->sample_size != net->input_size)
		return dlk_errf(err, DLK_EXIT_CONFIG, "evaluation data has %zu values per sample but the model takes %zu",
		                ds->sample_size, net->input_size);
	if (!dlk_dataset_has_targets(ds) || ds->target_size != (size_t)k)
		return dlk_errf(err, DLK_EXIT_CONFIG, "evaluation data has %zu target values per sample but the model "
		                "gives %d", dlk_dataset_has_targets(ds) ? ds->target_size : 0, k);
	if (batch <= 0)
		batch = net->batch_cap > 0 ? net->batch_cap : 256;
	if (dlk_net_reserve(net, batch, err))
		return -1;
	out->task = model->task;
	out->n_classes = k;
	pred = xmalloc(sizeof(float) * (ds->n ? ds->n : 1) * (size_t)k);
	/* the split's targets as floats: its own, or (image targets kept as bytes) a copy for the
	 * evaluation's metrics, the size of its predictions */
	if (ds->t) {
		tg = ds->t;
	} else {
		tbuf = xmalloc(sizeof(float) * (ds->n ? ds->n : 1) * (size_t)k);
		dlk_dataset_targets(ds, NULL, 0, ds->n, tbuf);
		tg = tbuf;
		if (dlk_dataset_failed(ds, err))
			goto out;
	}
	if (!(xdev = be->alloc(sizeof(float) * (size_t)batch * ds->sample_size))) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for an evaluation batch", be->name);
		goto out;
	}
	xhost = be == dlk_backend_cpu() ? xdev : xmalloc(sizeof(float) * (size_t)batch * ds->sample_size);
	for (size_t start = 0; start < ds->n; start += (size_t)batch) {
		int nb = ds->n - start < (size_t)batch ? (int)(ds->n - start) : batch;
		float *p = pred + start * (size_t)k;
		dlk_dataset_gather_range(ds, start, (size_t)nb, xhost);
		if (dlk_dataset_failed(ds, err))
			goto out;
		be->to_device(xdev, xhost, sizeof(float) * (size_t)nb * ds->sample_size);
		be->to_host(p, dlk_net_forward(net, xdev, nb, 0), sizeof(float) * (size_t)nb * k);
		/* the batch's mean loss, weighted back to a sum */
		loss += (double)dlk_loss_ref((int)ls.kind, p, NULL, tg + start * (size_t)k, nb, k, ls.param, NULL) * nb;
	}
	{
		char msg[256];
		if (be->check(msg, sizeof(msg))) {
			dlk_errf(err, DLK_EXIT_FAIL, "%s: %s", be->name, msg);
			goto out;
		}
	}
	out->n = ds->n;
	out->loss = ds->n ? loss / (double)ds->n : 0;
	if (model->task == DLK_TASK_MULTILABEL) {
		double micro, macro, subset;
		out->f1 = xcalloc((size_t)k, sizeof(double));
		dlk_metrics_multilabel(pred, tg, ds->n, k, model->threshold, out->f1, &micro, &macro, &subset);
		add_metric(out, "f1_micro", micro, 1);
		add_metric(out, "f1_macro", macro, 1);
		add_metric(out, "subset_accuracy", subset, 1);
	} else {
		double mae, rmse, r2;
		/* an image's R^2 is over every value as one column: a pixel that is the same in every
		 * image (a border) would otherwise weigh as much as the picture */
		if (model->task == DLK_TASK_IMAGE)
			dlk_metrics_regression(pred, tg, ds->n * (size_t)k, 1, &mae, &rmse, &r2);
		else
			dlk_metrics_regression(pred, tg, ds->n, k, &mae, &rmse, &r2);
		if (model->task == DLK_TASK_IMAGE) {
			const struct dlk_layer *L = &net->layers[net->n_layers - 1];
			add_metric(out, "psnr", dlk_metrics_psnr(pred, tg, ds->n, (size_t)k, 1.0), 1);
			add_metric(out, "ssim", dlk_metrics_ssim(pred, tg, ds->n, L->out[0], L->out[1], L->out[2], 1.0), 1);
			/* a few images for the report page's grid of inputs, outputs and targets */
			if (k <= 4096) {
				size_t ns = ds->n < DLK_EVAL_SAMPLES ? ds->n : DLK_EVAL_SAMPLES, kk = (size_t)k;
				out->n_samples = (int)ns;
				memcpy(out->sample_shape, L->out, sizeof(out->sample_shape));
				out->sample_out = xmalloc(sizeof(float) * ns * kk + 1);
				out->sample_target = xmalloc(sizeof(float) * ns * kk + 1);
				memcpy(out->sample_out, pred, sizeof(float) * ns * kk);
				memcpy(out->sample_target, tg, sizeof(float) * ns * kk);
				if (ds->sample_size == kk) {
					out->sample_in = xmalloc(sizeof(float) * ns * kk + 1);
					dlk_dataset_gather_range(ds, 0, ns, out->sample_in);
					if (dlk_dataset_failed(ds, err))
						goto out;
				}
			}
		}
		add_metric(out, "r2", r2, 1);
		add_metric(out, "rmse", rmse, 0);
		add_metric(out, "mae", mae, 0);
	}
	ret = 0;
out:
	if (xhost != xdev)
		free(xhost);
	be->free(xdev);
	free(pred);
	free(tbuf);
	if (ret)
		dlk_eval_release(out);
	return ret;
}

int dlk_eval_metric(const struct dlk_eval *ev, const char *name, double *value)
{
	if (!strcmp(name, "loss")) {
		*value = ev->loss;
		return 0;
	}
	for (int i = 0; i < ev->n_metrics; i++)
		if (!strcmp(ev->metrics[i].name, name)) {
			*value = ev->metrics[i].value;
			return 0;
		}
	return -1;
}

void dlk_eval_brief(const struct dlk_eval *ev, char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = 0;
	if (ev->task == DLK_TASK_CLASSIFICATION) {
		snprintf(buf, len, "test accuracy %.2f%%", 100 * ev->accuracy);
		return;
	}
	if (ev->task == DLK_TASK_LM) {
		/* the validation split's: a language model's headline */
		snprintf(buf, len, "val loss %.4f  perplexity %.3f", ev->loss, ev->n_metrics ? ev->metrics[0].value : NAN);
		return;
	}
	for (int i = 0; i < ev->n_metrics && at < len; i++) {
		const struct dlk_metric *m = &ev->metrics[i];
		int w = snprintf(buf + at, len - at, "%s%s %.4f%s", i ? "  " : "test ", m->name, m->value,
		                 !strcmp(m->name, "psnr") ? " dB" : "");
		at += w > 0 ? (size_t)w : 0;
	}
}

void dlk_eval_copy(struct dlk_eval *dst, const struct dlk_eval *src)
{
	*dst = *src;
	size_t k = (size_t)(src->n_classes > 0 ? src->n_classes : 0);
	dst->precision = dst->recall = NULL;
	dst->confusion = NULL;
	if (src->precision) {
		dst->precision = xmalloc(sizeof(double) * k + 1);
		memcpy(dst->precision, src->precision, sizeof(double) * k);
	}
	if (src->recall) {
		dst->recall = xmalloc(sizeof(double) * k + 1);
		memcpy(dst->recall, src->recall, sizeof(double) * k);
	}
	dst->sample_in = dst->sample_out = dst->sample_target = NULL;
	if (src->n_samples > 0) {
		size_t sz = sizeof(float) * (size_t)src->n_samples * k + 1;
		dst->sample_out = xmalloc(sz);
		memcpy(dst->sample_out, src->sample_out, sz - 1);
		dst->sample_target = xmalloc(sz);
		memcpy(dst->sample_target, src->sample_target, sz - 1);
		if (src->sample_in) {
			dst->sample_in = xmalloc(sz);
			memcpy(dst->sample_in, src->sample_in, sz - 1);
		}
	}
	dst->f1 = NULL;
	if (src->f1) {
		dst->f1 = xmalloc(sizeof(double) * k + 1);
		memcpy(dst->f1, src->f1, sizeof(double) * k);
	}
	if (src->confusion) {
		dst->confusion = xmalloc(sizeof(long long) * k * k + 1);
		memcpy(dst->confusion, src->confusion, sizeof(long long) * k * k);
	}
}

void dlk_eval_release(struct dlk_eval *ev)
{
	free(ev->precision);
	free(ev->recall);
	free(ev->confusion);
	free(ev->f1);
	free(ev->sample_in);
	free(ev->sample_out);
	free(ev->sample_target);
	*ev = (struct dlk_eval)DLK_EVAL_INIT;
}
