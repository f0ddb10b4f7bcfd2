#include <math.h>
#include <string.h>

#include "lib/train/eval.h"
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
	*ev = (struct dlk_eval)DLK_EVAL_INIT;
}
