/* The training loop on synthetic data: it learns, it is deterministic, it reports events,
 * honours cancellation and the hooks, and refuses bad data with clear messages. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <time.h>

#include "lib/util/rng.h"
#include "lib/train/train.h"

/* four Gaussian-ish blobs in 8 dimensions */
#include "tests/unit/blobs.h"

static void ds_free(struct dlk_dataset *ds)
{
	free(ds->x);
	free(ds->y);
}

struct events {
	int starts, steps, epochs, done;
	size_t n_params;
	long last_global;
	double last_lr;
	int eval_seen;
	volatile sig_atomic_t *cancel_at_step_flag;
	long cancel_at;
	double phase_total[DLK_PHASES]; /* the last event's, and whether they only grew */
	int phases_shrank;
};

static void on_event(void *ctx, const struct dlk_train_event *ev)
{
	struct events *e = ctx;
	for (int k = 0; k < DLK_PHASES; k++) {
		e->phases_shrank |= ev->phase_total_sec[k] < e->phase_total[k] || ev->phase_sec[k] > ev->phase_total_sec[k];
		e->phase_total[k] = ev->phase_total_sec[k];
	}
	switch (ev->kind) {
	case DLK_TRAIN_STEP:
		e->steps++;
		e->last_global = ev->global_step;
		e->last_lr = ev->lr;
		if (e->cancel_at && ev->global_step == e->cancel_at)
			*e->cancel_at_step_flag = 1;
		break;
	case DLK_TRAIN_EPOCH:
		e->epochs++;
		e->eval_seen += ev->eval != NULL;
		break;
	case DLK_TRAIN_DONE:
		e->done++;
		break;
	}
}

static void on_start(void *ctx, const struct dlk_net *net, long total)
{
	struct events *e = ctx;
	e->starts++;
	e->n_params = net->n_params;
	e->last_global = -total; /* overwritten by the first step event */
}

static int ckpt_calls;
static long ckpt_last_step;
static int on_ckpt(void *ctx, const struct dlk_train_state *st, struct dlk_err *err)
{
	(void)ctx;
	(void)err;
	ckpt_calls++;
	ckpt_last_step = st->global_step;
	return 0;
}

static int reduce_calls, reduce_sleep;
static int on_reduce(void *ctx, float *g, size_t n, struct dlk_err *err)
{
	(void)ctx;
	(void)g;
	(void)n;
	(void)err;
	reduce_calls++;
	if (reduce_sleep) {
		/* at least 1 ms "waiting for the other ranks": the all-reduce phase is at least that */
		struct timespec ts = { 0, 1000000 };
		while (nanosleep(&ts, &ts))
			;
	}
	return 0;
}

/* an in-memory "checkpoint": everything struct dlk_train_state points at */
struct saved {
	float *params, *m, *v;
	size_t n;
	long t, global_step, step_in_epoch;
	int epoch;
	uint64_t dropout_counter;
	int have;
};

static int save_state(void *ctx, const struct dlk_train_state *st, struct dlk_err *err)
{
	struct saved *s = ctx;
	(void)err;
	s->n = st->net->n_params;
	free(s->params);
	free(s->m);
	free(s->v);
	s->params = malloc(4 * s->n);
	s->m = malloc(4 * s->n);
	s->v = malloc(4 * s->n);
	memcpy(s->params, st->net->params, 4 * s->n);
	memcpy(s->m, st->opt->m, 4 * s->n);
	memcpy(s->v, st->opt->v, 4 * s->n);
	s->t = st->opt->t;
	s->epoch = st->epoch;
	s->step_in_epoch = st->step_in_epoch;
	s->global_step = st->global_step;
	s->dropout_counter = st->net->dropout_counter;
	s->have = 1;
	return 0;
}

static int restore_state(void *ctx, struct dlk_train_state *st, struct dlk_err *err)
{
	struct saved *s = ctx;
	if (!s->have)
		return 0;
	if (s->n != st->net->n_params)
		return dlk_errf(err, DLK_EXIT_CONFIG, "checkpoint has %zu parameters, model %zu", s->n, st->net->n_params);
	memcpy(st->net->params, s->params, 4 * s->n);
	memcpy(st->opt->m, s->m, 4 * s->n);
	memcpy(st->opt->v, s->v, 4 * s->n);
	st->opt->t = s->t;
	st->epoch = s->epoch;
	st->step_in_epoch = s->step_in_epoch;
	st->global_step = s->global_step;
	st->net->dropout_counter = s->dropout_counter;
	return 1;
}

int main(void)
{
	struct dlk_dataset train, test;
	blobs(&train, 1000, 1);
	blobs(&test, 400, 2);
	struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_DENSE, .units = 32 }, { .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_DROPOUT, .rate = 0.1f }, { .kind = DLK_LAYER_DENSE, .units = 4 },
	};
	struct dlk_model model = { .input = { 1, 1, 8 }, .input_rank = 1, .layers = layers, .n_layers = 4, .init = "torch" };
	struct dlk_training tr = { .epochs = 3, .batch_size = 32, .optimizer = DLK_OPT_ADAM, .lr = 1e-2, .beta1 = 0.9,
	                           .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1, .seed = 42, .threads = 1,
	                           .eval_every_epoch = 1, .checkpoint_every = 10 };
	struct events ev = { 0 };
	struct dlk_train_opts o = DLK_TRAIN_OPTS_INIT;
	o.model = &model;
	o.training = &tr;
	o.spec_file = "dlk.yaml";
	o.train = &train;
	o.test = &test;
	o.on_event = on_event;
	o.on_start = on_start;
	o.event_ctx = &ev;
	o.checkpoint = on_ckpt;
	o.allreduce = on_reduce;
	struct dlk_train_result r1, r2;
	struct dlk_err err = DLK_ERR_INIT;

	reduce_sleep = 1;
	int rc = dlk_train_run(&o, &r1, &err);
	reduce_sleep = 0;
	CHECK_MSG(rc == 0, "trains (%s)", err.msg);
	/* the step time split: every phase timed, the all-reduce's wait at least its sleeps, none
	 * more than the loop's wall time; the events' totals only grow and end at the result's */
	CHECK_MSG(r1.phase_sec[DLK_PHASE_ALLREDUCE] >= 96 * 0.001, "all-reduce %.4f s", r1.phase_sec[DLK_PHASE_ALLREDUCE]);
	CHECK(r1.phase_sec[DLK_PHASE_DATA] > 0 && r1.phase_sec[DLK_PHASE_COMPUTE] > 0);
	CHECK(r1.phase_sec[DLK_PHASE_DATA] + r1.phase_sec[DLK_PHASE_COMPUTE] + r1.phase_sec[DLK_PHASE_ALLREDUCE] <= r1.seconds);
	CHECK(!ev.phases_shrank);
	for (int k = 0; k < DLK_PHASES; k++)
		CHECK(ev.phase_total[k] == r1.phase_sec[k]);
	CHECK_STR(dlk_step_phase_name(DLK_PHASE_DATA), "data");
	CHECK_STR(dlk_step_phase_name(DLK_PHASE_ALLREDUCE), "allreduce");
	CHECK(r1.steps == 3 * 32); /* 1000 / 32 rounded up: the last batch is partial */
	CHECK(r1.n_loss == 96);
	CHECK_MSG(r1.eval.accuracy > 0.9, "learns the blobs (accuracy %.3f)", r1.eval.accuracy);
	CHECK(r1.eval.n == 400 && r1.eval.n_classes == 4);
	long long total = 0, diag = 0;
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			total += r1.eval.confusion[i * 4 + j];
			diag += i == j ? r1.eval.confusion[i * 4 + j] : 0;
		}
	CHECK(total == 400);
	CHECK_NEAR((double)diag / 400, r1.eval.accuracy, 1e-12);
	CHECK(r1.eval.precision[0] > 0.8 && r1.eval.recall[3] > 0.8);
	CHECK(r1.loss_curve[95] < r1.loss_curve[0]);
	CHECK(ev.steps == 96 && ev.epochs == 3 && ev.done == 1 && ev.eval_seen == 3);
	CHECK(ev.starts == 1 && ev.n_params == 8 * 32 + 32 + 32 * 4 + 4);
	char *sum = dlk_net_summary(&r1.net);
	CHECK_MSG(strstr(sum, "\n0    dense     32           288\n"), "summary lists the first dense layer");
	CHECK_MSG(strstr(sum, "\n2    dropout   32           0\n"), "summary lists the dropout layer");
	CHECK_CONTAINS(sum, "total parameters: 420");
	free(sum);
	CHECK(ev.last_global == 96);
	CHECK(ckpt_calls == 9 + 3); /* every 10 steps and at each epoch end */
	CHECK(reduce_calls == 96);
	CHECK(strlen(r1.started_at) == 20 && r1.started_at[10] == 'T' && r1.finished_at[19] == 'Z');

	/* same seed, one thread: a bit-identical loss curve and the same weights */
	rc = dlk_train_run(&o, &r2, &err);
	CHECK(rc == 0 && r2.n_loss == r1.n_loss);
	CHECK(!memcmp(r1.loss_curve, r2.loss_curve, sizeof(float) * r1.n_loss));
	CHECK(!memcmp(r1.net.params, r2.net.params, sizeof(float) * r1.net.n_params));
	dlk_train_result_release(&r2);
	/* another seed: another curve */
	tr.seed = 43;
	rc = dlk_train_run(&o, &r2, &err);
	CHECK(rc == 0 && memcmp(r1.loss_curve, r2.loss_curve, sizeof(float) * r1.n_loss) != 0);
	dlk_train_result_release(&r2);
	tr.seed = 42;
	dlk_train_result_release(&r1);

	/* cancellation stops before the next step, checkpoints and still reports metrics */
	volatile sig_atomic_t cancel = 0;
	memset(&ev, 0, sizeof(ev));
	ev.cancel_at_step_flag = &cancel;
	ev.cancel_at = 40;
	o.cancel = &cancel;
	ckpt_calls = 0;
	rc = dlk_train_run(&o, &r1, &err);
	CHECK(rc == 1 && r1.cancelled && r1.steps == 40);
	CHECK(ckpt_last_step == 40 && ev.done == 1 && r1.eval.n == 400);
	dlk_train_result_release(&r1);
	o.cancel = NULL;

	/* stop at step 40 (mid-epoch 2), resume from what the checkpoint hook saw: the resumed run
	 * ends with exactly the weights of an uninterrupted one */
	{
		struct dlk_train_opts o2 = o;
		struct saved sv = { 0 };
		struct dlk_train_result full, part, rest;
		o2.on_event = NULL;
		o2.allreduce = NULL;
		o2.checkpoint = NULL;
		CHECK(dlk_train_run(&o2, &full, &err) == 0);
		CHECK(full.phase_sec[DLK_PHASE_ALLREDUCE] == 0); /* one rank, no all-reduce: no time in it */
		volatile sig_atomic_t stop = 0;
		memset(&ev, 0, sizeof(ev));
		ev.cancel_at_step_flag = &stop;
		ev.cancel_at = 40;
		o2.on_event = on_event;
		o2.event_ctx = &ev;
		o2.cancel = &stop;
		o2.checkpoint = save_state;
		o2.ckpt_ctx = &sv;
		CHECK(dlk_train_run(&o2, &part, &err) == 1 && sv.have && sv.global_step == 40 && sv.epoch == 1);
		o2.cancel = NULL;
		o2.on_event = NULL;
		o2.checkpoint = NULL;
		o2.resume = restore_state;
		CHECK(dlk_train_run(&o2, &rest, &err) == 0);
		CHECK(rest.steps == full.steps && rest.n_loss == full.n_loss - 40);
		CHECK_MSG(!memcmp(full.net.params, rest.net.params, 4 * full.net.n_params),
		          "a resumed run ends with bit-identical weights");
		CHECK(!memcmp(full.loss_curve + 40, rest.loss_curve, sizeof(float) * rest.n_loss));
		CHECK(rest.eval.accuracy == full.eval.accuracy);
		dlk_train_result_release(&full);
		dlk_train_result_release(&part);
		dlk_train_result_release(&rest);
		free(sv.params);
		free(sv.m);
		free(sv.v);
	}

	/* batches gathered ahead on loader threads (what streamed image folders and device backends
	 * do): the same weights, uninterrupted, accumulated, or stopped mid-epoch and resumed */
	for (int accum = 1; accum <= 3; accum += 2) {
		struct dlk_train_opts o3 = o;
		struct saved sv = { 0 };
		struct dlk_train_result plain, ahead, part, rest;
		volatile sig_atomic_t stop = 0;
		o3.on_event = NULL;
		o3.allreduce = NULL;
		o3.checkpoint = NULL;
		tr.accumulate = accum;
		CHECK(dlk_train_run(&o3, &plain, &err) == 0);
		o3.prefetch = 1;
		o3.loader_threads = 3;
		CHECK(dlk_train_run(&o3, &ahead, &err) == 0);
		CHECK_MSG(ahead.steps == plain.steps && !memcmp(plain.net.params, ahead.net.params, 4 * plain.net.n_params) &&
		              !memcmp(plain.loss_curve, ahead.loss_curve, sizeof(float) * plain.n_loss),
		          "accumulate %d: batches gathered ahead train the same weights", accum);
		memset(&ev, 0, sizeof(ev));
		ev.cancel_at_step_flag = &stop;
		ev.cancel_at = 13;
		o3.on_event = on_event;
		o3.event_ctx = &ev;
		o3.cancel = &stop;
		o3.checkpoint = save_state;
		o3.ckpt_ctx = &sv;
		o3.loader_threads = 1;
		CHECK(dlk_train_run(&o3, &part, &err) == 1 && sv.global_step == 13);
		o3.cancel = NULL;
		o3.on_event = NULL;
		o3.checkpoint = NULL;
		o3.resume = restore_state;
		CHECK(dlk_train_run(&o3, &rest, &err) == 0);
		CHECK_MSG(!memcmp(plain.net.params, rest.net.params, 4 * plain.net.n_params),
		          "accumulate %d: stopped with a batch in flight and resumed, the same weights", accum);
		dlk_train_result_release(&plain);
		dlk_train_result_release(&ahead);
		dlk_train_result_release(&part);
		dlk_train_result_release(&rest);
		free(sv.params);
		free(sv.m);
		free(sv.v);
	}
	tr.accumulate = 0;

	/* SGD with momentum, a cosine schedule with warm-up and clipping also learn */
	tr.optimizer = DLK_OPT_SGD;
	tr.lr = 0.1;
	tr.momentum = 0.9;
	tr.nesterov = 1;
	tr.schedule = DLK_LR_COSINE;
	tr.warmup_steps = 10;
	tr.grad_clip = 1.0;
	memset(&ev, 0, sizeof(ev));
	rc = dlk_train_run(&o, &r1, &err);
	CHECK(rc == 0 && r1.eval.accuracy > 0.9);
	CHECK(ev.last_lr < 1e-3); /* cosine to 0 by the last step */
	dlk_train_result_release(&r1);

	/* divergence is an error, not garbage weights */
	tr.optimizer = DLK_OPT_SGD;
	tr.lr = 1e30;
	tr.grad_clip = 0;
	tr.schedule = DLK_LR_CONSTANT;
	tr.warmup_steps = 0;
	rc = dlk_train_run(&o, &r1, &err);
	CHECK(rc == -1 && err.code == DLK_EXIT_FAIL);
	CHECK_CONTAINS(err.msg, "training diverged at epoch");
	CHECK_CONTAINS(err.hint, "training.lr");
	dlk_train_result_release(&r1);
	tr.lr = 1e-2;

	/* bad data: labels beyond the model, more classes than outputs, samples of the wrong size */
	train.y[17] = 9;
	train.n_classes = 4;
	rc = dlk_train_run(&o, &r1, &err);
	CHECK(rc == -1);
	CHECK_STR(err.msg, "training data: sample 17 has label 9, outside the model's 4 classes");
	dlk_train_result_release(&r1);
	train.y[17] = 0;
	train.n_classes = 10;
	layers[3].line = 12;
	rc = dlk_train_run(&o, &r1, &err);
	CHECK(rc == -1);
	CHECK_STR(err.msg, "model.layers[3] (dense, dlk.yaml:12): the model ends with 4 outputs but the data has 10 classes");
	CHECK_STR(err.hint, "make the last dense layer 10 units wide");
	dlk_train_result_release(&r1);
	/* a class absent from the data is fine: the model may have more outputs */
	train.n_classes = 3;
	test.n_classes = 3;
	rc = dlk_train_run(&o, &r1, &err);
	CHECK(rc == 0 && r1.net.n_classes == 4);
	dlk_train_result_release(&r1);
	train.n_classes = test.n_classes = 4;
	model.input[2] = 9;
	rc = dlk_train_run(&o, &r1, &err);
	CHECK(rc == -1);
	CHECK_STR(err.msg, "model.input: the training data has samples of 8 but the model takes 9");
	dlk_train_result_release(&r1);
	model.input[2] = 8;
	/* a second rank without a communicator is refused */
	o.world = 2;
	o.rank = 1;
	o.allreduce = NULL;
	rc = dlk_train_run(&o, &r1, &err);
	CHECK(rc == -1 && strstr(err.msg, "all-reduce"));
	dlk_train_result_release(&r1);

	/* shuffling: a permutation, different per epoch, identical for the same (seed, epoch) */
	size_t *p0 = dlk_epoch_permutation(1000, 42, 0), *p0b = dlk_epoch_permutation(1000, 42, 0);
	size_t *p1 = dlk_epoch_permutation(1000, 42, 1);
	char *seen = calloc(1000, 1);
	int perm_ok = 1;
	for (int i = 0; i < 1000; i++) {
		perm_ok &= p0[i] < 1000 && !seen[p0[i]];
		if (p0[i] < 1000)
			seen[p0[i]] = 1;
	}
	CHECK(perm_ok);
	CHECK(!memcmp(p0, p0b, 1000 * sizeof(size_t)) && memcmp(p0, p1, 1000 * sizeof(size_t)));
	free(p0);
	free(p0b);
	free(p1);
	free(seen);
	size_t b, e;
	dlk_shard_range(10, 2, 3, &b, &e);
	CHECK(b == 6 && e == 9);
	dlk_shard_range(10, 0, 1, &b, &e);
	CHECK(b == 0 && e == 10);

	/* 8-bit storage, scaled when a batch is gathered, trains and evaluates exactly as float
	 * storage holding the same scaled values: same loss curve, weights and test metrics */
	{
		struct dlk_dataset b8[2], bf[2];
		const struct dlk_dataset *src[2] = { &train, &test };
		for (int k = 0; k < 2; k++) {
			size_t total = src[k]->n * src[k]->sample_size;
			b8[k] = bf[k] = *src[k];
			b8[k].x = NULL;
			b8[k].storage = DLK_STORE_U8;
			b8[k].x8 = malloc(total);
			for (int v = 0; v < 256; v++)
				b8[k].lut[v] = ((float)v * (1.0f / 60) - 1.5f) / 1.0f;
			bf[k].x = malloc(sizeof(float) * total);
			for (size_t i = 0; i < total; i++) {
				float q = (src[k]->x[i] + 1.5f) * 60;
				b8[k].x8[i] = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q + 0.5f);
				bf[k].x[i] = b8[k].lut[b8[k].x8[i]];
			}
		}
		struct dlk_train_opts o8 = o, of = o;
		struct dlk_train_result r8, rf;
		o8.on_event = of.on_event = NULL;
		o8.checkpoint = of.checkpoint = NULL;
		o8.allreduce = of.allreduce = NULL;
		o8.world = of.world = 1;
		o8.rank = of.rank = 0;
		o8.train = &b8[0], o8.test = &b8[1];
		of.train = &bf[0], of.test = &bf[1];
		dlk_err_clear(&err);
		CHECK_MSG(dlk_train_run(&o8, &r8, &err) == 0, "trains from bytes (%s)", err.msg);
		CHECK_MSG(dlk_train_run(&of, &rf, &err) == 0, "trains from floats (%s)", err.msg);
		CHECK(r8.n_loss == rf.n_loss && r8.n_loss == 96);
		CHECK(!memcmp(r8.loss_curve, rf.loss_curve, sizeof(float) * (size_t)r8.n_loss));
		CHECK(!memcmp(r8.net.params, rf.net.params, sizeof(float) * r8.net.n_params));
		CHECK(r8.eval.loss == rf.eval.loss && r8.eval.accuracy == rf.eval.accuracy);
		CHECK_MSG(r8.eval.accuracy > 0.9, "learns the blobs from bytes (accuracy %.3f)", r8.eval.accuracy);
		dlk_train_result_release(&r8);
		dlk_train_result_release(&rf);
		for (int k = 0; k < 2; k++) {
			free(b8[k].x8);
			free(bf[k].x);
		}
	}

	ds_free(&train);
	ds_free(&test);
	return CHECK_DONE();
}
