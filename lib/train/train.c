#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/data/bpe.h"
#include "lib/export/hf.h"
#include "lib/nn/loss.h"
#include "lib/train/loader.h"
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
	if (o->model->task == DLK_TASK_LM) {
		/* a target token per input token, each below the vocabulary the logits cover */
		int V = net->layers[net->n_layers - 1].out[2];
		if (!ds->t || ds->target_size != ds->sample_size)
			return dlk_errf(err, DLK_EXIT_CONFIG, "model.task: the %s data is not a token corpus (data.format "
			                "text gives one for task lm)", which);
		for (size_t i = 0; i < ds->n * ds->target_size; i++)
			if (ds->t[i] >= (float)V) {
				dlk_errf(err, DLK_EXIT_CONFIG, "the %s data has token id %.0f but the model's logits cover a "
				         "vocabulary of %d", which, (double)ds->t[i], V);
				return dlk_err_hint(err, "make the last layer's width the tokenizer's vocabulary, %d",
				                    ds->tokenizer ? (int)ds->tokenizer->vocab_size : 257);
			}
		return 0;
	}
	if (o->model->task != DLK_TASK_CLASSIFICATION) {
		if (!dlk_dataset_has_targets(ds))
			return dlk_errf(err, DLK_EXIT_CONFIG, "model.task: the %s data has class labels, not the float "
			                "targets task %s needs", which,
			                o->model->task == DLK_TASK_MULTILABEL ? "multilabel" :
			                o->model->task == DLK_TASK_IMAGE ? "image" : "regression");
		if (ds->target_size != (size_t)net->n_classes) {
			dlk_errf(err, DLK_EXIT_CONFIG, "the %s data has %zu target values per sample but the model ends "
			         "with %d outputs", which, ds->target_size, net->n_classes);
			return dlk_err_hint(err, "make the last layer give one output per target value");
		}
		return 0;
	}
	for (size_t i = 0; i < ds->n; i++)
		if (ds->y[i] < 0 || ds->y[i] >= net->n_classes)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s data: sample %zu has label %d, outside the model's %d classes",
			                which, i, (int)ds->y[i], net->n_classes);
	return 0;
}

/* What one run works with, from its setup to its cleanup. */
struct run {
	const struct dlk_train_opts *o;
	const struct dlk_training *tr;
	const struct dlk_backend *be;
	const struct dlk_dataset *ds;       /* the training data */
	struct dlk_train_result *res;
	struct dlk_net *net;                /* res->net */
	struct dlk_optimizer opt;
	struct dlk_train_state st;
	int rank, world, batch;
	int accum;                          /* micro-batches per optimizer step (training.accumulate) */
	long mspe;                          /* micro-batches per epoch */
	float *acc;                         /* device: the micro-batches' gradients summed (accum > 1) */
	size_t shard;                       /* this rank's samples per epoch */
	int sharded;                        /* the rank holds only samples [base, base + ds->n) of split_n */
	size_t base, split_n;
	long spe, total;                    /* steps per epoch, steps in all */
	size_t *perm;                       /* the epoch's order of the samples */
	float *xhost, *xdev;                /* a batch of samples ... */
	int32_t *yhost, *ydev;              /* ... and of labels */
	float *thost, *tdev;                /* ... or of float targets (tasks other than classification) */
	struct dlk_loss_spec loss;
	double t_start;
	double train_time;                  /* in steps, evaluation and callbacks excluded */
	long train_samples;
	double clock_base, t_train;         /* the history's clock: what a checkpoint carried, and since */
	double phase_ep[DLK_PHASES];        /* this epoch's seconds in each phase of the steps */
	double ar_sec;                      /* the last step's all-reduce wait */
	double data_sec;                    /* the last step's wait for its batches (every micro-batch's) */
	int zero;                           /* ZeRO-1: the optimizer holds this rank's shard alone */
	struct dlk_loader *loader;          /* the next micro-batch gathered while this one computes
	                                       (samples read from files, a device's backend) */
	int posted_epoch;                   /* the micro-batch the loader has in flight, when it has */
	long posted_ms;
};

const char *dlk_step_phase_name(int phase)
{
	static const char *const names[DLK_PHASES] = { "data", "compute", "allreduce" };
	return phase >= 0 && phase < DLK_PHASES ? names[phase] : "?";
}

static int check_opts(const struct run *r, struct dlk_err *err)
{
	/* a rank's shard may be empty: setup_shards says which, on every rank */
	if (!r->ds || (r->ds->n == 0 && !(r->ds->sharded && r->world > 1)))
		return dlk_errf(err, DLK_EXIT_CONFIG, "the training data is empty");
	if (r->batch <= 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.batch_size: must be positive, not %d", r->batch);
	if (r->tr->epochs <= 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.epochs: must be positive, not %d", r->tr->epochs);
	if (r->rank < 0 || r->rank >= r->world)
		return dlk_errf(err, DLK_EXIT_USAGE, "rank %d is outside a world of %d", r->rank, r->world);
	if (r->world > 1 && !r->o->allreduce)
		return dlk_errf(err, DLK_EXIT_USAGE, "a world of %d ranks needs a gradient all-reduce", r->world);
	return 0;
}

/* The network, checked against the data, initialised and with room for a batch. */
static int setup_model(struct run *r, struct dlk_err *err)
{
	const struct dlk_train_opts *o = r->o;
	int n_classes = r->ds->n_classes;

	r->be->set_threads(r->tr->threads);
	if (r->tr->precision == DLK_PRECISION_BF16 && !r->be->set_precision)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "training.precision: bf16 is not written for the %s backend yet (the CPU backend has it); "
		                "set training.precision: fp32", r->be->name);
	if (r->be->set_precision)
		r->be->set_precision(r->tr->precision == DLK_PRECISION_BF16);
	if (o->test && o->test->n_classes > n_classes)
		n_classes = o->test->n_classes;
	/* the model may have more outputs than the data shows classes (a class can be absent from a
	 * split), never fewer */
	if (dlk_net_build(r->net, o->model, o->spec_file, 0, r->be, err) ||
	    (o->model->task == DLK_TASK_CLASSIFICATION &&
	     dlk_net_check_classes(r->net, o->model, o->spec_file, n_classes, 0, err)))
		return -1;
	r->loss = dlk_loss_of(o->model, r->tr);
	if (check_data(o, r->ds, "training", r->net, err) ||
	    (o->test && o->test->n && check_data(o, o->test, "test", r->net, err)))
		return -1;
	if (dlk_net_init_params(r->net, o->model->init, r->tr->seed, err) ||
	    (o->model->init_from && dlk_hf_gpt2_import(r->net, o->model->init_from, o->spec_file, err)))
		return -1;
	r->res->activation_bytes_whole = dlk_net_batch_bytes(r->net, r->batch);
	r->res->recomputed_blocks = dlk_net_set_recompute(r->net, r->tr->recompute);
	r->res->activation_bytes = dlk_net_batch_bytes(r->net, r->batch);
	if (dlk_net_reserve(r->net, r->batch, err))
		return -1;
	if (o->allreduce && o->grad_ready) {
		r->net->grad_ready = o->grad_ready;
		r->net->grad_ready_ctx = o->comm_ctx;
	}
	return 0;
}

/* A sharded training set (each rank loaded only its part): where this rank's samples sit in the
 * split and how many each rank trains per epoch, from every rank's count. Every rank takes the
 * smallest count, so that they all make the same steps. */
static int setup_shards(struct run *r, struct dlk_err *err)
{
	const struct dlk_dataset *ds = r->ds;
	unsigned long long *counts = xcalloc((size_t)r->world, sizeof(*counts)), min = 0;
	size_t base = 0, total = 0;
	int ret = -1, least = 0;

	if (!r->o->gather_counts) {
		dlk_errf(err, DLK_EXIT_USAGE, "a sharded training set in a world of %d ranks needs the ranks' counts",
		         r->world);
		goto out;
	}
	if (r->o->gather_counts(r->o->comm_ctx, (unsigned long long)ds->n, counts, err))
		goto out;
	for (int i = 0; i < r->world; i++) {
		if (i < r->rank)
			base += (size_t)counts[i];
		total += (size_t)counts[i];
		if (i == 0 || counts[i] < min) {
			min = counts[i];
			least = i;
		}
	}
	if (!ds->by_file && (base != ds->base || total != ds->total)) {
		dlk_errf(err, DLK_EXIT_CONFIG,
		         "rank %d loaded samples [%zu, %zu) of %zu, but the ranks' parts make [%zu, %zu) of %zu",
		         r->rank, ds->base, ds->base + ds->n, ds->total, base, base + ds->n, total);
		dlk_err_hint(err, "every rank must read the same training data");
		goto out;
	}
	if (min == 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "rank %d of %d holds no training samples (the split has %zu)", least,
		         r->world, total);
		dlk_err_hint(err, "use fewer workers, more shard files, or data.shard: false");
		goto out;
	}
	r->sharded = 1;
	r->base = base;
	r->split_n = total;
	r->shard = (size_t)min;
	ret = 0;
out:
	free(counts);
	return ret;
}

/* This rank's share of every epoch, the steps that makes, and the optimizer over them. */
static int setup_schedule(struct run *r, struct dlk_err *err)
{
	size_t begin, end;

	if (r->ds->sharded && r->world > 1) {
		if (setup_shards(r, err))
			return -1;
	} else {
		dlk_shard_range(r->ds->n, r->rank, r->world, &begin, &end);
		r->shard = end - begin;
		if (r->shard == 0)
			return dlk_errf(err, DLK_EXIT_CONFIG, "the training data has %zu samples, fewer than the %d workers",
			                r->ds->n, r->world);
	}
	r->mspe = (long)((r->shard + (size_t)r->batch - 1) / (size_t)r->batch);
	r->spe = (r->mspe + r->accum - 1) / r->accum;
	r->total = r->spe * r->tr->epochs;
	r->st.sched_spe = r->spe;
	r->st.sched_total = r->total;
	if (dlk_optimizer_init(&r->opt, r->tr, r->net->n_params, r->spe, r->total, r->be, err))
		return -1;
	{
		/* weight decay on the matrices and tables alone, nanoGPT's groups (every parameter with
		 * decay_norms_and_biases); the net says which ranges those are */
		size_t *ranges = xcalloc(6 * (size_t)r->net->n_layers + 2, sizeof(size_t));
		int n = dlk_net_no_decay_ranges(r->net, r->tr->decay_norms_and_biases, ranges);
		if (n)
			dlk_optimizer_set_no_decay(&r->opt, ranges, n);
		free(ranges);
	}
	r->res->optim_full_bytes = dlk_optimizer_state_bytes(&r->opt);
	if (r->zero) {
		size_t off, len;
		r->o->zero_shard(r->o->comm_ctx, r->net->n_params, &off, &len);
		if (dlk_optimizer_shard(&r->opt, off, len, err))
			return -1;
	}
	r->res->optim_state_bytes = dlk_optimizer_state_bytes(&r->opt);
	return 0;
}

/* Where the run starts: a checkpoint's state when there is one, and rank 0's weights everywhere;
 * the history says which. */
static int setup_state(struct run *r, struct dlk_err *err)
{
	const struct dlk_train_opts *o = r->o;
	struct dlk_history *h = &r->res->history;
	struct dlk_history_event hev;
	int resumed = 0;

	if (o->resume) {
		int got = o->resume(o->ckpt_ctx, &r->st, err);
		if (got < 0)
			return -1;
		resumed = got == 1;
		/* a checkpoint of another world size: the schedule stays the one the run began with */
		if (resumed && (r->st.sched_spe != r->spe || r->st.sched_total != r->total))
			dlk_optimizer_set_schedule(&r->opt, r->tr, r->st.sched_spe, r->st.sched_total);
		if (got == 0) {
			r->st.epoch = 0;
			r->st.step_in_epoch = 0;
			r->st.global_step = 0;
		}
	}
	if (o->broadcast && o->broadcast(o->comm_ctx, r->net->params, r->net->n_params, err))
		return -1;
	/* a start, or a resume at the checkpoint's step with the clock the checkpoint carried */
	memset(&hev, 0, sizeof(hev));
	hev.kind = resumed ? DLK_HISTORY_RESUME : DLK_HISTORY_START;
	hev.epoch = r->st.epoch;
	hev.step = r->st.global_step;
	if (hev.kind == DLK_HISTORY_START)
		h->elapsed_sec = 0;
	hev.elapsed_sec = h->elapsed_sec;
	hev.world = r->world;
	if (resumed)
		dlk_rfc3339_now(hev.time);
	else
		memcpy(hev.time, r->res->started_at, sizeof(hev.time));
	dlk_history_add_event(h, &hev);
	r->clock_base = h->elapsed_sec;
	r->t_train = dlk_now();
	return 0;
}

static int setup_buffers(struct run *r, struct dlk_err *err)
{
	const struct dlk_backend *be = r->be;
	size_t b = (size_t)r->batch;
	int cpu = be == dlk_backend_cpu();
	/* files are decoded on loader threads, a micro-batch ahead; so is a device's batch (the CPU
	 * backend gathers in place, between steps that keep every core busy) */
	int ahead = dlk_dataset_streams(r->ds) || !cpu || r->o->prefetch == 1;

	r->yhost = xmalloc(sizeof(int32_t) * b);
	r->xdev = be->alloc(sizeof(float) * b * r->ds->sample_size);
	r->ydev = be->alloc(sizeof(int32_t) * b);
	/* the CPU backend's memory is the host's: the batch is gathered in place (to_device of a
	 * buffer onto itself copies nothing); gathered ahead, the loader's buffers are the host's */
	r->xhost = cpu ? r->xdev : ahead ? NULL : xmalloc(sizeof(float) * b * r->ds->sample_size);
	r->res->loss_curve = xmalloc(sizeof(float) * (size_t)(r->total > 0 ? r->total : 1));
	if (dlk_dataset_has_targets(r->ds)) {
		size_t tn = b * r->ds->target_size;
		r->tdev = be->alloc(sizeof(float) * tn);
		r->thost = cpu ? r->tdev : ahead ? NULL : xmalloc(sizeof(float) * tn);
		if (!r->tdev)
			return dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for the targets of a batch of %d", be->name,
			                r->batch);
	}
	if (!r->xdev || !r->ydev)
		return dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for a batch of %d", be->name, r->batch);
	if (ahead) {
		r->loader = dlk_loader_start(r->ds, r->batch, r->o->loader_threads);
		r->posted_ms = -1;
	}
	if (r->accum > 1 && !(r->acc = be->alloc(sizeof(float) * (r->net->n_params ? r->net->n_params : 1))))
		return dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for the accumulated gradients (%zu parameters)",
		                be->name, r->net->n_params);
	return 0;
}

/* where micro-batch s of the epoch starts in r->perm, and how many samples it takes */
static int batch_at(const struct run *r, long s, size_t *lo)
{
	size_t world = (size_t)r->world;
	int nb;

	if (r->sharded) {
		*lo = (size_t)s * (size_t)r->batch;
		nb = r->shard - *lo < (size_t)r->batch ? (int)(r->shard - *lo) : r->batch;
	} else {
		size_t g0 = (size_t)s * (size_t)r->batch * world, left = r->shard * world - g0;
		nb = left / world < (size_t)r->batch ? (int)(left / world) : r->batch;
		*lo = g0 + (size_t)r->rank * (size_t)nb;
	}
	return nb;
}

/* Batches gathered ahead (lib/train/loader.h): micro-batch s from the loader, which gathered it
 * while the one before computed unless it is the epoch's first (or the run's first after a
 * resume); then the next one of the epoch is posted. Within an epoch only: the permutation is
 * the epoch's. */
static int load_batch_ahead(struct run *r, int epoch, long s, struct dlk_err *err)
{
	const struct dlk_dataset *ds = r->ds;
	const float *x, *t;
	const int32_t *y;
	size_t lo;
	int nb = batch_at(r, s, &lo);

	if (r->posted_epoch != epoch || r->posted_ms != s) {
		if (r->posted_ms >= 0)
			dlk_loader_wait(r->loader, &x, &y, &t); /* not the one wanted: dropped */
		dlk_loader_post(r->loader, r->perm + lo, (size_t)nb, r->tr->seed, epoch);
	}
	dlk_loader_wait(r->loader, &x, &y, &t);
	r->posted_ms = -1;
	if (dlk_dataset_failed(ds, err))
		return -1;
	r->be->to_device(r->xdev, x, sizeof(float) * (size_t)nb * ds->sample_size);
	r->be->to_device(r->ydev, y, sizeof(int32_t) * (size_t)nb);
	if (r->tdev)
		r->be->to_device(r->tdev, t, sizeof(float) * (size_t)nb * ds->target_size);
	if (s + 1 < r->mspe) {
		size_t lo2;
		int nb2 = batch_at(r, s + 1, &lo2);
		dlk_loader_post(r->loader, r->perm + lo2, (size_t)nb2, r->tr->seed, epoch);
		r->posted_epoch = epoch;
		r->posted_ms = s + 1;
	}
	return nb;
}

/* Puts this rank's part of global micro-batch s of the epoch on the device (with
 * training.accumulate K, optimizer step s takes micro-batches sK .. sK + K - 1, so a step covers
 * the positions of a K-times-larger batch); returns how many samples, or -1 with err when a
 * sample's file could not be read.
 * Whole data on every rank: global step s covers positions [s*batch*world, ...) of the epoch's
 * permutation and rank r takes the r-th equal slice of it, so the global batch of a step does not
 * depend on how many ranks share it: 1 x 256 and 2 x 128 train on the same samples.
 * Sharded data: the permutation is still the split's, one per epoch, the same on every rank; each
 * rank walks it restricted to the samples it holds (dlk_shard_walk) and step s takes positions
 * [s*batch, ...) of that walk, up to the smallest rank's count. Each global batch then holds
 * `batch` samples of every rank's part, so it depends on the world size (1 x 256 and 2 x 128 no
 * longer see the same batches; each epoch still sees each sample once, less at most the
 * difference between the largest and the smallest part). */
static int load_batch(struct run *r, int epoch, long s, struct dlk_err *err)
{
	const struct dlk_dataset *ds = r->ds;
	size_t lo;
	int nb;

	if (r->loader)
		return load_batch_ahead(r, epoch, s, err);
	nb = batch_at(r, s, &lo);
	/* the augmentation (format images) is drawn per (seed, epoch, sample): resumable, and the
	 * same whatever the world size */
	dlk_dataset_gather_train(ds, r->perm + lo, (size_t)nb, r->tr->seed, epoch, r->xhost);
	for (int b = 0; b < nb; b++)
		r->yhost[b] = ds->y[r->perm[lo + (size_t)b]];
	r->be->to_device(r->xdev, r->xhost, sizeof(float) * (size_t)nb * ds->sample_size);
	r->be->to_device(r->ydev, r->yhost, sizeof(int32_t) * (size_t)nb);
	if (r->tdev) {
		size_t k = ds->target_size;
		dlk_dataset_targets(ds, r->perm + lo, 0, (size_t)nb, r->thost);
		r->be->to_device(r->tdev, r->thost, sizeof(float) * (size_t)nb * k);
	}
	return nb;
}

/* ZeRO-1's update: the gradients reduce-scattered (this rank gets the mean of its shard), the
 * norm for clipping summed from every shard's squares, this rank's shard updated, and the
 * parameters all-gathered. Element-wise the same update as the plain one, so the weights are
 * those of plain data parallel (bit for bit without clipping: the ring's reduce-scatter is its
 * all-reduce's first half; the norm's sum differs in rounding). The two collectives together
 * move what the all-reduce moves; the wait for both is the step's all-reduce phase. */
static int zero_step(struct run *r, double lr, struct dlk_err *err)
{
	const struct dlk_train_opts *o = r->o;
	struct dlk_net *net = r->net;
	double t0 = dlk_now(), t1;

	if (o->zero_reduce_scatter(o->comm_ctx, net->grads, net->n_params, err))
		return -1;
	t1 = dlk_now();
	if (r->opt.grad_clip > 0) {
		double ss = r->opt.state_n ? r->be->sum_squares(net->grads + r->opt.state_off, r->opt.state_n) : 0;
		if (o->zero_sum(o->comm_ctx, &ss, err))
			return -1;
		dlk_optimizer_clip_shard(&r->opt, net->grads, sqrt(ss));
	}
	dlk_optimizer_step(&r->opt, net->params, net->grads, lr);
	double t2 = dlk_now();
	if (o->zero_allgather(o->comm_ctx, net->params, net->n_params, err))
		return -1;
	r->ar_sec = (t1 - t0) + (dlk_now() - t2);
	return 0;
}

/* One optimizer step: the gradients of its micro-batches (one unless training.accumulate), their
 * mean over the samples and the ranks, the update. Fills the samples it took, their mean loss and
 * the learning rate used. With several micro-batches, the gradient of each (the mean over its nb
 * samples) is summed into r->acc weighted by nb, and the step's gradient is that sum over all
 * its samples: the gradient of one batch of them all. The gradient-ready hook (which starts the
 * all-reduce during backward) is off then: the gradient is whole only after the last one. */
static int train_step(struct run *r, int epoch, long s, int *n_samples, float *loss, double *lr, struct dlk_err *err)
{
	const struct dlk_train_opts *o = r->o;
	const struct dlk_backend *be = r->be;
	struct dlk_net *net = r->net;
	long m0 = s * r->accum, m1 = m0 + r->accum < r->mspe ? m0 + r->accum : r->mspe;
	int total = 0, many = m1 - m0 > 1;
	double lsum = 0;
	char msg[256];

	if (many)
		net->grad_ready = NULL;
	for (long ms = m0; ms < m1; ms++) {
		double td = dlk_now();
		int nb = load_batch(r, epoch, ms, err);
		r->data_sec += dlk_now() - td;
		if (nb < 0)
			return -1;
		dlk_net_forward(net, r->xdev, nb, 1);
		float l = dlk_loss_backward(net, &r->loss, r->ydev, r->tdev, nb);
		if (be->check(msg, sizeof(msg)))
			return dlk_errf(err, DLK_EXIT_FAIL, "%s: %s", be->name, msg);
		if (!isfinite(l)) {
			dlk_errf(err, DLK_EXIT_FAIL, "training diverged at epoch %d, step %ld: the loss is %g", epoch + 1, s + 1,
			         (double)l);
			return dlk_err_hint(err, "lower training.lr (now %g) or set training.grad_clip", r->tr->lr);
		}
		lsum += (double)l * nb;
		total += nb;
		if (!many)
			continue;
		if (ms == m0) {
			be->copy(r->acc, net->grads, sizeof(float) * net->n_params);
			be->scale(r->acc, net->n_params, (float)nb);
		} else if (ms + 1 < m1) {
			be->axpy(net->n_params, (float)nb, net->grads, r->acc);
		} else {
			be->scale(net->grads, net->n_params, (float)nb);
			be->axpy(net->n_params, 1.0f, r->acc, net->grads);
			be->scale(net->grads, net->n_params, 1.0f / (float)total);
		}
	}
	if (many && o->allreduce && o->grad_ready)
		net->grad_ready = o->grad_ready;
	*n_samples = total;
	*loss = (float)(lsum / (total ? total : 1));
	*lr = dlk_optimizer_lr(&r->opt, r->st.global_step);
	if (r->zero)
		return zero_step(r, *lr, err);
	if (o->allreduce) {
		double t0 = dlk_now();
		if (o->allreduce(o->comm_ctx, net->grads, net->n_params, err))
			return -1;
		r->ar_sec = dlk_now() - t0;
	}
	if (r->opt.grad_clip > 0)
		dlk_optimizer_clip(&r->opt, net->grads);
	dlk_optimizer_step(&r->opt, net->params, net->grads, *lr);
	return 0;
}

/* An event with what every kind carries filled in. */
static struct dlk_train_event event(const struct run *r, enum dlk_train_event_kind kind, int epoch)
{
	struct dlk_train_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.epoch = epoch;
	ev.epochs = r->tr->epochs;
	ev.steps_per_epoch = r->spe;
	ev.global_step = r->st.global_step;
	ev.total_steps = r->total;
	ev.world = r->world;
	memcpy(ev.phase_sec, r->phase_ep, sizeof(ev.phase_sec));
	memcpy(ev.phase_total_sec, r->res->phase_sec, sizeof(ev.phase_total_sec));
	return ev;
}

/* The epoch in the history: its losses, the test metrics (when there are), its throughput. */
static void record_epoch(struct run *r, int epoch, int evaluated, long ep_samples, double ep_train_sec)
{
	struct dlk_train_result *res = r->res;
	struct dlk_history_epoch he;

	memset(&he, 0, sizeof(he));
	he.epoch = epoch + 1;
	he.step = r->st.global_step;
	he.train_loss = res->train_loss;
	he.have_test = evaluated;
	he.test_loss = evaluated ? res->eval.loss : 0;
	he.test_accuracy = evaluated ? res->eval.accuracy : 0;
	if (evaluated && res->eval.task != DLK_TASK_CLASSIFICATION && res->eval.n_metrics > 0) {
		snprintf(he.test_metric, sizeof(he.test_metric), "%s", res->eval.metrics[0].name);
		he.test_metric_value = res->eval.metrics[0].value;
	}
	/* training only: the evaluation's time is not throughput */
	he.samples_per_sec = ep_train_sec > 0 ? (double)ep_samples * r->world / ep_train_sec : 0;
	res->history.elapsed_sec = r->clock_base + (dlk_now() - r->t_train);
	he.elapsed_sec = res->history.elapsed_sec;
	he.lr = dlk_optimizer_lr(&r->opt, r->st.global_step > 0 ? r->st.global_step - 1 : 0);
	he.world = r->world;
	dlk_rfc3339_now(he.time);
	dlk_history_add_epoch(&res->history, &he);
}

/* The epoch's end: its mean loss, the test metrics (when due), the history, a checkpoint, the
 * event. */
static int end_epoch(struct run *r, int epoch, long ep_samples, double ep_t0, struct dlk_err *err)
{
	const struct dlk_train_opts *o = r->o;
	struct dlk_train_result *res = r->res;
	int evaluated = 0;

	/* the mean of all the epoch's steps, those before a resume included */
	res->train_loss = dlk_history_epoch_loss(&res->history);
	res->epochs_done = epoch + 1;
	r->st.epoch = epoch + 1;
	r->st.step_in_epoch = 0;
	double ep_train_sec = dlk_now() - ep_t0;
	if (o->test && o->test->n && (r->tr->eval_every_epoch || epoch + 1 == r->tr->epochs)) {
		dlk_eval_release(&res->eval);
		if (dlk_evaluate_task(r->net, o->test, o->eval_batch, o->model, r->tr, &res->eval, err))
			return -1;
		evaluated = 1;
	}
	record_epoch(r, epoch, evaluated, ep_samples, ep_train_sec);
	if (o->checkpoint && o->checkpoint(o->ckpt_ctx, &r->st, err))
		return -1;
	if (o->on_event) {
		struct dlk_train_event ev = event(r, DLK_TRAIN_EPOCH, epoch + 1);
		ev.step = r->spe;
		ev.loss = res->train_loss;
		ev.lr = dlk_optimizer_lr(&r->opt, r->st.global_step > 0 ? r->st.global_step - 1 : 0);
		ev.samples_per_sec = dlk_now() > ep_t0 ? (double)ep_samples / (dlk_now() - ep_t0) : 0;
		ev.elapsed_sec = dlk_now() - r->t_start;
		ev.eval = res->eval.n ? &res->eval : NULL;
		ev.history = &res->history;
		o->on_event(o->event_ctx, &ev);
	}
	return 0;
}

/* The run's end, early or not: metrics of the weights it has, the totals, the event. */
static int finish(struct run *r, struct dlk_err *err)
{
	const struct dlk_train_opts *o = r->o;
	struct dlk_train_result *res = r->res;

	if (!res->eval.n && o->test && o->test->n &&
	    dlk_evaluate_task(r->net, o->test, o->eval_batch, o->model, r->tr, &res->eval, err))
		return -1;
	res->steps = r->st.global_step;
	res->seconds = dlk_now() - r->t_start;
	res->train_samples_per_sec = r->train_time > 0 ? (double)r->train_samples / r->train_time : 0;
	dlk_rfc3339_now(res->finished_at);
	if (o->on_event) {
		struct dlk_train_event ev = event(r, DLK_TRAIN_DONE, res->epochs_done);
		ev.loss = res->train_loss;
		ev.samples_per_sec = res->train_samples_per_sec;
		ev.elapsed_sec = res->seconds;
		ev.eval = res->eval.n ? &res->eval : NULL;
		ev.history = &res->history;
		ev.finished_at = res->finished_at;
		o->on_event(o->event_ctx, &ev);
	}
	return 0;
}

/* The epochs and their steps, from where the state says; 1 when stopped early, 0 at the end. */
static int run_epochs(struct run *r, struct dlk_err *err)
{
	const struct dlk_train_opts *o = r->o;
	const struct dlk_training *tr = r->tr;
	struct dlk_train_result *res = r->res;
	struct dlk_train_state *st = &r->st;
	int every = o->step_event_every > 0 ? o->step_event_every : 1;

	for (int epoch = st->epoch; epoch < tr->epochs; epoch++) {
		free(r->perm);
		r->perm = dlk_epoch_permutation(r->sharded ? r->split_n : r->ds->n, tr->seed, epoch);
		if (r->sharded)
			dlk_shard_walk(r->perm, r->split_n, r->base, r->ds->n);
		double ep_t0 = dlk_now();
		long ep_steps = 0, ep_samples = 0;
		memset(r->phase_ep, 0, sizeof(r->phase_ep));
		long first = epoch == st->epoch ? st->step_in_epoch : 0;
		for (long s = first; s < r->spe; s++) {
			if ((o->cancel && *o->cancel) || (o->max_steps > 0 && st->global_step >= o->max_steps)) {
				res->cancelled = o->cancel && *o->cancel;
				st->epoch = epoch;
				st->step_in_epoch = s;
				if (res->cancelled && o->checkpoint && o->checkpoint(o->ckpt_ctx, st, err))
					return -1;
				res->train_loss = dlk_history_epoch_loss(&res->history);
				return 1;
			}
			double t0 = dlk_now(), lr = 0;
			float loss = 0;
			int nb = 0;
			r->ar_sec = 0;
			r->data_sec = 0;
			if (train_step(r, epoch, s, &nb, &loss, &lr, err))
				return -1;
			double t2 = dlk_now(),
			       split[DLK_PHASES] = { r->data_sec, t2 - t0 - r->data_sec - r->ar_sec, r->ar_sec };
			for (int k = 0; k < DLK_PHASES; k++) {
				r->phase_ep[k] += split[k];
				res->phase_sec[k] += split[k];
			}
			st->global_step++;
			st->step_in_epoch = s + 1;
			res->loss_curve[res->n_loss++] = loss;
			dlk_history_add_step(&res->history, loss);
			res->history.elapsed_sec = r->clock_base + (dlk_now() - r->t_train);
			ep_steps++;
			ep_samples += nb;
			r->train_time += dlk_now() - t0;
			r->train_samples += nb;
			if (o->on_event && ((s + 1) % every == 0 || s + 1 == r->spe)) {
				double ep_elapsed = dlk_now() - ep_t0;
				struct dlk_train_event ev = event(r, DLK_TRAIN_STEP, epoch + 1);
				ev.step = s + 1;
				ev.loss = loss;
				ev.lr = lr;
				ev.samples_per_sec = ep_elapsed > 0 ? (double)ep_samples / ep_elapsed : 0;
				ev.elapsed_sec = dlk_now() - r->t_start;
				ev.eta_sec = ep_steps ? ep_elapsed / (double)ep_steps * (double)(r->total - st->global_step) : 0;
				o->on_event(o->event_ctx, &ev);
			}
			if (o->checkpoint && tr->checkpoint_every > 0 && st->global_step % tr->checkpoint_every == 0 &&
			    o->checkpoint(o->ckpt_ctx, st, err))
				return -1;
		}
		if (end_epoch(r, epoch, ep_samples, ep_t0, err))
			return -1;
	}
	return 0;
}

int dlk_train_run(const struct dlk_train_opts *o, struct dlk_train_result *res, struct dlk_err *err)
{
	struct run r = { .o = o, .tr = o->training, .be = o->backend ? o->backend : dlk_backend_cpu(),
	                 .ds = o->train, .res = res, .net = &res->net, .opt = DLK_OPTIMIZER_INIT,
	                 .rank = o->world > 0 ? o->rank : 0, .world = o->world > 0 ? o->world : 1,
	                 .batch = o->training->batch_size,
	                 .accum = o->training->accumulate > 1 ? o->training->accumulate : 1,
	                 .zero = o->training->zero >= 1 && o->zero_shard && o->zero_reduce_scatter && o->zero_allgather &&
	                         o->zero_sum && o->world > 1 };
	int ret = -1;

	*res = (struct dlk_train_result)DLK_TRAIN_RESULT_INIT;
	r.st = (struct dlk_train_state){ r.net, &r.opt, 0, 0, 0, &res->history, 0, 0 };
	res->seed = r.tr->seed;
	dlk_rfc3339_now(res->started_at);
	r.t_start = dlk_now();

	if (check_opts(&r, err) || setup_model(&r, err) || setup_schedule(&r, err))
		return -1;
	if (setup_state(&r, err) || setup_buffers(&r, err))
		goto out;
	if (o->on_start)
		o->on_start(o->event_ctx, r.net, r.total);
	int ran = run_epochs(&r, err);
	if (ran < 0 || finish(&r, err))
		goto out;
	ret = res->cancelled ? 1 : 0;
out:
	r.net->grad_ready = NULL; /* its context belongs to the caller's run */
	dlk_loader_stop(r.loader); /* before the permutation it may still be reading */
	free(r.perm);
	if (r.xhost != r.xdev)
		free(r.xhost);
	free(r.yhost);
	if (r.thost != r.tdev)
		free(r.thost);
	r.be->free(r.xdev);
	r.be->free(r.ydev);
	r.be->free(r.tdev);
	r.be->free(r.acc);
	dlk_optimizer_release(&r.opt);
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
