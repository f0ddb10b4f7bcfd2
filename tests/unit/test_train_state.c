/* The training state in checkpoints: a run stopped and resumed ends with the very same weights
 * as one that never stopped (Adam with dropout, and SGD with momentum); checkpoints of another
 * model, seed, world or batch are refused with messages naming them; a damaged state.json is
 * an error, never a crash; the progress annotation's JSON. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/util/rng.h"
#include "lib/train/checkpoint.h"
#include "lib/train/progress.h"
#include "lib/train/state.h"
#include "lib/train/train.h"

#include "tests/unit/blobs.h"

struct store {
	const char *dir;
	struct dlk_state_meta meta;
	volatile sig_atomic_t *cancel;
	long cancel_at;
	int saved, resumed;
	struct dlk_err last;
};

static int on_ckpt(void *ctx, const struct dlk_train_state *st, struct dlk_err *err)
{
	struct store *s = ctx;
	dlk_net_arch_digest(st->net, s->meta.arch);
	if (dlk_state_save(s->dir, 2, st, &s->meta, NULL, NULL, err))
		return -1;
	s->saved++;
	return 0;
}

static int on_resume(void *ctx, struct dlk_train_state *st, struct dlk_err *err)
{
	struct store *s = ctx;
	struct ckpt c = CKPT_INIT;
	int got = ckpt_load_latest(s->dir, 0, &c, err);
	if (got == 1) {
		dlk_net_arch_digest(st->net, s->meta.arch);
		if (dlk_state_restore(&c, st, &s->meta, err))
			got = -1;
		else
			s->resumed++;
	}
	ckpt_release(&c);
	return got;
}

static void on_event(void *ctx, const struct dlk_train_event *ev)
{
	struct store *s = ctx;
	if (ev->kind == DLK_TRAIN_STEP && s->cancel_at && ev->global_step == s->cancel_at)
		*s->cancel = 1;
}

static volatile sig_atomic_t cancel_flag;

/* Trains uninterrupted, then stopped at step `at` and resumed; 1 when the weights are equal. */
static int resume_equal(struct dlk_model *model, struct dlk_training *tr, const struct dlk_dataset *train, long at,
                        const char *dir, int *resumed)
{
	struct dlk_train_opts o = DLK_TRAIN_OPTS_INIT;
	struct dlk_train_result a = DLK_TRAIN_RESULT_INIT, b = DLK_TRAIN_RESULT_INIT, c = DLK_TRAIN_RESULT_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct store s = { dir, { "", tr->seed, 1, tr->batch_size }, &cancel_flag, 0, 0, 0, DLK_ERR_INIT };
	int eq = 0;

	o.model = model;
	o.training = tr;
	o.spec_file = "dlk.yaml";
	o.train = train;
	if (dlk_train_run(&o, &a, &err) != 0)
		goto out;
	o.checkpoint = on_ckpt;
	o.resume = on_resume;
	o.ckpt_ctx = &s;
	o.on_event = on_event;
	o.event_ctx = &s;
	o.cancel = &cancel_flag;
	cancel_flag = 0;
	s.cancel_at = at;
	if (dlk_train_run(&o, &b, &err) != 1)
		goto out;
	cancel_flag = 0;
	s.cancel_at = 0;
	if (dlk_train_run(&o, &c, &err) != 0)
		goto out;
	*resumed = s.resumed;
	eq = a.steps == c.steps && a.net.n_params == c.net.n_params &&
	     !memcmp(a.net.params, c.net.params, sizeof(float) * a.net.n_params) &&
	     memcmp(a.net.params, b.net.params, sizeof(float) * a.net.n_params);
out:
	if (err.msg[0])
		printf("# %s\n", err.msg);
	dlk_train_result_release(&a);
	dlk_train_result_release(&b);
	dlk_train_result_release(&c);
	return eq;
}

/* A checkpoint held in memory, with state.json replaced by `state`. */
static int restore_with(struct dlk_train_state *st, const struct dlk_state_meta *meta, const char *dir,
                        const char *state, struct dlk_err *err)
{
	struct ckpt c = CKPT_INIT;
	int rc;

	if (ckpt_load_latest(dir, 0, &c, err) != 1)
		return -2;
	if (state) {
		for (size_t i = 0; i < c.n; i++)
			if (!strcmp(c.blobs[i].name, "state.json")) {
				free(c.blobs[i].data);
				c.blobs[i].data = strdup(state);
				c.blobs[i].len = strlen(state);
			}
	}
	rc = dlk_state_restore(&c, st, meta, err);
	ckpt_release(&c);
	return rc;
}

int main(void)
{
	struct dlk_dataset train;
	char dir[] = "/tmp/dlk-state-XXXXXX", sub[64];
	struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_DENSE, .units = 16 }, { .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_DROPOUT, .rate = 0.2f }, { .kind = DLK_LAYER_DENSE, .units = 4 },
	};
	struct dlk_model model = { .input = { 1, 1, 8 }, .input_rank = 1, .layers = layers, .n_layers = 4, .init = "torch" };
	struct dlk_training tr = { .epochs = 3, .batch_size = 32, .optimizer = DLK_OPT_ADAM, .lr = 1e-2, .beta1 = 0.9,
	                           .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1, .seed = 7, .threads = 1,
	                           .eval_every_epoch = 1, .checkpoint_every = 10, .schedule = DLK_LR_COSINE };
	int resumed = 0;

	blobs(&train, 600, 3);
	CHECK(mkdtemp(dir) != NULL);

	snprintf(sub, sizeof(sub), "%s/adam", dir);
	CHECK_MSG(resume_equal(&model, &tr, &train, 27, sub, &resumed), "adam with dropout: resumed at step 27 = uninterrupted");
	CHECK(resumed == 1);
	snprintf(sub, sizeof(sub), "%s/adam-epoch", dir);
	CHECK_MSG(resume_equal(&model, &tr, &train, 19, sub, &resumed), "resumed at an epoch's last step = uninterrupted");
	tr.optimizer = DLK_OPT_SGD;
	tr.momentum = 0.9;
	tr.nesterov = 1;
	tr.lr = 0.05;
	snprintf(sub, sizeof(sub), "%s/sgd", dir);
	CHECK_MSG(resume_equal(&model, &tr, &train, 33, sub, &resumed), "sgd nesterov: resumed at step 33 = uninterrupted");

	/* refusals: build a net and optimizer like the loop does and restore into them */
	{
		struct dlk_net net = DLK_NET_INIT;
		struct dlk_optimizer opt = DLK_OPTIMIZER_INIT;
		struct dlk_train_state st = { &net, &opt, 0, 0, 0, NULL, 0, 0 };
		struct dlk_state_meta meta = { "", tr.seed, 1, tr.batch_size };
		struct dlk_err err = DLK_ERR_INIT;

		CHECK(dlk_net_build(&net, &model, "dlk.yaml", 4, dlk_backend_cpu(), &err) == 0);
		CHECK(dlk_net_init_params(&net, "torch", tr.seed, &err) == 0);
		CHECK(dlk_optimizer_init(&opt, &tr, net.n_params, 19, 57, dlk_backend_cpu(), &err) == 0);
		dlk_net_arch_digest(&net, meta.arch);

		CHECK(restore_with(&st, &meta, sub, NULL, &err) == 0);
		CHECK(st.global_step == 57 && st.epoch == 3 && st.step_in_epoch == 0 && opt.t == 57);

		meta.world = 2;
		CHECK(restore_with(&st, &meta, sub, NULL, &err) == -1);
		CHECK(err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "belongs to another run: seed 7, global batch 32 (1 worker x 32) (this run: seed 7, "
		                        "global batch 64 (2 workers x 32))");
		CHECK_CONTAINS(err.msg, "step-00000057");
		/* elastic: the same global batch at another world size is the same run */
		meta.batch_size = 16;
		dlk_err_clear(&err);
		CHECK_MSG(restore_with(&st, &meta, sub, NULL, &err) == 0, "2 x 16 resumes 1 x 32: %s", err.msg);
		CHECK(st.global_step == 57 && st.sched_spe == 19 && st.sched_total == 57);
		meta.batch_size = tr.batch_size;
		meta.world = 1;
		{
			struct ckpt c = CKPT_INIT;
			int cw = 0, cb = 0, b = 0;
			CHECK(ckpt_load_latest(sub, 0, &c, &err) == 1);
			CHECK(dlk_state_peek(&c, &cw, &cb, &err) == 0 && cw == 1 && cb == 32);
			ckpt_release(&c);
			CHECK(dlk_state_elastic_batch(4, 24, 2, &b, &err) == 0 && b == 48);
			CHECK(dlk_state_elastic_batch(4, 24, 3, &b, &err) == 0 && b == 32);
			CHECK(dlk_state_elastic_batch(2, 48, 4, &b, &err) == 0 && b == 24);
			CHECK(dlk_state_elastic_batch(4, 24, 96, &b, &err) == 0 && b == 1);
			dlk_err_clear(&err);
			CHECK(dlk_state_elastic_batch(4, 24, 5, &b, &err) == -1 && err.code == DLK_EXIT_CONFIG);
			CHECK_CONTAINS(err.msg, "cannot go on at 5 workers: the run's global batch of 96 (4 workers x 24) does not "
			                        "split into 5 equal batches");
			CHECK_CONTAINS(err.hint, "divides 96 (it was 4)");
			dlk_err_clear(&err);
			CHECK(dlk_state_elastic_batch(1, 32, 0, &b, &err) == -1);
			dlk_err_clear(&err);
			CHECK(dlk_state_elastic_batch(1, 32, 64, &b, &err) == -1);
		}
		meta.seed = 8;
		CHECK(restore_with(&st, &meta, sub, NULL, &err) == -1);
		CHECK_CONTAINS(err.msg, "seed 7");
		meta.seed = tr.seed;

		char arch[65];
		memcpy(arch, meta.arch, sizeof(arch));
		meta.arch[0] = meta.arch[0] == 'a' ? 'b' : 'a';
		CHECK(restore_with(&st, &meta, sub, NULL, &err) == -1);
		CHECK_CONTAINS(err.msg, "is of another model");
		memcpy(meta.arch, arch, sizeof(arch));

		static const char *bad[] = {
			"", "[]", "{\"format\":\"other\"}",
			"{\"format\":\"dlk-train-state\",\"version\":2}",
			"{\"format\":\"dlk-train-state\",\"version\":1,\"arch\":\"xyz\"}",
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			dlk_err_clear(&err);
			CHECK_MSG(restore_with(&st, &meta, sub, bad[i], &err) == -1 && err.code == DLK_EXIT_CONFIG,
			          "bad state.json %zu refused: %s", i, err.msg);
		}
		char *good = NULL;
		{
			struct ckpt c = CKPT_INIT;
			size_t len;
			CHECK(ckpt_load_latest(sub, 0, &c, &err) == 1);
			const char *s = ckpt_get(&c, "state.json", &len);
			good = strndup(s, len);
			ckpt_release(&c);
		}
		/* each field damaged in turn */
		static const char *fields[][3] = {
			{ "\"globalStep\":\"57\"", "\"globalStep\":\"-1\"", "\"globalStep\" is missing or not a decimal string" },
			{ "\"globalStep\":\"57\"", "\"globalStep\":\"58\"", "globalStep 58 differs from the step of its directory" },
			{ "\"globalStep\":\"57\"", "\"globalStep\":57", "\"globalStep\" is missing or not a decimal string" },
			{ "\"seed\":\"7\"", "\"seed\":\"99999999999999999999999\"", "\"seed\" is missing or not a decimal string" },
			{ "\"seed\":\"7\"", "\"seed\":\"99999999999999999999\"", "\"seed\" is out of range: 99999999999999999999" },
			{ "\"epoch\":3", "\"epoch\":-3", "\"epoch\" is missing or not a whole number" },
			{ "\"epoch\":3", "\"epoch\":3.5", "\"epoch\" is missing or not a whole number" },
			{ "\"params\":\"", "\"params\":\"1", "has 1212 parameters, the model 212" },
			{ "\"stepInEpoch\":\"0\"", "\"stepInEpoch\":\"x\"", "\"stepInEpoch\" is out of range: x" },
			{ "\"dropoutSeed\":\"", "\"dropoutSeed\":\"1", "\"dropoutSeed\" 1" },
			{ "\"scheduleTotalSteps\":\"57\"", "\"scheduleTotalSteps\":\"0\"", "the schedule's steps must be positive" },
			{ "\"scheduleTotalSteps\":\"57\"", "\"scheduleTotalSteps\":7", "\"scheduleTotalSteps\" is missing" },
		};
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			char buf[2048];
			const char *at = strstr(good, fields[i][0]);
			CHECK_MSG(at != NULL, "state.json has %s", fields[i][0]);
			if (!at)
				continue;
			snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - good), good, fields[i][1], at + strlen(fields[i][0]));
			dlk_err_clear(&err);
			CHECK_MSG(restore_with(&st, &meta, sub, buf, &err) == -1 && err.code == DLK_EXIT_CONFIG,
			          "damaged field %s refused: %s", fields[i][1], err.msg);
			CHECK_CONTAINS(err.msg, fields[i][2]);
		}
		free(good);
		dlk_optimizer_release(&opt);
		dlk_net_release(&net);
	}

	/* the progress annotation */
	{
		struct dlk_train_event ev = { 0 };
		ev.kind = DLK_TRAIN_STEP;
		ev.epoch = 2;
		ev.epochs = 5;
		ev.global_step = 700;
		ev.total_steps = 2345;
		ev.loss = 0.5;
		ev.samples_per_sec = 1000;
		char *s = dlk_progress_json(&ev, 0.875, 1, "2024-05-01T12:00:00Z");
		CHECK_STR(s, "{\"epoch\":2,\"epochs\":5,\"step\":700,\"totalSteps\":2345,\"loss\":0.5,\"accuracy\":0.875,"
		             "\"samplesPerSec\":1000,\"updated\":\"2024-05-01T12:00:00Z\"}");
		free(s);
		s = dlk_progress_json(&ev, 0, 0, "2024-05-01T12:00:00Z");
		CHECK_CONTAINS(s, "\"accuracy\":null");
		free(s);
	}

	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	free(train.x);
	free(train.y);
	return CHECK_DONE();
}
