/* The metrics of the tasks (lib/train/metrics.c) against hand-computed values, and an evaluation
 * by task (dlk_evaluate_task) of a net whose outputs are known. */
#include <stdlib.h>

#include "tests/unit/check.h"

#include "lib/jobs/promote.h"
#include "lib/nn/optim.h"
#include "lib/report/report.h"
#include "lib/train/eval.h"
#include "lib/train/metrics.h"
#include "lib/util/mem.h"

static void test_regression(void)
{
	float p[3] = { 1, 2, 3 }, t[3] = { 1, 3, 5 };
	double mae, rmse, r2;
	dlk_metrics_regression(p, t, 3, 1, &mae, &rmse, &r2);
	CHECK_NEAR(mae, 1.0, 1e-12);
	CHECK_NEAR(rmse, sqrt(5.0 / 3.0), 1e-12);
	CHECK_NEAR(r2, 1.0 - 5.0 / 8.0, 1e-12); /* SS_res 5, SS_tot 8 */
	/* two columns: R^2 is their mean; the second predicted exactly */
	float p2[6] = { 1, 10, 2, 20, 3, 30 }, t2[6] = { 1, 10, 3, 20, 5, 30 };
	dlk_metrics_regression(p2, t2, 3, 2, &mae, &rmse, &r2);
	CHECK_NEAR(r2, (0.375 + 1.0) / 2, 1e-12);
	CHECK_NEAR(mae, 3.0 / 6, 1e-12);
	/* predicting the mean scores 0; a constant column predicted wrong scores 0 */
	float pm[3] = { 3, 3, 3 }, tc[3] = { 2, 2, 2 };
	dlk_metrics_regression(pm, t, 3, 1, &mae, &rmse, &r2);
	CHECK_NEAR(r2, 0.0, 1e-12);
	dlk_metrics_regression(pm, tc, 3, 1, &mae, &rmse, &r2);
	CHECK_MSG(r2 == 0.0, "a constant target predicted wrong: R^2 0");
}

static void test_multilabel(void)
{
	float z[6] = { 1, -1, 1, 1, -1, -1 }, t[6] = { 1, 0, 0, 1, 1, 0 };
	double f1[2], micro, macro, subset;
	dlk_metrics_multilabel(z, t, 3, 2, 0.5, f1, &micro, &macro, &subset);
	CHECK_NEAR(f1[0], 0.5, 1e-12);  /* TP 1, FP 1, FN 1 */
	CHECK_NEAR(f1[1], 1.0, 1e-12);
	CHECK_NEAR(micro, 4.0 / 6.0, 1e-12);
	CHECK_NEAR(macro, 0.75, 1e-12);
	CHECK_NEAR(subset, 1.0 / 3.0, 1e-12);
	/* a threshold above sigmoid(1) predicts nothing */
	dlk_metrics_multilabel(z, t, 3, 2, 0.8, f1, &micro, &macro, &subset);
	CHECK_MSG(f1[0] == 0 && f1[1] == 0 && micro == 0 && macro == 0, "threshold 0.8: no class predicted, F1 0");
	CHECK_NEAR(subset, 0.0, 1e-12);
}

static void test_image(void)
{
	enum { H = 16, W = 16 };
	float a[2 * H * W], b[2 * H * W];
	for (int i = 0; i < 2 * H * W; i++)
		a[i] = 0.5f, b[i] = 0.6f;
	CHECK_NEAR(dlk_metrics_psnr(a, b, 2, H * W, 1.0), 20.0, 1e-5);
	CHECK_NEAR(dlk_metrics_psnr(a, a, 2, H * W, 1.0), 100.0, 1e-12);
	for (int i = 0; i < 2 * H * W; i++)
		a[i] = (float)((i * 37) % 101) / 100.0f;
	CHECK_NEAR(dlk_metrics_ssim(a, a, 1, 2, H, W, 1.0), 1.0, 1e-9);
	/* constant images 0.2 and 0.4: only the luminance term is left */
	for (int i = 0; i < 2 * H * W; i++)
		a[i] = 0.2f, b[i] = 0.4f;
	double C1 = 1e-4, want = (2 * 0.2 * 0.4 + C1) / (0.2 * 0.2 + 0.4 * 0.4 + C1);
	CHECK_NEAR(dlk_metrics_ssim(a, b, 1, 2, H, W, 1.0), want, 1e-6);
	/* noise lowers it, and it is symmetric */
	for (int i = 0; i < 2 * H * W; i++)
		a[i] = 0.5f + 0.3f * (float)(((i * 7919) % 13) - 6) / 6.0f, b[i] = 0.5f;
	double s1 = dlk_metrics_ssim(a, b, 1, 2, H, W, 1.0), s2 = dlk_metrics_ssim(b, a, 1, 2, H, W, 1.0);
	CHECK_MSG(s1 < 0.5 && fabs(s1 - s2) < 1e-12, "noise against a flat image: SSIM %.4f, symmetric", s1);
}

/* a net of one dense layer y = 2x - 1, evaluated as a regression model */
static void test_evaluate_task(void)
{
	struct dlk_layer_spec layers[1] = { { .kind = DLK_LAYER_DENSE, .units = 1 } };
	struct dlk_model m = { .input = { 1, 1, 1 }, .input_rank = 1, .layers = layers, .n_layers = 1, .init = "torch",
		               .task = DLK_TASK_REGRESSION, .loss = DLK_LOSS_L1 };
	struct dlk_net net;
	struct dlk_eval ev;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_dataset ds = DLK_DATASET_INIT;
	float x[4] = { 0, 1, 2, 3 }, t[4] = { -1, 1, 4, 5 };

	ds.n = 4;
	ds.shape[0] = ds.shape[1] = 1;
	ds.shape[2] = 1;
	ds.sample_size = 1;
	ds.x = x;
	ds.t = t;
	ds.target_size = 1;
	CHECK(!dlk_net_build(&net, &m, "test", 0, dlk_backend_cpu(), &err));
	net.params[0] = 2, net.params[1] = -1; /* predictions -1, 1, 3, 5: errors 0, 0, -1, 0 */
	CHECK_MSG(!dlk_evaluate_task(&net, &ds, 3, &m, NULL, &ev, &err), "evaluates: %s", err.msg);
	double v = -1;
	CHECK(ev.n == 4 && ev.task == DLK_TASK_REGRESSION);
	CHECK(!dlk_eval_metric(&ev, "mae", &v) && fabs(v - 0.25) < 1e-12);
	CHECK(!dlk_eval_metric(&ev, "rmse", &v) && fabs(v - 0.5) < 1e-12);
	CHECK(!dlk_eval_metric(&ev, "loss", &v) && fabs(v - 0.25) < 1e-7); /* l1, batches of 3 and 1 */
	CHECK(!dlk_eval_metric(&ev, "r2", &v) && fabs(v - (1 - 1.0 / 22.75)) < 1e-12); /* mean 2.25: SS_tot 22.75 */
	CHECK(dlk_eval_metric(&ev, "accuracy", &v) == -1);
	struct dlk_eval cp;
	dlk_eval_copy(&cp, &ev);
	CHECK(cp.n_metrics == ev.n_metrics && !strcmp(cp.metrics[0].name, "r2"));
	dlk_eval_release(&cp);
	dlk_eval_release(&ev);
	/* targets of the wrong width are an error, not a read past them */
	ds.target_size = 2;
	CHECK(dlk_evaluate_task(&net, &ds, 3, &m, NULL, &ev, &err) == -1);
	CHECK_STR(err.msg, "evaluation data has 2 target values per sample but the model gives 1");
	dlk_net_release(&net);
}

/* serving.gate's rules against a regression run's document, as model.json records it */
static void test_gate_rules(void)
{
	const char *text = "{\"format\": \"dlk-run\", \"version\": 1, \"name\": \"reg\", \"metrics\": {\"train_loss\": 0.1, "
	                   "\"test_samples\": 200, \"test_loss\": 0.05, \"test\": {\"r2\": 0.91, \"rmse\": 0.3, \"mae\": 0.2}}}";
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *doc = report_run_parse(text, strlen(text), "run", &err);
	struct report_run r = REPORT_RUN_INIT;
	char *why = NULL, line[256];
	CHECK_MSG(doc && !report_run_load(doc, "run", &r, &err), "a regression run document loads: %s", err.msg);
	if (!doc)
		return;
	CHECK(r.task_metrics && !r.have_test && r.test_samples == 200 && r.n_classes == 0);
	report_metrics_line(cJSON_GetObjectItemCaseSensitive(doc, "metrics"), line, sizeof(line));
	CHECK_STR(line, "r2 0.9100, rmse 0.3000, mae 0.2000");
	report_metric_headline(cJSON_GetObjectItemCaseSensitive(doc, "metrics"), line, sizeof(line));
	CHECK_STR(line, "r2 0.9100");

	struct dlk_gate_rule pass[2] = { { "r2", 0.9, 0, 1, 0 }, { "rmse", 0, 0.5, 0, 1 } };
	CHECK(dlk_gate_judge_rules(doc, &r, 0, 0, pass, 2, 0, &why) == DLK_GATE_PASSED && !why);
	struct dlk_gate_rule fail[3] = { { "r2", 0.95, 0, 1, 0 }, { "rmse", 0, 0.25, 0, 1 }, { "psnr", 20, 0, 1, 0 } };
	CHECK(dlk_gate_judge_rules(doc, &r, 0, 0, fail, 3, 0, &why) == DLK_GATE_REFUSED);
	CHECK_STR(why, "its test r2 0.9100 is below the minimum 0.95; its test rmse 0.3000 is above the maximum 0.25; "
	               "it has no recorded test metric 'psnr'");
	free(why);
	/* the loss is a metric of every task; a minimum accuracy on a regression run fails it */
	struct dlk_gate_rule loss = { "loss", 0, 0.01, 0, 1 };
	CHECK(dlk_gate_judge_rules(doc, &r, 0, 0, &loss, 1, 1, &why) == DLK_GATE_FORCED);
	CHECK_STR(why, "its test loss 0.0500 is above the maximum 0.01");
	free(why);
	CHECK(dlk_gate_judge_rules(doc, &r, 0.5, 0, NULL, 0, 0, &why) == DLK_GATE_REFUSED);
	free(why);
	report_run_release(&r);
	/* an image model's sample images are the first thing a size limit drops */
	cJSON *sm = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(doc, "metrics"), "samples");
	cJSON *big = cJSON_AddArrayToObject(sm, "output");
	for (int i = 0; i < 4000; i++)
		cJSON_AddItemToArray(big, cJSON_CreateNumber(0.1234));
	char *small = report_run_compact(doc, 4096);
	CHECK_MSG(small && !strstr(small, "\"samples\"") && strstr(small, "\"r2\":0.91"), "compacted: %s", small ? small : "(null)");
	free(small);
	cJSON_Delete(doc);
}

/* training.decay_norms_and_biases: false keeps weight decay off the exempt ranges, for each
 * optimizer: a zero gradient leaves decay alone to move a parameter */
static void test_no_decay(void)
{
	static const enum dlk_optim kinds[] = { DLK_OPT_SGD, DLK_OPT_ADAM, DLK_OPT_ADAMW };
	for (size_t k = 0; k < 3; k++) {
		struct dlk_training tr = { .epochs = 1, .batch_size = 1, .optimizer = kinds[k], .lr = 0.1, .beta1 = 0.9,
			                   .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1, .weight_decay = 0.1,
			                   .momentum = kinds[k] == DLK_OPT_SGD ? 0.9 : 0 };
		struct dlk_optimizer o;
		struct dlk_err err = DLK_ERR_INIT;
		float p[5] = { 1, 1, 1, 1, 1 }, g[5] = { 0 };
		size_t ranges[4] = { 1, 1, 3, 2 }; /* p[1], p[3], p[4]: biases */
		if (dlk_optimizer_init(&o, &tr, 5, 10, 10, dlk_backend_cpu(), &err))
			continue;
		dlk_optimizer_set_no_decay(&o, ranges, 2);
		dlk_optimizer_step(&o, p, g, tr.lr);
		/* SGD and Adam add wd * p to the gradient (Adam's normalised step is then lr), AdamW
		 * multiplies by 1 - lr * wd */
		float want = kinds[k] == DLK_OPT_SGD ? 0.99f : kinds[k] == DLK_OPT_ADAM ? 0.9f : 0.99f;
		CHECK_MSG(fabsf(p[0] - want) < 1e-5f && fabsf(p[2] - want) < 1e-5f, "optimizer %d: weights decay to %g (%g)",
		          (int)kinds[k], want, p[0]);
		CHECK_MSG(p[1] == 1.0f && p[3] == 1.0f && p[4] == 1.0f, "optimizer %d: the biases do not decay", (int)kinds[k]);
		dlk_optimizer_release(&o);
	}
}

int main(void)
{
	test_regression();
	test_multilabel();
	test_image();
	test_evaluate_task();
	test_gate_rules();
	test_no_decay();
	return CHECK_DONE();
}
