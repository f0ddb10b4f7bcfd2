/* token_cross_entropy (model.task lm): the mean next-token cross-entropy over the positions of a
 * [batch, T, V] output, by hand, against finite differences, against PyTorch's F.cross_entropy
 * over (B*T, V) with ignore_index (the frameworks venv, float64), and through a bigram net whose
 * embedding gives the logits (its table's gradient against finite differences of the loss). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include "lib/nn/backend.h"
#include "lib/nn/loss.h"
#include "lib/nn/net.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"
#include "lib/util/rng.h"

#define PY ".deps/frameworks/bin/python"

static void test_hand_values(void)
{
	/* two positions of logits (0, ln 3): targets 1 and ignored: -ln(3/4) over the one counted */
	float z[4] = { 0.0f, logf(3.0f), 5.0f, -5.0f }, t[2] = { 1.0f, -1.0f }, d[4];
	CHECK_NEAR(dlk_loss_ref(DLK_LOSS_TOKEN_CE, z, NULL, t, 2, 2, 0, d), -log(0.75), 1e-6);
	CHECK_NEAR(d[0], 0.25, 1e-6);
	CHECK_NEAR(d[1], -0.25, 1e-6);
	CHECK(d[2] == 0 && d[3] == 0);
	/* both counted: the mean over 2 positions, each gradient halved */
	t[1] = 0.0f;
	double l1 = -log(0.75), l2 = -(5.0 - (5.0 + log(1 + exp(-10.0))));
	CHECK_NEAR(dlk_loss_ref(DLK_LOSS_TOKEN_CE, z, NULL, t, 2, 2, 0, d), (l1 + l2) / 2, 1e-6);
	CHECK_NEAR(d[0], 0.125, 1e-6);
	/* nothing counted: 0 and no gradient */
	t[0] = t[1] = -1.0f;
	CHECK(dlk_loss_ref(DLK_LOSS_TOKEN_CE, z, NULL, t, 2, 2, 0, d) == 0.0f && d[0] == 0 && d[1] == 0);
	CHECK(!strcmp(dlk_loss_name(DLK_LOSS_TOKEN_CE), "token_cross_entropy") &&
	      dlk_loss_from_name("token_cross_entropy") == DLK_LOSS_TOKEN_CE && !dlk_loss_wants_labels(DLK_LOSS_TOKEN_CE));
	CHECK(!strcmp(dlk_task_name(DLK_TASK_LM), "lm") && dlk_task_from_name("lm") == DLK_TASK_LM);
}

static void test_finite_differences(void)
{
	enum { R = 6, V = 7 };
	float out[R * V], t[R], g[R * V];
	double worst = 0;
	struct dlk_rng r;
	dlk_rng_seed(&r, 17);
	for (int i = 0; i < R * V; i++)
		out[i] = 3.0f * (2.0f * dlk_rng_uniform(&r) - 1.0f);
	for (int i = 0; i < R; i++)
		t[i] = i == 3 ? -100.0f : (float)((i * 3 + 1) % V);
	dlk_loss_ref(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, g);
	for (int i = 0; i < R * V; i++) {
		const float h = 1e-2f;
		float keep = out[i];
		out[i] = keep + h;
		double lp = dlk_loss_ref(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, NULL);
		out[i] = keep - h;
		double lm = dlk_loss_ref(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, NULL);
		out[i] = keep;
		worst = fmax(worst, fabs((lp - lm) / (2 * h) - g[i]));
	}
	CHECK_MSG(worst < 1e-3, "gradient within 1e-3 of finite differences (worst %.2g)", worst);
}

/* The CPU backend's token cross-entropy (rows over the pool, dlk_k_exp, lane sums) against the
 * reference: a GPT-sized vocabulary, ignored and out-of-range targets, loss within 1e-6
 * relative, gradients within 1e-7; the same bits on 1 and 2 threads; a NaN logit gives NaN */
static void test_cpu_backend(void)
{
	enum { R = 300, V = 257 };
	const struct dlk_backend *be = dlk_backend_cpu();
	float *out = xmalloc(sizeof(float) * R * V), *g = xmalloc(sizeof(float) * R * V);
	float *g1 = xmalloc(sizeof(float) * R * V), *g2 = xmalloc(sizeof(float) * R * V), t[R];
	struct dlk_rng r;
	dlk_rng_seed(&r, 5);
	for (int i = 0; i < R * V; i++)
		out[i] = 8.0f * (2.0f * dlk_rng_uniform(&r) - 1.0f) + (i % V == 3 ? 30.0f : 0.0f);
	for (int i = 0; i < R; i++)
		t[i] = i % 17 == 0 ? -100.0f : (i % 29 == 0 ? (float)(V + 3) : (float)((i * 7) % V));
	float want = dlk_loss_ref(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, g);
	be->set_threads(1);
	float l1 = be->loss(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, g1);
	be->set_threads(2);
	float l2 = be->loss(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, g2);
	float l0 = be->loss(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, NULL);
	double worst = 0;
	for (int i = 0; i < R * V; i++)
		worst = fmax(worst, fabs((double)g1[i] - g[i]));
	CHECK_MSG(fabs(l1 - want) <= 1e-6 * fabs(want), "loss %.9g as the reference's %.9g", l1, want);
	CHECK_MSG(worst <= 1e-7, "gradients within 1e-7 of the reference's (worst %.2g)", worst);
	CHECK(l1 == l2 && l0 == l1 && !memcmp(g1, g2, sizeof(float) * R * V));
	CHECK(g1[17 * V] == 0.0f && g1[29 * V + 5] == 0.0f); /* ignored, out of range: no gradient */
	out[5 * V + 9] = NAN;
	CHECK(isnan(be->loss(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, g1)));
	be->set_threads(1);
	dlk_parallel_shutdown();
	free(out), free(g), free(g1), free(g2);
}

/* F.cross_entropy(z.view(B*T, V), y.view(B*T), ignore_index=-100) in float64 */
static void test_pytorch(void)
{
	enum { B = 3, T = 4, V = 5, R = B * T };
	char *dir = test_tmpdir("lmloss");
	struct dlk_rng r;
	dlk_rng_seed(&r, 23);
	if (!dir)
		return;
	char *script = xasprintf("%s/ref.py", dir), *in = xasprintf("%s/in.txt", dir);
	FILE *f = fopen(script, "w");
	CHECK(f != NULL);
	if (!f)
		goto out;
	fputs("import sys, torch\n"
	      "import torch.nn.functional as F\n"
	      "v = [float(x) for x in open(sys.argv[1]).read().split()]\n"
	      "b, t, k = int(v[0]), int(v[1]), int(v[2])\n"
	      "z = torch.tensor(v[3:3+b*t*k], dtype=torch.float64).reshape(b, t, k).requires_grad_()\n"
	      "y = torch.tensor([int(x) for x in v[3+b*t*k:]]).reshape(b, t)\n"
	      "l = F.cross_entropy(z.view(b*t, k), y.view(b*t), ignore_index=-100)\n"
	      "l.backward()\n"
	      "print(repr(l.item()), ' '.join(repr(x) for x in z.grad.flatten().tolist()))\n",
	      f);
	fclose(f);
	float out[R * V], t[R], g[R * V];
	for (int i = 0; i < R * V; i++)
		out[i] = 4.0f * (2.0f * dlk_rng_uniform(&r) - 1.0f);
	for (int i = 0; i < R; i++)
		t[i] = i % 5 == 4 ? -100.0f : (float)((i * 2 + 1) % V);
	float loss = dlk_loss_ref(DLK_LOSS_TOKEN_CE, out, NULL, t, R, V, 0, g);
	if (!(f = fopen(in, "w")))
		goto out;
	fprintf(f, "%d %d %d\n", B, T, V);
	for (int i = 0; i < R * V; i++)
		fprintf(f, "%.9g ", out[i]);
	for (int i = 0; i < R; i++)
		fprintf(f, "%d ", (int)t[i]);
	fclose(f);
	char *cmd = xasprintf("%s '%s' '%s'", PY, script, in);
	FILE *p = popen(cmd, "r");
	double tl = NAN, tg[R * V], worst = 0;
	int got = p ? fscanf(p, "%lf", &tl) : 0;
	for (int i = 0; p && got == 1 && i < R * V; i++)
		if (fscanf(p, "%lf", &tg[i]) != 1)
			got = 0;
	int rc = p ? pclose(p) : -1;
	CHECK_MSG(rc == 0 && got == 1, "PyTorch computed the reference (%s)", PY);
	if (rc == 0 && got == 1) {
		for (int i = 0; i < R * V; i++)
			worst = fmax(worst, fabs(tg[i] - g[i]));
		CHECK_MSG(fabs(tl - loss) <= 1e-5 * (1 + fabs(tl)), "loss %.8g as PyTorch's %.8g", loss, tl);
		CHECK_MSG(worst <= 1e-6, "gradient as PyTorch's (worst difference %.2g)", worst);
	}
	free(cmd);
out:
	free(script);
	free(in);
	test_tmpdir_remove(dir);
}

/* a bigram LM: embedding(V, V) over T tokens gives [1, T, V] logits; dlk_loss_backward's table
 * gradient against finite differences of the loss through the forward */
static void test_bigram_net(void)
{
	enum { B = 2, T = 5, V = 6 };
	struct dlk_layer_spec layers[1] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = V, .dim = V } };
	struct dlk_model m = { .input = { 1, 1, T }, .input_rank = 1, .layers = layers, .n_layers = 1, .init = "torch",
		               .task = DLK_TASK_LM, .loss = DLK_LOSS_TOKEN_CE };
	struct dlk_net net;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_loss_spec ls = { DLK_LOSS_TOKEN_CE, 0 };
	float x[B * T], tg[B * T];
	for (int i = 0; i < B * T; i++) {
		x[i] = (float)((i * 5 + 2) % V);
		tg[i] = i == 7 ? -1.0f : (float)((i * 3 + 1) % V);
	}
	int ok = !dlk_net_build(&net, &m, "test", 0, dlk_backend_cpu(), &err) &&
	         !dlk_net_init_params(&net, "torch", 4, &err) && !dlk_net_reserve(&net, B, &err);
	CHECK_MSG(ok, "a bigram LM builds: %s", err.msg);
	if (!ok)
		return;
	CHECK_MSG(net.n_classes == T * V, "its output is T x V per sample (%d)", net.n_classes);
	int rows = B, k = 0;
	dlk_loss_rows(&net, &rows, &k);
	CHECK(rows == B * T && k == V);
	dlk_net_forward(&net, x, B, 1);
	dlk_loss_backward(&net, &ls, NULL, tg, B);
	float *g = xmalloc(sizeof(float) * net.n_params);
	memcpy(g, net.grads, sizeof(float) * net.n_params);
	double worst = 0;
	for (size_t i = 0; i < net.n_params; i++) {
		const float h = 1e-2f;
		float keep = net.params[i];
		net.params[i] = keep + h;
		double lp = dlk_loss_ref(DLK_LOSS_TOKEN_CE, dlk_net_forward(&net, x, B, 0), NULL, tg, B * T, V, 0, NULL);
		net.params[i] = keep - h;
		double lm = dlk_loss_ref(DLK_LOSS_TOKEN_CE, dlk_net_forward(&net, x, B, 0), NULL, tg, B * T, V, 0, NULL);
		net.params[i] = keep;
		worst = fmax(worst, fabs((lp - lm) / (2 * h) - g[i]));
	}
	CHECK_MSG(worst < 1e-3, "the table's gradient within 1e-3 of finite differences (worst %.2g)", worst);
	free(g);
	dlk_net_release(&net);

	/* an output that is not a row of logits per token is refused */
	layers[0].dim = 4;
	struct dlk_layer_spec two[2] = { layers[0], { .kind = DLK_LAYER_FLATTEN } };
	m.layers = two;
	m.n_layers = 2;
	CHECK(dlk_net_build(&net, &m, "test", 0, dlk_backend_cpu(), &err) != 0);
	CHECK_CONTAINS(err.msg, "not [1, 5, VOCAB] logits");
}

int main(void)
{
	test_hand_values();
	test_finite_differences();
	test_cpu_backend();
	test_pytorch();
	test_bigram_net();
	return CHECK_DONE();
}
