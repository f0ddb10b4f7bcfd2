/* Batch normalisation's CPU reference (lib/nn/cpu_batchnorm.c) and layer: the training backward
 * against central finite differences (in double, of a float forward: within 2e-3 relative), the
 * running statistics' update by hand (PyTorch's rule), evaluation with the running ones, the same
 * bits at 1 and 3 threads, and a net with a batchnorm layer: its state after the bias, a gradient
 * of 0 there, and a training forward that moves it where an evaluation one does not. A ReLU after
 * a batch norm runs inside it (batchnorm_relu_forward/backward): the same bits as the two passes,
 * kernel by kernel and in a net, sequential and a graph, against a backend without the fused ops. */
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

/* the fused kernels against batchnorm then act_forward, act_backward then batchnorm_backward */
static void test_relu_kernels(int B, int C, int HW, int threads)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	size_t n = (size_t)B * C * HW;
	float *x = malloc(n * 4), *dy = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4), *t = malloc(n * 4);
	float *dx1 = malloc(n * 4), *dx2 = malloc(n * 4), *w = malloc((size_t)C * 4), *b = malloc((size_t)C * 4);
	float *st = calloc(4 * (size_t)C + 2, 4), *dw1 = malloc((size_t)C * 4), *db1 = malloc((size_t)C * 4);
	float *dw2 = malloc((size_t)C * 4), *db2 = malloc((size_t)C * 4), *m = malloc((size_t)C * 4), *r = malloc((size_t)C * 4);
	rnd(x, n, 11, 2.0f, 0.5f);
	rnd(dy, n, 12, 1.0f, 0.0f);
	rnd(w, (size_t)C, 13, 1.0f, 0.2f);
	rnd(b, (size_t)C, 14, 0.5f, 0.0f);
	dlk_parallel_set_threads(threads);
	float *rm = st, *rv = st + C, *rm2 = st + 2 * C, *rv2 = st + 3 * C, *nb = st + 4 * C;
	be->batchnorm_forward(x, w, b, B, C, HW, 1e-5f, 0.1f, 1, rm, rv, nb, t, m, r);
	be->act_forward(DLK_ACT_RELU, t, y1, n);
	be->batchnorm_relu_forward(x, w, b, B, C, HW, 1e-5f, 0.1f, 1, rm2, rv2, nb + 1, y2, m, r);
	int zeros = 0;
	for (size_t i = 0; i < n; i++)
		zeros += y2[i] == 0.0f;
	CHECK_MSG(!memcmp(y1, y2, n * 4) && !memcmp(rm, rm2, (size_t)C * 4) && !memcmp(rv, rv2, (size_t)C * 4) &&
	                  zeros > 0 && zeros < (int)n,
	          "[%d, %d, %d], %d threads: batch norm + ReLU in one pass, the same bits as two (%d zeros)", B, C, HW,
	          threads, zeros);
	be->act_backward(DLK_ACT_RELU, y1, dy, t, n);
	be->batchnorm_backward(x, w, m, r, t, B, C, HW, dx1, dw1, db1);
	be->batchnorm_relu_backward(x, w, m, r, y2, dy, B, C, HW, dx2, dw2, db2);
	CHECK_MSG(!memcmp(dx1, dx2, n * 4) && !memcmp(dw1, dw2, (size_t)C * 4) && !memcmp(db1, db2, (size_t)C * 4),
	          "[%d, %d, %d], %d threads: its backward, the same bits as the ReLU's then the batch norm's", B, C, HW,
	          threads);
	dlk_parallel_set_threads(1);
	free(x), free(dy), free(y1), free(y2), free(t), free(dx1), free(dx2), free(w), free(b), free(st);
	free(dw1), free(db1), free(dw2), free(db2), free(m), free(r);
}

/* conv 4 -> batchnorm -> relu (-> add of the conv's input, a graph) -> flatten -> dense 3, on the
 * CPU backend and on a copy without the fused ops: the ReLU runs inside the batch norm on the
 * first only, and the loss, output and every gradient are the same bits */
static void test_net_relu(int graph)
{
	struct dlk_layer_spec layers[6] = {
		{ .kind = DLK_LAYER_CONV2D, .filters = 2, .kernel = 3, .stride = 1, .padding = 1 },
		{ .kind = DLK_LAYER_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f },
		{ .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_ADD, .n_inputs = 2, .inputs = { -1, 2 } },
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 3 },
	};
	if (!graph) /* no add */
		memmove(&layers[3], &layers[4], 2 * sizeof(layers[0]));
	struct dlk_model model = { .input = { 2, 5, 4 }, .input_rank = 3, .layers = layers, .n_layers = graph ? 6 : 5 };
	struct dlk_backend apart = *dlk_backend_cpu();
	apart.batchnorm_relu_forward = NULL;
	apart.batchnorm_relu_backward = NULL;
	struct dlk_net a = DLK_NET_INIT, f = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	CHECK_MSG(!dlk_net_build(&f, &model, "dlk.yaml", 3, dlk_backend_cpu(), &err), "builds (%s)", err.msg);
	CHECK_MSG(!dlk_net_build(&a, &model, "dlk.yaml", 3, &apart, &err), "builds (%s)", err.msg);
	CHECK(!dlk_net_init_params(&f, "torch", 3, &err) && !dlk_net_init_params(&a, "torch", 3, &err));
	CHECK(!dlk_net_reserve(&f, 6, &err) && !dlk_net_reserve(&a, 6, &err));
	CHECK_MSG(f.layers[1].bn_relu && f.layers[2].fused && !a.layers[1].bn_relu && !a.layers[2].fused && f.graph == graph,
	          "%s: the ReLU runs inside the batch norm where the backend has the fused ops", graph ? "graph" : "sequential");
	float x[6 * 40];
	int32_t labels[6] = { 0, 1, 2, 0, 1, 2 };
	rnd(x, 240, 21, 1.0f, 0.3f);
	int same = 1;
	for (int step = 0; step < 2; step++) {
		float lf = (dlk_net_forward(&f, x, 6, 1), dlk_net_backward(&f, labels, 6));
		float la = (dlk_net_forward(&a, x, 6, 1), dlk_net_backward(&a, labels, 6));
		same &= !memcmp(&lf, &la, 4) && !memcmp(f.grads, a.grads, 4 * f.n_params) &&
		        !memcmp(f.params, a.params, 4 * f.n_params) && !memcmp(dlk_net_output(&f), dlk_net_output(&a), 4 * 18);
	}
	CHECK_MSG(same, "%s: loss, output and gradients the same bits fused and apart", graph ? "graph" : "sequential");
	dlk_net_release(&f);
	dlk_net_release(&a);
}

int main(void)
{
	test_relu_kernels(4, 3, 37, 1);   /* rows with a tail after the lanes */
	test_relu_kernels(16, 8, 300, 3);
	test_relu_kernels(6, 5, 1, 2);    /* flat */
	test_net_relu(0);
	test_net_relu(1);
	test_gradients(4, 3, 5);  /* [C, H, W] activations: per channel */
	test_gradients(6, 5, 1);  /* flat: per feature */
	test_gradients(2, 1, 1);  /* the smallest batch */
	test_running();
	test_threads();
	test_net();
	return CHECK_DONE();
}
