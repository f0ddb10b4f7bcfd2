/* Batch normalisation's CPU reference (lib/nn/cpu_batchnorm.c) and layer: the training backward
 * against central finite differences (in double, of a float forward: within 2e-3 relative), the
 * running statistics' update by hand (PyTorch's rule), evaluation with the running ones, the same
 * bits at 1 and 3 threads, and a net with a batchnorm layer: its state after the bias, a gradient
 * of 0 there, and a training forward that moves it where an evaluation one does not. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/backend.h"
#include "lib/nn/layer_ops.h"
#include "lib/nn/net.h"
#include "lib/project/project.h"
#include "lib/util/parallel.h"
#include "lib/util/rng.h"

static void rnd(float *x, size_t n, uint64_t seed, float scale, float shift)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = shift + scale * (2 * dlk_rng_uniform(&r) - 1);
}

/* L = sum(y * dy0) for a training forward of x: what the backward differentiates */
static double loss_of(const float *x, const float *w, const float *b, const float *dy0, int B, int C, int HW)
{
	size_t n = (size_t)B * C * HW;
	float *y = calloc(n, sizeof(float)), rm[8] = { 0 }, rv[8] = { 0 }, nb = 0, m[8], r[8];
	const struct dlk_backend *be = dlk_backend_cpu();
	be->batchnorm_forward(x, w, b, B, C, HW, 1e-5f, 0.1f, 1, rm, rv, &nb, y, m, r);
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)y[i] * dy0[i];
	free(y);
	return s;
}

static void test_gradients(int B, int C, int HW)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	size_t n = (size_t)B * C * HW;
	float *x = malloc(n * sizeof(float)), *dy = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
	float *dx = malloc(n * sizeof(float)), w[8], b[8], dw[8], db[8], rm[8] = { 0 }, rv[8], nb = 0, m[8], r[8];
	rnd(x, n, 1, 2.0f, 0.5f);
	rnd(dy, n, 2, 1.0f, 0.0f);
	rnd(w, (size_t)C, 3, 0.5f, 1.0f);
	rnd(b, (size_t)C, 4, 0.5f, 0.0f);
	for (int c = 0; c < C; c++)
		rv[c] = 1;
	be->batchnorm_forward(x, w, b, B, C, HW, 1e-5f, 0.1f, 1, rm, rv, &nb, y, m, r);
	be->batchnorm_backward(x, w, m, r, dy, B, C, HW, dx, dw, db);
	double worst = 0;
	for (size_t i = 0; i < n; i += (n > 40 ? 7 : 1)) {
		float keep = x[i];
		double h = 1e-2;
		x[i] = keep + (float)h;
		double lp = loss_of(x, w, b, dy, B, C, HW);
		x[i] = keep - (float)h;
		double lm = loss_of(x, w, b, dy, B, C, HW);
		x[i] = keep;
		double fd = (lp - lm) / (2 * h), e = fabs(fd - dx[i]) / (1e-2 + fabs(fd));
		worst = e > worst ? e : worst;
	}
	CHECK_MSG(worst < 2e-3, "dx of [%d, %d, %d] against finite differences (worst relative %.2g)", B, C, HW, worst);
	worst = 0;
	for (int c = 0; c < C; c++) {
		for (int wb = 0; wb < 2; wb++) {
			float *p = wb ? b : w, keep = p[c];
			double h = 1e-2;
			p[c] = keep + (float)h;
			double lp = loss_of(x, w, b, dy, B, C, HW);
			p[c] = keep - (float)h;
			double lm = loss_of(x, w, b, dy, B, C, HW);
			p[c] = keep;
			double fd = (lp - lm) / (2 * h), got = wb ? db[c] : dw[c], e = fabs(fd - got) / (1e-2 + fabs(fd));
			worst = e > worst ? e : worst;
		}
	}
	CHECK_MSG(worst < 2e-3, "dw and db of [%d, %d, %d] against finite differences (worst relative %.2g)", B, C, HW,
	          worst);
	free(x), free(dy), free(y), free(dx);
}

/* the running statistics by hand; evaluation normalises with them */
static void test_running(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	/* one channel, batch 2 of 2 values: 1, 3 | 5, 7: mean 4, biased var 5, unbiased 20/3 */
	float x[4] = { 1, 3, 5, 7 }, y[4], rm = 0.5f, rv = 2.0f, nb = 0, m, r;
	be->batchnorm_forward(x, NULL, NULL, 2, 1, 2, 1e-5f, 0.1f, 1, &rm, &rv, &nb, y, &m, &r);
	CHECK_MSG(fabsf(rm - (0.9f * 0.5f + 0.1f * 4.0f)) < 1e-6f, "running mean %g", (double)rm);
	CHECK_MSG(fabsf(rv - (0.9f * 2.0f + 0.1f * 20.0f / 3.0f)) < 1e-6f, "running var %g (unbiased)", (double)rv);
	CHECK(nb == 1.0f);
	CHECK_MSG(fabsf(y[0] - (1 - 4) / sqrtf(5 + 1e-5f)) < 1e-6f, "training: the batch's biased variance");
	/* evaluation: the running ones, nothing moves */
	float rm0 = rm, rv0 = rv;
	be->batchnorm_forward(x, NULL, NULL, 2, 1, 2, 1e-5f, 0.1f, 0, &rm, &rv, &nb, y, NULL, NULL);
	CHECK(rm == rm0 && rv == rv0 && nb == 1.0f);
	CHECK_MSG(fabsf(y[3] - (7 - rm) / sqrtf(rv + 1e-5f)) < 1e-6f, "evaluation: the running statistics");
}

static void test_threads(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	int B = 16, C = 8, HW = 300;
	size_t n = (size_t)B * C * HW;
	float *x = malloc(n * sizeof(float)), *y1 = malloc(n * sizeof(float)), *y3 = malloc(n * sizeof(float));
	float rm1[8] = { 0 }, rv1[8] = { 0 }, rm3[8] = { 0 }, rv3[8] = { 0 }, nb = 0, m[8], r[8];
	rnd(x, n, 9, 3.0f, 1.0f);
	dlk_parallel_set_threads(1);
	be->batchnorm_forward(x, NULL, NULL, B, C, HW, 1e-5f, 0.1f, 1, rm1, rv1, &nb, y1, m, r);
	dlk_parallel_set_threads(3);
	be->batchnorm_forward(x, NULL, NULL, B, C, HW, 1e-5f, 0.1f, 1, rm3, rv3, &nb, y3, m, r);
	CHECK_MSG(!memcmp(y1, y3, n * sizeof(float)) && !memcmp(rm1, rm3, sizeof(rm1)) && !memcmp(rv1, rv3, sizeof(rv1)),
	          "1 and 3 threads: the same bits");
	free(x), free(y1), free(y3);
}

/* a net [2, 3, 3] -> batchnorm -> flatten -> dense 2: the state's place, its gradient, its moves */
static void test_net(void)
{
	struct dlk_layer_spec layers[3] = {
		{ .kind = DLK_LAYER_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f },
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 2 },
	};
	struct dlk_model model = { .input = { 2, 3, 3 }, .input_rank = 3, .layers = layers, .n_layers = 3 };
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	CHECK_MSG(!dlk_net_build(&net, &model, "dlk.yaml", 2, dlk_backend_cpu(), &err), "builds (%s)", err.msg);
	CHECK(!dlk_net_init_params(&net, "torch", 1, &err));
	CHECK(!dlk_net_reserve(&net, 4, &err));
	const struct dlk_layer *L = &net.layers[0];
	CHECK(L->n_w == 2 && L->n_b == 2 && L->n_s == 5 && L->s_off == L->b_off + 2);
	CHECK(net.n_params == 4 + 5 + 18 * 2 + 2);
	size_t off;
	CHECK(dlk_layer_tensor(L, DLK_TENSOR_RUNNING_VAR, &off) == 2 && off == L->s_off + 2);
	CHECK(dlk_layer_tensor(L, DLK_TENSOR_NUM_BATCHES, &off) == 1 && off == L->s_off + 4);
	CHECK(dlk_layer_tensor(&net.layers[2], DLK_TENSOR_RUNNING_MEAN, &off) == 0);
	const float *s = net.params + L->s_off;
	CHECK(s[0] == 0 && s[1] == 0 && s[2] == 1 && s[3] == 1 && s[4] == 0 && net.params[L->w_off] == 1);
	float x[4 * 18];
	int32_t labels[4] = { 0, 1, 0, 1 };
	rnd(x, 72, 5, 1.0f, 2.0f);
	dlk_net_forward(&net, x, 4, 0);
	CHECK_MSG(s[0] == 0 && s[4] == 0, "an evaluation forward leaves the state alone");
	memset(net.grads, 0x7f, sizeof(float) * net.n_params); /* garbage the backward must overwrite */
	dlk_net_forward(&net, x, 4, 1);
	dlk_net_backward(&net, labels, 4);
	CHECK_MSG(s[0] > 0.1f && s[4] == 1.0f, "a training forward moves the running mean (%g) and counts (%g)",
	          (double)s[0], (double)s[4]);
	int zero = 1;
	for (size_t j = 0; j < L->n_s; j++)
		zero &= net.grads[L->s_off + j] == 0.0f;
	CHECK_MSG(zero, "the state's gradient is 0");
	dlk_net_release(&net);
}

int main(void)
{
	test_gradients(4, 3, 5);  /* [C, H, W] activations: per channel */
	test_gradients(6, 5, 1);  /* flat: per feature */
	test_gradients(2, 1, 1);  /* the smallest batch */
	test_running();
	test_threads();
	test_net();
	return CHECK_DONE();
}
