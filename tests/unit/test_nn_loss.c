/* The losses of lib/nn/loss.h: values by hand, gradients against finite differences (in double,
 * through the reference), against PyTorch (the frameworks venv, in float64), and through a net
 * (the backward of any loss is the backward of softmax cross-entropy when it is that loss). */
#include <stdlib.h>

#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include "lib/nn/loss.h"
#include "lib/nn/net.h"
#include "lib/project/layers.h"
#include "lib/util/mem.h"
#include "lib/util/rng.h"

#define PY ".deps/frameworks/bin/python"

static const char *const names[] = { "ce", "bce", "mse", "l1", "huber" };

static void test_hand_values(void)
{
	/* a row of logits (0, ln 3): softmax (1/4, 3/4); label 1: -ln(3/4) */
	float z[2] = { 0.0f, logf(3.0f) }, d[2];
	int32_t y = 1;
	CHECK_NEAR(dlk_loss_ref(DLK_LOSS_SOFTMAX_CE, z, &y, NULL, 1, 2, 0, d), -log(0.75), 1e-6);
	CHECK_NEAR(d[0], 0.25, 1e-6);
	CHECK_NEAR(d[1], -0.25, 1e-6);
	/* smoothing 0.2 over 2 classes: target (0.1, 0.9): 0.1 ln 4 + 0.9 ln(4/3) */
	CHECK_NEAR(dlk_loss_ref(DLK_LOSS_SOFTMAX_CE, z, &y, NULL, 1, 2, 0.2f, d), 0.1 * log(4) + 0.9 * log(4.0 / 3), 1e-6);
	CHECK_NEAR(d[0], 0.25 - 0.1, 1e-6);

	float o[4] = { 1, 2, 3, 4 }, t[4] = { 1.5f, 2, 1, 4 }, g[4];
	/* errors -0.5, 0, 2, 0 */
	CHECK_NEAR(dlk_loss_ref(DLK_LOSS_MSE, o, NULL, t, 2, 2, 0, g), (0.25 + 4) / 4, 1e-7);
	CHECK_NEAR(g[2], 2 * 2.0 / 4, 1e-7);
	CHECK_NEAR(dlk_loss_ref(DLK_LOSS_L1, o, NULL, t, 2, 2, 0, g), 2.5 / 4, 1e-7);
	CHECK_MSG(g[1] == 0.0f && g[0] == -0.25f && g[2] == 0.25f, "l1's gradient is sign/n, 0 where equal");
	/* huber delta 1: 0.5 * 0.25 and 1 * (2 - 0.5) */
	CHECK_NEAR(dlk_loss_ref(DLK_LOSS_HUBER, o, NULL, t, 2, 2, 1.0f, g), (0.125 + 1.5) / 4, 1e-7);
	CHECK_NEAR(g[2], 1.0 / 4, 1e-7);
	CHECK_NEAR(g[0], -0.5 / 4, 1e-7);
	/* bce: logit 0 against 1 is ln 2; a logit of 100 against 0 is 100, not inf */
	float bz[2] = { 0, 100 }, bt[2] = { 1, 0 };
	CHECK_NEAR(dlk_loss_ref(DLK_LOSS_BCE, bz, NULL, bt, 1, 2, 0, g), (log(2) + 100) / 2, 1e-6);
	CHECK_NEAR(g[0], -0.25, 1e-6);
	CHECK_NEAR(g[1], 0.5, 1e-6);
	float big[1] = { -100 }, one[1] = { 1 };
	CHECK_MSG(isfinite(dlk_loss_ref(DLK_LOSS_BCE, big, NULL, one, 1, 1, 0, g)), "bce of a logit of -100 is finite");
}

/* d(loss)/d(out) against central differences of the reference */
static void test_finite_differences(void)
{
	enum { B = 3, K = 5 };
	struct dlk_rng r;
	dlk_rng_seed(&r, 11);
	for (int kind = 0; kind <= DLK_LOSS_HUBER; kind++) {
		float out[B * K], t[B * K], g[B * K];
		int32_t lab[B];
		double worst = 0;
		for (int i = 0; i < B * K; i++) {
			out[i] = 3.0f * (2.0f * dlk_rng_uniform(&r) - 1.0f);
			t[i] = kind == DLK_LOSS_BCE ? dlk_rng_uniform(&r) : 3.0f * (2.0f * dlk_rng_uniform(&r) - 1.0f);
		}
		for (int b = 0; b < B; b++)
			lab[b] = (int32_t)(dlk_rng_uniform(&r) * K) % K;
		float param = kind == DLK_LOSS_SOFTMAX_CE ? 0.1f : 0.7f;
		dlk_loss_ref(kind, out, lab, t, B, K, param, g);
		for (int i = 0; i < B * K; i++) {
			const float h = 1e-2f;
			float keep = out[i];
			/* L1 and Huber have kinks: skip points within h of them */
			if ((kind == DLK_LOSS_L1 && fabsf(keep - t[i]) < 2 * h) ||
			    (kind == DLK_LOSS_HUBER && fabsf(fabsf(keep - t[i]) - param) < 2 * h))
				continue;
			out[i] = keep + h;
			double lp = dlk_loss_ref(kind, out, lab, t, B, K, param, NULL);
			out[i] = keep - h;
			double lm = dlk_loss_ref(kind, out, lab, t, B, K, param, NULL);
			out[i] = keep;
			double fd = (lp - lm) / (2 * h), e = fabs(fd - g[i]);
			worst = e > worst ? e : worst;
		}
		CHECK_MSG(worst < 2e-3, "%s: gradient within 2e-3 of finite differences (worst %.2g)", names[kind], worst);
	}
}

/* the same inputs through torch.nn.functional in float64 */
static void test_pytorch(void)
{
	enum { B = 4, K = 3 };
	char *dir = test_tmpdir("loss");
	struct dlk_rng r;
	dlk_rng_seed(&r, 5);
	if (!dir)
		return;
	char *script = xasprintf("%s/ref.py", dir), *in = xasprintf("%s/in.txt", dir);
	FILE *f = fopen(script, "w");
	CHECK(f != NULL);
	if (!f)
		goto out;
	fputs("import sys, torch\n"
	      "import torch.nn.functional as F\n"
	      "v = open(sys.argv[1]).read().split()\n"
	      "kind, b, k, param = v[0], int(v[1]), int(v[2]), float(v[3])\n"
	      "nums = [float(x) for x in v[4:]]\n"
	      "z = torch.tensor(nums[:b*k], dtype=torch.float64).reshape(b, k).requires_grad_()\n"
	      "rest = nums[b*k:]\n"
	      "if kind == 'ce':\n"
	      "    y = torch.tensor([int(x) for x in rest[:b]])\n"
	      "    l = F.cross_entropy(z, y, label_smoothing=param)\n"
	      "else:\n"
	      "    t = torch.tensor(rest, dtype=torch.float64).reshape(b, k)\n"
	      "    l = {'bce': lambda: F.binary_cross_entropy_with_logits(z, t), 'mse': lambda: F.mse_loss(z, t),\n"
	      "         'l1': lambda: F.l1_loss(z, t), 'huber': lambda: F.huber_loss(z, t, delta=param)}[kind]()\n"
	      "l.backward()\n"
	      "print(repr(l.item()), ' '.join(repr(x) for x in z.grad.flatten().tolist()))\n",
	      f);
	fclose(f);
	for (int kind = 0; kind <= DLK_LOSS_HUBER; kind++) {
		float out[B * K], t[B * K], g[B * K], param = kind == DLK_LOSS_SOFTMAX_CE ? 0.15f : 0.5f;
		int32_t lab[B];
		for (int i = 0; i < B * K; i++) {
			out[i] = 4.0f * (2.0f * dlk_rng_uniform(&r) - 1.0f);
			t[i] = kind == DLK_LOSS_BCE ? (float)(dlk_rng_uniform(&r) < 0.5f) : 2.0f * dlk_rng_uniform(&r);
		}
		for (int b = 0; b < B; b++)
			lab[b] = b % K;
		float loss = dlk_loss_ref(kind, out, lab, t, B, K, param, g);
		if (!(f = fopen(in, "w")))
			break;
		fprintf(f, "%s %d %d %.9g\n", names[kind], B, K, param);
		for (int i = 0; i < B * K; i++)
			fprintf(f, "%.9g ", out[i]);
		for (int i = 0; i < (kind == DLK_LOSS_SOFTMAX_CE ? B : B * K); i++)
			fprintf(f, "%.9g ", kind == DLK_LOSS_SOFTMAX_CE ? (double)lab[i] : (double)t[i]);
		fclose(f);
		char *cmd = xasprintf("%s '%s' '%s'", PY, script, in);
		FILE *p = popen(cmd, "r");
		double tl = NAN, tg[B * K], worst = 0;
		int got = p ? fscanf(p, "%lf", &tl) : 0;
		for (int i = 0; p && got == 1 && i < B * K; i++)
			if (fscanf(p, "%lf", &tg[i]) != 1)
				got = 0;
		int rc = p ? pclose(p) : -1;
		CHECK_MSG(rc == 0 && got == 1, "%s: PyTorch computed the reference (%s)", names[kind], PY);
		if (rc == 0 && got == 1) {
			for (int i = 0; i < B * K; i++)
				worst = fmax(worst, fabs(tg[i] - g[i]));
			CHECK_MSG(fabs(tl - loss) <= 1e-5 * (1 + fabs(tl)), "%s: loss %.8g as PyTorch's %.8g", names[kind],
			          loss, tl);
			CHECK_MSG(worst <= 1e-6, "%s: gradient as PyTorch's (worst difference %.2g)", names[kind], worst);
		}
		free(cmd);
	}
out:
	free(script);
	free(in);
	test_tmpdir_remove(dir);
}

/* Through a net: dlk_loss_backward with cross-entropy gives dlk_net_backward's gradients, and a
 * regression net's gradients match finite differences of its mse through the forward. */
static void test_through_net(void)
{
	struct dlk_layer_spec layers[3] = { { .kind = DLK_LAYER_DENSE, .units = 4 }, { .kind = DLK_LAYER_TANH },
		                            { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_model m = { .input = { 1, 1, 5 }, .input_rank = 1, .layers = layers, .n_layers = 3, .init = "torch",
		               .loss = DLK_LOSS_SOFTMAX_CE };
	struct dlk_net net;
	struct dlk_err err = DLK_ERR_INIT;
	const struct dlk_backend *be = dlk_backend_cpu();
	float x[2 * 5], t[2 * 3];
	int32_t y[2] = { 0, 2 };
	struct dlk_rng r;
	dlk_rng_seed(&r, 3);
	for (int i = 0; i < 10; i++)
		x[i] = 2.0f * dlk_rng_uniform(&r) - 1.0f;
	for (int i = 0; i < 6; i++)
		t[i] = dlk_rng_uniform(&r);

	int ok = !dlk_net_build(&net, &m, "test", 3, be, &err) && !dlk_net_init_params(&net, "torch", 1, &err) &&
	         !dlk_net_reserve(&net, 2, &err);
	CHECK_MSG(ok, "a classifier builds: %s", err.msg);
	if (!ok)
		return;
	dlk_net_forward(&net, x, 2, 1);
	float l1 = dlk_net_backward(&net, y, 2);
	float *g1 = xmalloc(sizeof(float) * net.n_params);
	memcpy(g1, net.grads, sizeof(float) * net.n_params);
	struct dlk_loss_spec ce = { DLK_LOSS_SOFTMAX_CE, 0 };
	dlk_net_forward(&net, x, 2, 1);
	float l2 = dlk_loss_backward(&net, &ce, y, NULL, 2);
	CHECK_MSG(l1 == l2 && !memcmp(g1, net.grads, sizeof(float) * net.n_params),
	          "the loss object's cross-entropy is dlk_net_backward's, bit for bit");
	free(g1);
	dlk_net_release(&net);

	/* a regression net of one output per target */
	m.task = DLK_TASK_REGRESSION;
	m.loss = DLK_LOSS_HUBER;
	layers[2].units = 3;
	ok = !dlk_net_build(&net, &m, "test", 0, be, &err) && !dlk_net_init_params(&net, "torch", 2, &err) &&
	     !dlk_net_reserve(&net, 2, &err);
	CHECK_MSG(ok, "a regression net builds: %s", err.msg);
	if (!ok)
		return;
	struct dlk_loss_spec hub = { DLK_LOSS_HUBER, 0.3f };
	dlk_net_forward(&net, x, 2, 1);
	dlk_loss_backward(&net, &hub, NULL, t, 2);
	double worst = 0;
	for (size_t i = 0; i < net.n_params; i++) {
		float keep = net.params[i], h = 1e-3f;
		net.params[i] = keep + h;
		double lp = dlk_loss_ref(DLK_LOSS_HUBER, dlk_net_forward(&net, x, 2, 0), NULL, t, 2, 3, 0.3f, NULL);
		net.params[i] = keep - h;
		double lm = dlk_loss_ref(DLK_LOSS_HUBER, dlk_net_forward(&net, x, 2, 0), NULL, t, 2, 3, 0.3f, NULL);
		net.params[i] = keep;
		worst = fmax(worst, fabs((lp - lm) / (2 * h) - net.grads[i]));
	}
	CHECK_MSG(worst < 2e-3, "huber through a dense-tanh-dense net: gradients within 2e-3 of finite differences "
	          "(worst %.2g)", worst);
	/* a single output is a regression model, not an error */
	layers[2].units = 1;
	dlk_net_release(&net);
	CHECK_MSG(!dlk_net_build(&net, &m, "test", 0, be, &err) && net.n_classes == 1, "one output builds for regression");
	dlk_net_release(&net);
}

int main(void)
{
	test_hand_values();
	test_finite_differences();
	test_pytorch();
	test_through_net();
	return CHECK_DONE();
}
