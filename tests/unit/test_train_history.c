/* The run's history: step losses averaged in buckets that halve their resolution instead of
 * growing past DLK_HISTORY_MAX_POINTS; its JSON read back exactly (and damaged JSON refused
 * with the field named); what the training loop records per epoch; and a run stopped and
 * resumed from a checkpoint ends with the history of one that never stopped, plus its resume. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/train/checkpoint.h"
#include "lib/train/history.h"
#include "lib/train/state.h"
#include "lib/train/train.h"

#include "tests/unit/blobs.h"

static char *json_of(const struct dlk_history *h, int ckpt)
{
	cJSON *j = dlk_history_json(h, ckpt);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

/* the JSON text with one substitution, parsed and read back; returns the reader's result */
static int read_edited(const char *json, const char *from, const char *to, struct dlk_err *err)
{
	struct dlk_history h = DLK_HISTORY_INIT;
	const char *at = strstr(json, from);
	char *edited;
	cJSON *j;
	int rc;

	if (!at)
		return 99;
	edited = malloc(strlen(json) + strlen(to) + 1);
	sprintf(edited, "%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
	j = cJSON_Parse(edited);
	rc = j ? dlk_history_from_json(j, "'x.json'", &h, err) : 98;
	cJSON_Delete(j);
	dlk_history_release(&h);
	free(edited);
	return rc;
}

static void test_buckets(void)
{
	struct dlk_history h = DLK_HISTORY_INIT;
	long n = 3 * DLK_HISTORY_MAX_POINTS + 5;
	int ok = 1;

	for (long i = 0; i < n; i++)
		dlk_history_add_step(&h, (double)i);
	/* 3*1024+5 steps: buckets of 4 once 1024 buckets of 1 and then of 2 were full */
	CHECK(h.every == 4);
	CHECK(h.steps == n);
	CHECK(h.n_step_loss == (size_t)(n / 4));
	CHECK(h.pending_n == n % 4);
	for (size_t b = 0; b < h.n_step_loss; b++)
		ok &= h.step_loss[b] == 4.0 * (double)b + 1.5; /* mean of 4b .. 4b+3 */
	CHECK_MSG(ok, "every bucket holds the mean loss of its steps");
	for (long i = n; i < 4096 * 4; i++)
		dlk_history_add_step(&h, 1.0);
	CHECK(h.n_step_loss <= DLK_HISTORY_MAX_POINTS && h.every == 16 && h.steps == 4096 * 4);
	dlk_history_release(&h);
}

static void test_json(void)
{
	struct dlk_history h = DLK_HISTORY_INIT, back = DLK_HISTORY_INIT;
	struct dlk_history_epoch e = { 1, 40, 0.6931471805599453, 1, 0.5, 0.875, 1234.5, 1.25, 0.01, 2, "2024-05-01T12:00:00Z", "", 0 };
	struct dlk_history_event ev = { DLK_HISTORY_START, 0, 0, 0, 2, "2024-05-01T11:59:00Z" };
	struct dlk_err err = DLK_ERR_INIT;
	char *a, *b;
	cJSON *j;

	dlk_history_add_event(&h, &ev);
	for (int i = 0; i < 41; i++)
		dlk_history_add_step(&h, 1.0 / (i + 1));
	dlk_history_add_epoch(&h, &e);
	e.epoch = 2;
	e.have_test = 0;
	dlk_history_add_epoch(&h, &e);
	ev.kind = DLK_HISTORY_RESUME;
	ev.step = 30;
	ev.world = 4;
	dlk_history_add_event(&h, &ev);
	h.elapsed_sec = 12.5;
	CHECK(dlk_history_world(&h) == 4);

	a = json_of(&h, 1);
	j = cJSON_Parse(a);
	CHECK(dlk_history_from_json(j, "'x.json'", &back, &err) == 0);
	cJSON_Delete(j);
	b = json_of(&back, 1);
	CHECK_STR(b, a);
	CHECK(back.pending_n == h.pending_n && back.pending_sum == h.pending_sum && back.elapsed_sec == 12.5);
	CHECK(back.n_epochs == 2 && back.epochs[0].have_test && !back.epochs[1].have_test);
	CHECK(back.events[1].kind == DLK_HISTORY_RESUME && back.events[1].world == 4);
	/* a resumed history goes on exactly as the original would */
	dlk_history_add_step(&h, 0.25);
	dlk_history_add_step(&back, 0.25);
	free(a);
	free(b);
	a = json_of(&h, 1);
	b = json_of(&back, 1);
	CHECK_STR(b, a);
	free(b);
	free(a);

	/* the bundle's form has no pending bucket; it reads back for reports */
	a = json_of(&h, 0);
	CHECK(!strstr(a, "pending") && !strstr(a, "\"elapsed_sec\":12.5,\"events\""));
	CHECK(read_edited(a, "", "", &err) == 0);

	struct {
		const char *from, *to, *msg;
	} bad[] = {
		{ "\"epoch\":1,", "\"epoch\":0,", "history.epochs[0].epoch is out of range" },
		{ "\"epoch\":1,", "", "history.epochs[0].epoch is missing" },
		{ "\"test_loss\":0.5,", "", "history.epochs[0] has one of test_loss and test_accuracy without the other" },
		{ "\"test_accuracy\":0.875", "\"test_accuracy\":1.5", "history.epochs[0].test_accuracy is out of range" },
		{ "\"world\":2", "\"world\":\"2\"", "history.epochs[0].world is out of range" },
		{ "\"every\":1", "\"every\":2", "history.step_loss: 42 values, each the mean of 2 steps, do not make 42 steps" },
		{ "\"steps\":42", "\"steps\":400", "history.step_loss: 42 values, each the mean of 1 steps, do not make 400 steps" },
		{ "\"event\":\"resume\"", "\"event\":\"restart\"", "history.events[1].event is not \"start\" or \"resume\"" },
		{ "\"values\":[1,", "\"values\":[\"x\",", "history.step_loss.values[0] is not a number" },
		{ "\"epochs\":[", "\"epochs\":{}, \"x\":[", "history.epochs is missing" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dlk_err_clear(&err);
		int rc = read_edited(a, bad[i].from, bad[i].to, &err);
		CHECK_MSG(rc == -1, "refused: %s", bad[i].msg);
		CHECK_CONTAINS(err.msg, bad[i].msg);
		CHECK(err.code == DLK_EXIT_CONFIG);
	}
	free(a);
	/* the checkpoint's pending bucket must agree with the counts */
	a = json_of(&h, 1);
	CHECK(read_edited(a, "\"pending_steps\":0", "\"pending_steps\":3", &err) == -1);
	CHECK_CONTAINS(err.msg, "pending_steps is 3, not the 0 steps left over");
	free(a);
	dlk_history_release(&h);
	dlk_history_release(&back);
}

struct store {
	const char *dir;
	struct dlk_state_meta meta;
	long cancel_at;
};

static volatile sig_atomic_t cancel_flag;

static int on_ckpt(void *ctx, const struct dlk_train_state *st, struct dlk_err *err)
{
	struct store *s = ctx;
	dlk_net_arch_digest(st->net, s->meta.arch);
	return dlk_state_save(s->dir, 2, st, &s->meta, NULL, NULL, err);
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
	}
	ckpt_release(&c);
	return got;
}

static void on_event(void *ctx, const struct dlk_train_event *ev)
{
	struct store *s = ctx;
	if (ev->kind == DLK_TRAIN_STEP && s->cancel_at && ev->global_step == s->cancel_at)
		cancel_flag = 1;
	if (ev->kind == DLK_TRAIN_EPOCH && !ev->history)
		printf("not ok - an epoch event without the history\n");
}

static void test_loop(void)
{
	struct dlk_dataset train, test;
	char dir[] = "/tmp/dlk-history-XXXXXX";
	struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_DENSE, .units = 16 }, { .kind = DLK_LAYER_RELU }, { .kind = DLK_LAYER_DENSE, .units = 4 },
	};
	struct dlk_model model = { .input = { 1, 1, 8 }, .input_rank = 1, .layers = layers, .n_layers = 3, .init = "torch" };
	struct dlk_training tr = { .epochs = 3, .batch_size = 32, .optimizer = DLK_OPT_ADAM, .lr = 1e-2, .beta1 = 0.9,
	                           .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1, .seed = 7, .threads = 1,
	                           .eval_every_epoch = 1, .checkpoint_every = 10 };
	struct dlk_train_opts o = DLK_TRAIN_OPTS_INIT;
	struct dlk_train_result a = DLK_TRAIN_RESULT_INIT, b = DLK_TRAIN_RESULT_INIT, c = DLK_TRAIN_RESULT_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct store s = { dir, { "", 7, 1, 32 }, 0 };

	blobs(&train, 600, 1);
	blobs(&test, 200, 2);
	CHECK(mkdtemp(dir) != NULL);
	o.model = &model;
	o.training = &tr;
	o.spec_file = "dlk.yaml";
	o.train = &train;
	o.test = &test;
	o.on_event = on_event;
	o.event_ctx = &s;
	CHECK(dlk_train_run(&o, &a, &err) == 0);
	/* 600 samples in batches of 32: 19 steps an epoch */
	CHECK(a.history.n_epochs == 3 && a.history.steps == 57 && a.history.n_step_loss == 57);
	CHECK(a.history.n_events == 1 && a.history.events[0].kind == DLK_HISTORY_START && a.history.events[0].world == 1);
	int ok = 1;
	for (int i = 0; i < 3; i++) {
		const struct dlk_history_epoch *e = &a.history.epochs[i];
		ok &= e->epoch == i + 1 && e->step == 19L * (i + 1) && e->have_test && e->world == 1 &&
		      e->samples_per_sec > 0 && e->elapsed_sec > 0 && e->time[0];
		ok &= i == 0 || e->elapsed_sec >= a.history.epochs[i - 1].elapsed_sec;
	}
	CHECK_MSG(ok, "each epoch: its number, steps, a test evaluation, throughput, a clock");
	CHECK(a.history.epochs[2].train_loss == a.train_loss);
	CHECK(a.history.epochs[2].test_accuracy == a.eval.accuracy && a.history.epochs[2].test_loss == a.eval.loss);
	ok = 1;
	for (size_t i = 0; i < a.n_loss; i++)
		ok &= a.history.step_loss[i] == (double)a.loss_curve[i];
	CHECK_MSG(ok, "one bucket per step while the run is short: the losses of the steps");

	/* stopped at step 25 (checkpoint at 20), then resumed */
	o.checkpoint = on_ckpt;
	o.resume = on_resume;
	o.ckpt_ctx = &s;
	o.cancel = &cancel_flag;
	s.cancel_at = 25;
	CHECK(dlk_train_run(&o, &b, &err) == 1);
	CHECK(b.history.n_epochs == 1);
	cancel_flag = 0;
	s.cancel_at = 0;
	CHECK(dlk_train_run(&o, &c, &err) == 0);
	if (err.msg[0])
		printf("# %s\n", err.msg);
	/* the start came back with the checkpoint written when the run was stopped at step 25 */
	CHECK(c.history.n_events == 2 && c.history.events[0].kind == DLK_HISTORY_START &&
	      c.history.events[1].kind == DLK_HISTORY_RESUME && c.history.events[1].step == 25 &&
	      c.history.events[1].epoch == 1 && c.history.events[1].elapsed_sec > 0);
	CHECK(c.history.n_epochs == 3 && c.history.steps == 57 && c.history.n_step_loss == 57);
	CHECK(!memcmp(c.history.step_loss, a.history.step_loss, sizeof(double) * 57));
	ok = 1;
	for (int i = 0; i < 3; i++)
		ok &= c.history.epochs[i].train_loss == a.history.epochs[i].train_loss &&
		      c.history.epochs[i].test_accuracy == a.history.epochs[i].test_accuracy;
	CHECK_MSG(ok, "the resumed run's epochs have the uninterrupted run's losses and accuracies");

	dlk_train_result_release(&a);
	dlk_train_result_release(&b);
	dlk_train_result_release(&c);
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

int main(void)
{
	test_buckets();
	test_json();
	test_loop();
	return CHECK_DONE();
}
