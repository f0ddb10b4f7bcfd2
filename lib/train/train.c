#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/train/train.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

/* Data and model must agree before a single step runs: sizes, shapes, labels. */
static int check_data(const struct dlk_train_opts *o, const struct dlk_dataset *ds, const char *which,
                      const struct dlk_net *net, struct dlk_err *err)
{
	const int *in = o->model->input;
	if (ds->sample_size != (size_t)in[0] * in[1] * in[2] ||
	    ((ds->shape[0] != in[0] || ds->shape[1] != in[1] || ds->shape[2] != in[2]) && o->model->input_rank != 1)) {
		char a[64], b[64];
		dlk_shape_str(ds->shape, a, sizeof(a));
		dlk_shape_str(in, b, sizeof(b));
		dlk_errf(err, DLK_EXIT_CONFIG, "model.input: the %s data has samples of %s but the model takes %s",
		         which, a, b);
		return dlk_err_hint(err, "set model.input to [%d, %d, %d]", ds->shape[0], ds->shape[1], ds->shape[2]);
	}
	for (size_t i = 0; i < ds->n; i++)
		if (ds->y[i] < 0 || ds->y[i] >= net->n_classes)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s data: sample %zu has label %d, outside the model's %d classes",
			                which, i, (int)ds->y[i], net->n_classes);
	return 0;
}

int dlk_train_run(const struct dlk_train_opts *o, struct dlk_train_result *res, struct dlk_err *err)
{
	const struct dlk_training *tr = o->training;
	const struct dlk_backend *be = o->backend ? o->backend : dlk_backend_cpu();
	const struct dlk_dataset *ds = o->train;
	struct dlk_net *net = &res->net;
	struct dlk_optimizer opt = DLK_OPTIMIZER_INIT;
	struct dlk_train_state st = { net, &opt, 0, 0, 0, &res->history };
	struct dlk_history_event hev;
	struct dlk_train_event ev;
	float *xhost = NULL, *xdev = NULL;
	int32_t *yhost = NULL, *ydev = NULL;
	size_t *perm = NULL;
	int rank = o->world > 0 ? o->rank : 0, world = o->world > 0 ? o->world : 1;
	int ret = -1, batch = tr->batch_size;
	char msg[256];

	*res = (struct dlk_train_result)DLK_TRAIN_RESULT_INIT;
	res->seed = tr->seed;
	dlk_rfc3339_now(res->started_at);
	double t_start = dlk_now();

	if (!ds || ds->n == 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "the training data is empty");
	if (batch <= 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.batch_size: must be positive, not %d", batch);
	if (tr->epochs <= 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.epochs: must be positive, not %d", tr->epochs);
	if (rank < 0 || rank >= world)
		return dlk_errf(err, DLK_EXIT_USAGE, "rank %d is outside a world of %d", rank, world);
	if (world > 1 && !o->allreduce)
		return dlk_errf(err, DLK_EXIT_USAGE, "a world of %d ranks needs a gradient all-reduce", world);

	be->set_threads(tr->threads);
	int n_classes = ds->n_classes;
	if (o->test && o->test->n_classes > n_classes)
		n_classes = o->test->n_classes;
	/* the model may have more outputs than the data shows classes (a class can be absent from a
	 * split), never fewer */
	if (dlk_net_build(net, o->model, o->spec_file, 0, be, err))
		return -1;
	if (net->n_classes < n_classes) {
		int last = net->n_layers - 1;
		const struct dlk_layer_spec *ls = &o->model->layers[last];
		char where[256];
		if (ls->line > 0)
			snprintf(where, sizeof(where), "model.layers[%d] (%s, %s:%d)", last, dlk_layer_kind_str(ls->kind),
			         o->spec_file ? o->spec_file : "dlk.yaml", ls->line);
		else
			snprintf(where, sizeof(where), "model.layers[%d] (%s)", last, dlk_layer_kind_str(ls->kind));
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: the model ends with %d outputs but the data has %d classes", where,
		         net->n_classes, n_classes);
		return dlk_err_hint(err, "make the last dense layer %d units wide", n_classes);
	}
	if (check_data(o, ds, "training", net, err) || (o->test && o->test->n && check_data(o, o->test, "test", net, err)))
		return -1;
	if (dlk_net_init_params(net, o->model->init, tr->seed, err) || dlk_net_reserve(net, batch, err))
		return -1;
	if (o->allreduce && o->grad_ready) {
		net->grad_ready = o->grad_ready;
		net->grad_ready_ctx = o->comm_ctx;
	}

	size_t begin, end;
	dlk_shard_range(ds->n, rank, world, &begin, &end);
	size_t shard = end - begin;
	if (shard == 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "the training data has %zu samples, fewer than the %d workers",
		                ds->n, world);
	long spe = (long)((shard + (size_t)batch - 1) / (size_t)batch);
	long total = spe * tr->epochs;
	if (dlk_optimizer_init(&opt, tr, net->n_params, spe, total, be, err))
		return -1;

	int resumed = 0;
	if (o->resume) {
		int r = o->resume(o->ckpt_ctx, &st, err);
		if (r < 0)
			goto out;
		resumed = r == 1;
		if (r == 0) {
			st.epoch = 0;
			st.step_in_epoch = 0;
			st.global_step = 0;
		}
	}
	if (o->broadcast && o->broadcast(o->comm_ctx, net->params, net->n_params, err))
		goto out;
	/* a start, or a resume at the checkpoint's step with the clock the checkpoint carried */
	memset(&hev, 0, sizeof(hev));
	hev.kind = resumed ? DLK_HISTORY_RESUME : DLK_HISTORY_START;
	hev.epoch = st.epoch;
	hev.step = st.global_step;
	if (hev.kind == DLK_HISTORY_START)
		res->history.elapsed_sec = 0;
	hev.elapsed_sec = res->history.elapsed_sec;
	hev.world = world;
	if (resumed)
		dlk_rfc3339_now(hev.time);
	else
		memcpy(hev.time, res->started_at, sizeof(hev.time));
	dlk_history_add_event(&res->history, &hev);
	double clock_base = res->history.elapsed_sec, t_train = dlk_now();

	xhost = xmalloc(sizeof(float) * (size_t)batch * ds->sample_size);
	yhost = xmalloc(sizeof(int32_t) * (size_t)batch);
	xdev = be->alloc(sizeof(float) * (size_t)batch * ds->sample_size);
	ydev = be->alloc(sizeof(int32_t) * (size_t)batch);
	res->loss_curve = xmalloc(sizeof(float) * (size_t)(total > 0 ? total : 1));
	if (!xdev || !ydev) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for a batch of %d", be->name, batch);
		goto out;
	}

	if (o->on_start)
		o->on_start(o->event_ctx, net, total);

	double train_time = 0;
	long train_samples = 0;
	int every = o->step_event_every > 0 ? o->step_event_every : 1;
	for (int epoch = st.epoch; epoch < tr->epochs; epoch++) {
		free(perm);
		perm = dlk_epoch_permutation(ds->n, tr->seed, epoch);
		double ep_t0 = dlk_now();
		long ep_steps = 0, ep_samples = 0;
		long first = epoch == st.epoch ? st.step_in_epoch : 0;
		for (long s = first; s < spe; s++) {
			if ((o->cancel && *o->cancel) || (o->max_steps > 0 && st.global_step >= o->max_steps)) {
				res->cancelled = o->cancel && *o->cancel;
				st.epoch = epoch;
				st.step_in_epoch = s;
				if (res->cancelled && o->checkpoint && o->checkpoint(o->ckpt_ctx, &st, err))
					goto out;
				res->train_loss = dlk_history_epoch_loss(&res->history);
				goto finish;
			}
			double t0 = dlk_now();
			/* global step s covers positions [s*batch*world, ...) of the epoch's permutation and
			 * rank r takes the r-th equal slice of it, so the global batch of a step does not depend
			 * on how many ranks share it: 1 x 256 and 2 x 128 train on the same samples */
			size_t g0 = (size_t)s * (size_t)batch * (size_t)world, left = shard * (size_t)world - g0;
			int nb = left / (size_t)world < (size_t)batch ? (int)(left / (size_t)world) : batch;
			size_t lo = g0 + (size_t)rank * (size_t)nb;
			dlk_dataset_gather(ds, perm + lo, (size_t)nb, xhost);
			for (int b = 0; b < nb; b++)
				yhost[b] = ds->y[perm[lo + (size_t)b]];
			be->to_device(xdev, xhost, sizeof(float) * (size_t)nb * ds->sample_size);
			be->to_device(ydev, yhost, sizeof(int32_t) * (size_t)nb);
			dlk_net_forward(net, xdev, nb, 1);
			float loss = dlk_net_backward(net, ydev, nb);
			if (be->check(msg, sizeof(msg))) {
				dlk_errf(err, DLK_EXIT_FAIL, "%s: %s", be->name, msg);
				goto out;
			}
			if (!isfinite(loss)) {
				dlk_errf(err, DLK_EXIT_FAIL, "training diverged at epoch %d, step %ld: the loss is %g",
				         epoch + 1, s + 1, (double)loss);
				dlk_err_hint(err, "lower training.lr (now %g) or set training.grad_clip", tr->lr);
				goto out;
			}
			if (o->allreduce && o->allreduce(o->comm_ctx, net->grads, net->n_params, err))
				goto out;
			double lr = dlk_optimizer_lr(&opt, st.global_step);
			if (opt.grad_clip > 0)
				dlk_optimizer_clip(&opt, net->grads);
			dlk_optimizer_step(&opt, net->params, net->grads, lr);
			st.global_step++;
			st.step_in_epoch = s + 1;
			res->loss_curve[res->n_loss++] = loss;
			dlk_history_add_step(&res->history, loss);
			res->history.elapsed_sec = clock_base + (dlk_now() - t_train);
			ep_steps++;
			ep_samples += nb;
			double dt = dlk_now() - t0;
			train_time += dt;
			train_samples += nb;
			if (o->on_event && ((s + 1) % every == 0 || s + 1 == spe)) {
				double ep_elapsed = dlk_now() - ep_t0;
				memset(&ev, 0, sizeof(ev));
				ev.kind = DLK_TRAIN_STEP;
				ev.epoch = epoch + 1;
				ev.epochs = tr->epochs;
				ev.step = s + 1;
				ev.steps_per_epoch = spe;
				ev.global_step = st.global_step;
				ev.total_steps = total;
				ev.loss = loss;
				ev.lr = lr;
				ev.samples_per_sec = ep_elapsed > 0 ? (double)ep_samples / ep_elapsed : 0;
				ev.elapsed_sec = dlk_now() - t_start;
				ev.eta_sec = ep_steps ? ep_elapsed / (double)ep_steps * (double)(total - st.global_step) : 0;
				o->on_event(o->event_ctx, &ev);
			}
			if (o->checkpoint && tr->checkpoint_every > 0 && st.global_step % tr->checkpoint_every == 0 &&
			    o->checkpoint(o->ckpt_ctx, &st, err))
				goto out;
		}
		/* the mean of all the epoch's steps, those before a resume included */
		res->train_loss = dlk_history_epoch_loss(&res->history);
		res->epochs_done = epoch + 1;
		st.epoch = epoch + 1;
		st.step_in_epoch = 0;
		int last = epoch + 1 == tr->epochs, evaluated = 0;
		double ep_train_sec = dlk_now() - ep_t0;
		if (o->test && o->test->n && (tr->eval_every_epoch || last)) {
			dlk_eval_release(&res->eval);
			if (dlk_evaluate(net, o->test, o->eval_batch, &res->eval, err))
				goto out;
			evaluated = 1;
		}
		{
			struct dlk_history_epoch he;
			memset(&he, 0, sizeof(he));
			he.epoch = epoch + 1;
			he.step = st.global_step;
			he.train_loss = res->train_loss;
			he.have_test = evaluated;
			he.test_loss = evaluated ? res->eval.loss : 0;
			he.test_accuracy = evaluated ? res->eval.accuracy : 0;
			/* training only: the evaluation's time is not throughput */
			he.samples_per_sec = ep_train_sec > 0 ? (double)ep_samples * world / ep_train_sec : 0;
			res->history.elapsed_sec = clock_base + (dlk_now() - t_train);
			he.elapsed_sec = res->history.elapsed_sec;
			he.lr = dlk_optimizer_lr(&opt, st.global_step > 0 ? st.global_step - 1 : 0);
			he.world = world;
			dlk_rfc3339_now(he.time);
			dlk_history_add_epoch(&res->history, &he);
		}
		if (o->checkpoint && o->checkpoint(o->ckpt_ctx, &st, err))
			goto out;
		if (o->on_event) {
			memset(&ev, 0, sizeof(ev));
			ev.kind = DLK_TRAIN_EPOCH;
			ev.epoch = epoch + 1;
			ev.epochs = tr->epochs;
			ev.step = spe;
			ev.steps_per_epoch = spe;
			ev.global_step = st.global_step;
			ev.total_steps = total;
			ev.loss = res->train_loss;
			ev.lr = dlk_optimizer_lr(&opt, st.global_step > 0 ? st.global_step - 1 : 0);
			ev.samples_per_sec = dlk_now() > ep_t0 ? (double)ep_samples / (dlk_now() - ep_t0) : 0;
			ev.elapsed_sec = dlk_now() - t_start;
			ev.eval = res->eval.n ? &res->eval : NULL;
			ev.history = &res->history;
			o->on_event(o->event_ctx, &ev);
		}
	}
finish:
	/* a run stopped early still reports metrics of the weights it has */
	if (!res->eval.n && o->test && o->test->n && dlk_evaluate(net, o->test, o->eval_batch, &res->eval, err))
		goto out;
	res->steps = st.global_step;
	res->seconds = dlk_now() - t_start;
	res->train_samples_per_sec = train_time > 0 ? (double)train_samples / train_time : 0;
	dlk_rfc3339_now(res->finished_at);
	if (o->on_event) {
		memset(&ev, 0, sizeof(ev));
		ev.kind = DLK_TRAIN_DONE;
		ev.epoch = res->epochs_done;
		ev.epochs = tr->epochs;
		ev.steps_per_epoch = spe;
		ev.global_step = st.global_step;
		ev.total_steps = total;
		ev.loss = res->train_loss;
		ev.samples_per_sec = res->train_samples_per_sec;
		ev.elapsed_sec = res->seconds;
		ev.eval = res->eval.n ? &res->eval : NULL;
		ev.history = &res->history;
		ev.finished_at = res->finished_at;
		o->on_event(o->event_ctx, &ev);
	}
	ret = res->cancelled ? 1 : 0;
out:
	net->grad_ready = NULL; /* its context belongs to the caller's run */
	free(perm);
	free(xhost);
	free(yhost);
	be->free(xdev);
	be->free(ydev);
	dlk_optimizer_release(&opt);
	return ret;
}

void dlk_train_result_release(struct dlk_train_result *r)
{
	dlk_net_release(&r->net);
	dlk_eval_release(&r->eval);
	dlk_history_release(&r->history);
	free(r->loss_curve);
	*r = (struct dlk_train_result)DLK_TRAIN_RESULT_INIT;
}
