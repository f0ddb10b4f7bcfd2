/* The CUDA backend against the CPU backend: every operation of the backend interface, every
 * layer forward and backward through a network, every optimizer over several steps, and the
 * memory pool's promise (no device allocation after the first step). Each comparison states its
 * tolerance as |ref - gpu| <= atol + rtol * |ref|, element by element:
 *   exact (0, 0)      copies and re-orderings, dropout masks, max pooling, the optimizers'
 *                     element-wise arithmetic where both sides round the same operations
 *   1e-6, 1e-5        element-wise math through expf/tanhf (the GPU's differ by an ulp or two)
 *   1e-5, 1e-4        sums and GEMMs (another summation order; FMA on the GPU)
 *   5e-5, 5e-4        a whole network's gradients (the above, compounded over layers)
 * Skips, saying why, where no CUDA device can be used; the loader's own error messages are
 * checked everywhere. Arguments pick groups, so the GPU kit can time and report each on its own:
 *   test_nn_gpu [ops] [net] [pool]     (none: all three) */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <unistd.h>

#include "lib/nn/conv_more.h"
#include "lib/nn/cpu_conv.h"
#include "lib/nn/gpu.h"
#include "lib/nn/net.h"
#include "lib/nn/optim.h"
#include "lib/util/rng.h"

static const struct dlk_backend *cpu, *gpu;

#define EXACT 0.0, 0.0
#define ELEM 1e-6, 1e-5
#define SUMS 1e-5, 1e-4
#define NET 5e-5, 5e-4

static float *up(const void *h, size_t bytes)
{
	float *d = gpu->alloc(bytes);
	gpu->to_device(d, h, bytes);
	return d;
}

static float *down(const void *d, size_t bytes)
{
	float *h = malloc(bytes ? bytes : 1);
	gpu->to_host(h, d, bytes);
	return h;
}

/* Compares n floats of the CPU's ref with the GPU's dev; prints the worst element. */
static int agree(const char *what, const float *ref, const float *dev, size_t n, double atol, double rtol)
{
	float *g = down(dev, sizeof(float) * n);
	size_t bad = 0, worst = 0;
	double wr = -1;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)ref[i] - (double)g[i]), lim = atol + rtol * fabs((double)ref[i]);
		int same_nan = isnan(ref[i]) && isnan(g[i]);
		if (!same_nan && !(d <= lim))
			bad++;
		if (!same_nan && lim > 0 ? d / lim > wr : d > wr) {
			wr = lim > 0 ? d / lim : d;
			worst = i;
		}
	}
	CHECK_MSG(bad == 0, "%s: %zu floats within %g + %g|ref| (worst [%zu]: %.9g vs %.9g)", what, n, atol, rtol, worst,
	          n ? (double)ref[worst] : 0.0, n ? (double)g[worst] : 0.0);
	free(g);
	return bad == 0;
}

static void rand_fill(float *x, size_t n, uint64_t seed)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = 2 * dlk_rng_uniform(&r) - 1;
}

static float *rnd(size_t n, uint64_t seed)
{
	float *x = malloc(sizeof(float) * (n ? n : 1));
	rand_fill(x, n, seed);
	return x;
}

static int device_clean(void)
{
	char msg[512];
	int ok = gpu->check(msg, sizeof(msg)) == 0;
	if (!ok)
		printf("# device error: %s\n", msg);
	return ok;
}

/* ---- every operation ---- */

static void test_gemm(void)
{
	int shapes[][3] = { { 1, 1, 1 }, { 7, 5, 3 }, { 64, 33, 129 }, { 128, 256, 784 } };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++) {
				int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
				int lda = ta ? m : k, ldb = tb ? k : n;
				float *a = rnd((size_t)m * k, 1), *b = rnd((size_t)k * n, 2), *c = rnd((size_t)m * n, 3);
				float *da = up(a, sizeof(float) * m * k), *db = up(b, sizeof(float) * k * n);
				float *dc = up(c, sizeof(float) * m * n);
				cpu->sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 0.25f, c, n);
				gpu->sgemm(ta, tb, m, n, k, 0.5f, da, lda, db, ldb, 0.25f, dc, n);
				char what[96];
				snprintf(what, sizeof(what), "sgemm %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
				agree(what, c, dc, (size_t)m * n, SUMS);
				gpu->free(da), gpu->free(db), gpu->free(dc);
				free(a), free(b), free(c);
			}
}

/* training.precision: bf16: both backends round the operands to nearest-even bfloat16 and sum in
 * fp32, so they agree to fp32's rounding of the sums (the order of the sums differs); the dense
 * forward too (the GPU's plain path) */
static void test_gemm_bf16(void)
{
	int shapes[][3] = { { 1, 1, 1 }, { 7, 5, 3 }, { 64, 33, 129 }, { 128, 256, 784 } };
	CHECK_MSG(gpu->set_precision != NULL, "the CUDA backend multiplies in bf16 too");
	if (!gpu->set_precision)
		return;
	cpu->set_precision(1);
	gpu->set_precision(1);
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int t = 0; t < 4; t++) {
			int ta = t & 1, tb = t >> 1, m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
			int lda = ta ? m : k, ldb = tb ? k : n;
			float *a = rnd((size_t)m * k, 11), *b = rnd((size_t)k * n, 12), *c = rnd((size_t)m * n, 13);
			float *da = up(a, sizeof(float) * m * k), *db = up(b, sizeof(float) * k * n);
			float *dc = up(c, sizeof(float) * m * n);
			cpu->sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 0.25f, c, n);
			gpu->sgemm(ta, tb, m, n, k, 0.5f, da, lda, db, ldb, 0.25f, dc, n);
			char what[96];
			snprintf(what, sizeof(what), "bf16 sgemm %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
			agree(what, c, dc, (size_t)m * n, SUMS);
			gpu->free(da), gpu->free(db), gpu->free(dc);
			free(a), free(b), free(c);
		}
	int B = 37, in = 96, out = 48;
	float *x = rnd((size_t)B * in, 14), *w = rnd((size_t)in * out + 4, 15), *y = malloc(sizeof(float) * B * out);
	cpu->dense_forward(x, w, w + (size_t)in * out, B, in, out, DLK_ACT_RELU, y);
	float *dx = up(x, sizeof(float) * B * in), *dw = up(w, sizeof(float) * ((size_t)in * out + 4));
	float *dy = gpu->alloc(sizeof(float) * B * out);
	gpu->dense_forward(dx, dw, dw + (size_t)in * out, B, in, out, DLK_ACT_RELU, dy);
	agree("bf16 dense_forward with ReLU", y, dy, (size_t)B * out, SUMS);
	gpu->free(dx), gpu->free(dw), gpu->free(dy);
	free(x), free(w), free(y);
	cpu->set_precision(0);
	gpu->set_precision(0);
	CHECK_MSG(device_clean(), "bf16 products: no device error");
}

/* the fused dense forward, with the bias aligned to 16 bytes (cuBLASLt's epilogue) and not */
static void test_dense_forward(void)
{
	int B = 37, in = 96, out = 48;
	for (int act = 0; act < 4; act++)
		for (int off = 0; off < 2; off++) {
			float *x = rnd((size_t)B * in, 4), *w = rnd((size_t)in * out + 4, 5), *y = malloc(sizeof(float) * B * out);
			const float *bias = w + (size_t)in * out + off;
			cpu->sgemm(0, 1, B, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
			cpu->bias_act(y, bias, B, out, act);
			float *dx = up(x, sizeof(float) * B * in), *dw = up(w, sizeof(float) * ((size_t)in * out + 4));
			float *dy = gpu->alloc(sizeof(float) * B * out);
			gpu->dense_forward(dx, dw, dw + (size_t)in * out + off, B, in, out, act, dy);
			char what[64];
			snprintf(what, sizeof(what), "dense_forward act %d, bias %s", act, off ? "unaligned" : "aligned");
			agree(what, y, dy, (size_t)B * out, SUMS);
			gpu->free(dx), gpu->free(dw), gpu->free(dy);
			free(x), free(w), free(y);
		}
}

static void test_elementwise(void)
{
	size_t n = 100003;
	float *x = rnd(n, 6), *y = rnd(n, 7), *dy = rnd(n, 8);
	float *dxd = up(x, sizeof(float) * n), *dyd = up(y, sizeof(float) * n);

	cpu->fill(y, n, 0.75f);
	gpu->fill(dyd, n, 0.75f);
	agree("fill", y, dyd, n, EXACT);
	cpu->scale(x, n, -1.5f);
	gpu->scale(dxd, n, -1.5f);
	agree("scale", x, dxd, n, EXACT);
	cpu->axpy(n, 0.3f, x, y);
	gpu->axpy(n, 0.3f, dxd, dyd);
	agree("axpy", y, dyd, n, ELEM); /* a*x+y: one FMA on the GPU */
	double s1 = cpu->sum_squares(x, n), s2 = gpu->sum_squares(dxd, n);
	CHECK_MSG(fabs(s1 - s2) <= 1e-6 * s1, "sum_squares %.9g vs %.9g", s1, s2);
	CHECK_MSG(gpu->sum_squares(dxd, n) == s2, "sum_squares gives the same bits twice");
	for (int act = 1; act < 4; act++) {
		float *yc = malloc(sizeof(float) * n), *gc = malloc(sizeof(float) * n);
		float *yd = gpu->alloc(sizeof(float) * n), *gd = up(dy, sizeof(float) * n);
		char what[64];
		cpu->act_forward(act, x, yc, n);
		gpu->act_forward(act, dxd, yd, n);
		snprintf(what, sizeof(what), "act_forward %d", act);
		agree(what, yc, yd, n, ELEM);
		/* backward from the CPU's output on both sides, so only the formula is compared */
		float *ycd = up(yc, sizeof(float) * n);
		cpu->act_backward(act, yc, dy, gc, n);
		gpu->act_backward(act, ycd, gd, gd, n);
		snprintf(what, sizeof(what), "act_backward %d (in place)", act);
		agree(what, gc, gd, n, ELEM);
		gpu->free(yd), gpu->free(gd), gpu->free(ycd);
		free(yc), free(gc);
	}
	for (int act = 0; act < 4; act++) {
		int rows = 257, cols = 389;
		float *a = rnd((size_t)rows * cols, 9 + act), *b = rnd((size_t)cols, 20);
		float *da = up(a, sizeof(float) * rows * cols), *db = up(b, sizeof(float) * cols);
		char what[64];
		cpu->bias_act(a, b, rows, cols, act);
		gpu->bias_act(da, db, rows, cols, act);
		snprintf(what, sizeof(what), "bias_act %d", act);
		agree(what, a, da, (size_t)rows * cols, ELEM);
		gpu->free(da), gpu->free(db);
		free(a), free(b);
	}
	/* dropout: the same counter-based mask on both sides, forward and backward */
	{
		float *yc = malloc(sizeof(float) * n), *yd = gpu->alloc(sizeof(float) * n);
		cpu->dropout_forward(x, yc, n, 0.3f, 77, 1000);
		gpu->dropout_forward(dxd, yd, n, 0.3f, 77, 1000);
		agree("dropout_forward", yc, yd, n, EXACT);
		cpu->dropout_backward(yc, yc, n, 0.3f, 77, 1000);
		gpu->dropout_backward(yd, yd, n, 0.3f, 77, 1000);
		agree("dropout_backward (in place)", yc, yd, n, EXACT);
		gpu->free(yd);
		free(yc);
	}
	gpu->free(dxd), gpu->free(dyd);
	free(x), free(y), free(dy);
}

static void test_sums(void)
{
	int shapes[][2] = { { 1, 1 }, { 128, 10 }, { 10, 128 }, { 64, 50176 }, { 300, 7 } };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		float *a = rnd((size_t)rows * cols, 30 + s), *r = malloc(sizeof(float) * cols), *c = malloc(sizeof(float) * rows);
		float *da = up(a, sizeof(float) * rows * cols), *dr = gpu->alloc(sizeof(float) * cols);
		float *dc = gpu->alloc(sizeof(float) * rows);
		char what[64];
		cpu->sum_rows(a, rows, cols, r);
		gpu->sum_rows(da, rows, cols, dr);
		snprintf(what, sizeof(what), "sum_rows %dx%d (the CPU's order)", rows, cols);
		agree(what, r, dr, (size_t)cols, EXACT);
		cpu->sum_cols(a, rows, cols, c);
		gpu->sum_cols(da, rows, cols, dc);
		snprintf(what, sizeof(what), "sum_cols %dx%d", rows, cols);
		agree(what, c, dc, (size_t)rows, SUMS);
		gpu->free(da), gpu->free(dr), gpu->free(dc);
		free(a), free(r), free(c);
	}
}

static void test_conv_ops(void)
{
	/* c, h, w, k, stride, pad */
	int cases[][6] = { { 1, 28, 28, 3, 1, 1 }, { 3, 12, 9, 3, 2, 1 }, { 2, 7, 7, 5, 1, 2 }, { 4, 8, 8, 2, 2, 0 } };
	int B = 5;
	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
		int c = cases[t][0], h = cases[t][1], w = cases[t][2], k = cases[t][3], s = cases[t][4], p = cases[t][5];
		int oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
		size_t nx = (size_t)B * c * h * w, ncol = (size_t)c * k * k * B * oh * ow;
		float *x = rnd(nx, 40 + t), *col = malloc(sizeof(float) * ncol), *dx = malloc(sizeof(float) * nx);
		float *xd = up(x, sizeof(float) * nx), *cold = gpu->alloc(sizeof(float) * ncol), *dxd = gpu->alloc(sizeof(float) * nx);
		char what[96];
		cpu->im2col(x, B, c, h, w, k, s, p, oh, ow, col);
		gpu->im2col(xd, B, c, h, w, k, s, p, oh, ow, cold);
		snprintf(what, sizeof(what), "im2col c%d %dx%d k%d s%d p%d", c, h, w, k, s, p);
		agree(what, col, cold, ncol, EXACT);
		rand_fill(col, ncol, 50 + t);
		gpu->to_device(cold, col, sizeof(float) * ncol);
		cpu->col2im(col, B, c, h, w, k, s, p, oh, ow, dx);
		gpu->col2im(cold, B, c, h, w, k, s, p, oh, ow, dxd);
		snprintf(what, sizeof(what), "col2im c%d %dx%d k%d s%d p%d (the CPU's order)", c, h, w, k, s, p);
		agree(what, dx, dxd, nx, EXACT);
		gpu->free(xd), gpu->free(cold), gpu->free(dxd);
		free(x), free(col), free(dx);
	}
	/* the layout changes around the convolution's GEMM */
	int f = 6, hw = 49;
	size_t n = (size_t)B * f * hw;
	float *t = rnd(n, 60), *bias = rnd((size_t)f, 61), *y = malloc(sizeof(float) * n), *dt = malloc(sizeof(float) * n);
	float *td = up(t, sizeof(float) * n), *bd = up(bias, sizeof(float) * f), *yd = gpu->alloc(sizeof(float) * n);
	float *dtd = gpu->alloc(sizeof(float) * n);
	for (int act = 0; act < 4; act++) {
		char what[64];
		cpu->conv_out(t, bias, B, f, hw, act, y);
		gpu->conv_out(td, bd, B, f, hw, act, yd);
		snprintf(what, sizeof(what), "conv_out act %d", act);
		agree(what, y, yd, n, ELEM);
	}
	cpu->conv_grad_in(t, B, f, hw, dt);
	gpu->conv_grad_in(td, B, f, hw, dtd);
	agree("conv_grad_in", dt, dtd, n, EXACT);
	/* a concat's slices: rows of 3 x 49 floats out of rows of f x 49, into rows of 5 x 49 (the
	 * rest of each stays as it was) */
	cpu->fill(y, n, 0.0f);
	gpu->fill(yd, n, 0.0f);
	cpu->copy_rows(y, 5 * 49 * sizeof(float), t + 49, (size_t)f * 49 * sizeof(float), (size_t)B, 3 * 49 * sizeof(float));
	gpu->copy_rows(yd, 5 * 49 * sizeof(float), td + 49, (size_t)f * 49 * sizeof(float), (size_t)B,
	               3 * 49 * sizeof(float));
	agree("copy_rows", y, yd, n, EXACT);
	gpu->free(td), gpu->free(bd), gpu->free(yd), gpu->free(dtd);
	free(t), free(bias), free(y), free(dt);
}

static void test_maxpool(void)
{
	/* size, stride: non-overlapping windows, then overlapping ones */
	int cases[][2] = { { 2, 2 }, { 3, 3 }, { 3, 1 }, { 2, 1 } };
	int B = 3, c = 4, h = 11, w = 10;
	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
		int size = cases[t][0], s = cases[t][1], oh = (h - size) / s + 1, ow = (w - size) / s + 1;
		size_t nx = (size_t)B * c * h * w, ny = (size_t)B * c * oh * ow;
		float *x = rnd(nx, 70 + t), *y = malloc(sizeof(float) * ny), *dy = rnd(ny, 80 + t), *dx = malloc(sizeof(float) * nx);
		int32_t *am = malloc(sizeof(int32_t) * ny), *amg;
		x[5] = NAN; /* a NaN wins its windows on both sides */
		float *xd = up(x, sizeof(float) * nx), *yd = gpu->alloc(sizeof(float) * ny), *dyd = up(dy, sizeof(float) * ny);
		float *dxd = gpu->alloc(sizeof(float) * nx);
		int32_t *amd = gpu->alloc(sizeof(int32_t) * ny);
		char what[64];
		cpu->maxpool_forward(x, B, c, h, w, size, s, oh, ow, y, am);
		gpu->maxpool_forward(xd, B, c, h, w, size, s, oh, ow, yd, amd);
		snprintf(what, sizeof(what), "maxpool_forward %d/%d", size, s);
		agree(what, y, yd, ny, EXACT);
		amg = (int32_t *)down(amd, sizeof(int32_t) * ny);
		CHECK_MSG(!memcmp(am, amg, sizeof(int32_t) * ny), "maxpool_forward %d/%d: the same argmax", size, s);
		cpu->maxpool_backward(dy, am, ny, nx, dx);
		gpu->maxpool_backward(dyd, amd, ny, nx, dxd);
		snprintf(what, sizeof(what), "maxpool_backward %d/%d", size, s);
		if (s >= size)
			agree(what, dx, dxd, nx, EXACT);
		else
			agree(what, dx, dxd, nx, SUMS); /* overlapping windows add with atomics */
		gpu->free(xd), gpu->free(yd), gpu->free(dyd), gpu->free(dxd), gpu->free(amd);
		free(x), free(y), free(dy), free(dx), free(am), free(amg);
	}
}

static void test_softmax_ce(void)
{
	int shapes[][2] = { { 1, 2 }, { 128, 10 }, { 33, 1000 }, { 7, 300 } };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int B = shapes[s][0], k = shapes[s][1];
		float *z = rnd((size_t)B * k, 90 + s), *g = malloc(sizeof(float) * B * k);
		int32_t *y = malloc(sizeof(int32_t) * B);
		for (int b = 0; b < B; b++)
			y[b] = (b * 7 + 3) % k;
		for (size_t i = 0; i < (size_t)B * k; i++)
			z[i] *= 8; /* logits far apart: the max shift matters */
		float *zd = up(z, sizeof(float) * B * k), *gd = gpu->alloc(sizeof(float) * B * k);
		int32_t *yd = (int32_t *)up(y, sizeof(int32_t) * B);
		float lc = cpu->softmax_ce(z, y, B, k, g), lg = gpu->softmax_ce(zd, yd, B, k, gd);
		float ln = gpu->softmax_ce(zd, yd, B, k, NULL);
		char what[64];
		CHECK_MSG(fabs(lc - lg) <= 1e-5 + 1e-5 * fabs(lc), "softmax_ce %dx%d loss %.9g vs %.9g", B, k, lc, lg);
		CHECK_MSG(ln == lg, "softmax_ce without a gradient: the same loss");
		snprintf(what, sizeof(what), "softmax_ce %dx%d gradient", B, k);
		agree(what, g, gd, (size_t)B * k, ELEM);
		gpu->free(zd), gpu->free(gd), gpu->free(yd);
		free(z), free(g), free(y);
	}
}

/* every loss of lib/nn/loss.h (gpu/loss.cu) against the CPU reference */
static void test_losses(void)
{
	int shapes[][2] = { { 1, 2 }, { 128, 10 }, { 33, 1000 }, { 4, 28 * 28 * 3 } };
	for (int kind = 0; kind <= 4; kind++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			int B = shapes[s][0], k = shapes[s][1];
			size_t n = (size_t)B * k;
			float *z = rnd(n, 200 + s), *t = rnd(n, 300 + s), *g = malloc(sizeof(float) * n);
			float param = kind == 0 ? 0.1f : 0.5f;
			int32_t *y = malloc(sizeof(int32_t) * B);
			for (int b = 0; b < B; b++)
				y[b] = (b * 5 + 1) % k;
			for (size_t i = 0; kind == 1 && i < n; i++)
				t[i] = fabsf(t[i]) > 0.5f ? 1.0f : fabsf(t[i]);
			float *zd = up(z, sizeof(float) * n), *td = up(t, sizeof(float) * n), *gd = gpu->alloc(sizeof(float) * n);
			int32_t *yd = (int32_t *)up(y, sizeof(int32_t) * B);
			float lc = cpu->loss(kind, z, y, t, B, k, param, g), lg = gpu->loss(kind, zd, yd, td, B, k, param, gd);
			char what[64];
			CHECK_MSG(fabs(lc - lg) <= 1e-5 + 1e-5 * fabs(lc), "loss %d %dx%d: %.9g vs %.9g", kind, B, k, lc, lg);
			CHECK_MSG(gpu->loss(kind, zd, yd, td, B, k, param, NULL) == lg, "loss %d without a gradient: the same", kind);
			snprintf(what, sizeof(what), "loss %d %dx%d gradient", kind, B, k);
			agree(what, g, gd, n, ELEM);
			gpu->free(zd), gpu->free(td), gpu->free(gd), gpu->free(yd);
			free(z), free(t), free(g), free(y);
		}
}

/* token_cross_entropy (task lm) against the CPU reference: rows of V logits, a target id per
 * row in floats, every 7th ignored (-1); loss within 1e-5 relative, gradients ELEM (the same
 * formulas; only the block's sum order differs) */
static void test_token_loss(void)
{
	int shapes[][2] = { { 1, 2 }, { 64 * 16, 257 }, { 8 * 128, 1000 }, { 3, 50257 } };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int R = shapes[s][0], V = shapes[s][1];
		size_t n = (size_t)R * V;
		float *z = rnd(n, 400 + s), *t = malloc(sizeof(float) * R), *g = malloc(sizeof(float) * n);
		for (int r = 0; r < R; r++)
			t[r] = r % 7 == 6 ? -1.0f : (float)((r * 131 + 7) % V);
		for (size_t i = 0; i < n; i++)
			z[i] *= 4.0f;
		float *zd = up(z, sizeof(float) * n), *td = up(t, sizeof(float) * R), *gd = gpu->alloc(sizeof(float) * n);
		float lc = cpu->loss(DLK_LOSS_TOKEN_CE, z, NULL, t, R, V, 0, g),
		      lg = gpu->loss(DLK_LOSS_TOKEN_CE, zd, NULL, td, R, V, 0, gd);
		char what[64];
		CHECK_MSG(fabs(lc - lg) <= 1e-5 + 1e-5 * fabs(lc), "token loss %dx%d: %.9g vs %.9g", R, V, lc, lg);
		CHECK_MSG(gpu->loss(DLK_LOSS_TOKEN_CE, zd, NULL, td, R, V, 0, NULL) == lg, "token loss without a gradient: the same");
		snprintf(what, sizeof(what), "token loss %dx%d gradient", R, V);
		agree(what, g, gd, n, ELEM);
		gpu->free(zd), gpu->free(td), gpu->free(gd);
		free(z), free(t), free(g);
	}
}

/* ABI 7's layer operations: layer norm, GELU, softmax, embedding, upsampling, forward and backward,
 * and ABI 10's meanpool.
 * Row reductions (layer norm, softmax) are SUMS; element-wise math ELEM; the embedding's gathers
 * and scatters are EXACT (one thread per column adds the ids in the CPU's order). */
static void test_layer_ops(void)
{
	char what[96];
	int shapes[][2] = { { 1, 1 }, { 37, 768 }, { 300, 33 }, { 4, 3000 } };
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		int rows = shapes[si][0], n = shapes[si][1];
		size_t tot = (size_t)rows * n, fb = sizeof(float) * tot;
		float *x = rnd(tot, 200 + si), *w = rnd(n, 210), *b = rnd(n, 211), *dy = rnd(tot, 212 + si);
		for (size_t i = 0; i < tot; i++)
			x[i] = 4 * x[i] + 1;
		float *y = malloc(fb), *mean = malloc(sizeof(float) * rows), *rstd = malloc(sizeof(float) * rows);
		float *dx = malloc(fb), *dw = malloc(sizeof(float) * n), *db = malloc(sizeof(float) * n);
		float *xd = up(x, fb), *wd = up(w, sizeof(float) * n), *bd = up(b, sizeof(float) * n), *dyd = up(dy, fb);
		float *yd = gpu->alloc(fb), *md = gpu->alloc(sizeof(float) * rows), *rd = gpu->alloc(sizeof(float) * rows);
		float *dxd = gpu->alloc(fb), *dwd = gpu->alloc(sizeof(float) * n), *dbd = gpu->alloc(sizeof(float) * n);

		cpu->layernorm_forward(x, w, b, rows, n, 1e-5f, y, mean, rstd);
		gpu->layernorm_forward(xd, wd, bd, rows, n, 1e-5f, yd, md, rd);
		snprintf(what, sizeof(what), "layernorm %dx%d forward", rows, n);
		agree(what, y, yd, tot, SUMS);
		cpu->layernorm_backward(x, w, mean, rstd, dy, rows, n, dx, dw, db);
		gpu->layernorm_backward(xd, wd, md, rd, dyd, rows, n, dxd, dwd, dbd);
		snprintf(what, sizeof(what), "layernorm %dx%d dx", rows, n);
		agree(what, dx, dxd, tot, SUMS);
		snprintf(what, sizeof(what), "layernorm %dx%d dw", rows, n);
		agree(what, dw, dwd, n, SUMS);
		snprintf(what, sizeof(what), "layernorm %dx%d db", rows, n);
		agree(what, db, dbd, n, SUMS);

		for (int approx = 0; approx <= 1; approx++) {
			cpu->gelu_forward(approx, x, y, tot);
			gpu->gelu_forward(approx, xd, yd, tot);
			snprintf(what, sizeof(what), "gelu (%s) %zu forward", approx ? "tanh" : "erf", tot);
			agree(what, y, yd, tot, ELEM);
			cpu->gelu_backward(approx, x, dy, dx, tot);
			gpu->gelu_backward(approx, xd, dyd, dxd, tot);
			snprintf(what, sizeof(what), "gelu (%s) %zu backward", approx ? "tanh" : "erf", tot);
			agree(what, dx, dxd, tot, ELEM);
		}

		cpu->softmax_forward(x, y, rows, n);
		gpu->softmax_forward(xd, yd, rows, n);
		snprintf(what, sizeof(what), "softmax %dx%d forward", rows, n);
		agree(what, y, yd, tot, SUMS);
		gpu->to_device(yd, y, fb); /* the backward from the same y on both */
		cpu->softmax_backward(y, dy, dx, rows, n);
		gpu->softmax_backward(yd, dyd, dxd, rows, n);
		snprintf(what, sizeof(what), "softmax %dx%d backward", rows, n);
		agree(what, dx, dxd, tot, SUMS);

		gpu->free(xd), gpu->free(wd), gpu->free(bd), gpu->free(dyd), gpu->free(yd), gpu->free(md), gpu->free(rd);
		gpu->free(dxd), gpu->free(dwd), gpu->free(dbd);
		free(x), free(w), free(b), free(dy), free(y), free(mean), free(rstd), free(dx), free(dw), free(db);
	}

	/* embedding: 1000 ids (repeats and two out of range) into a 50 x 96 table */
	{
		int count = 1000, vocab = 50, dim = 96;
		float *ids = malloc(sizeof(float) * count);
		for (int i = 0; i < count; i++)
			ids[i] = (float)((i * 37) % (vocab + 2) - 1); /* -1 .. vocab */
		ids[5] = 2.5f, ids[6] = NAN; /* not integers: rows of zeros, nothing added */
		float *t = rnd((size_t)vocab * dim, 220), *dy = rnd((size_t)count * dim, 221);
		float *y = malloc(sizeof(float) * count * dim), *dt = calloc((size_t)vocab * dim, sizeof(float));
		float *td = up(t, sizeof(float) * vocab * dim), *dyd = up(dy, sizeof(float) * count * dim);
		float *yd = gpu->alloc(sizeof(float) * count * dim), *dtd = gpu->alloc(sizeof(float) * vocab * dim);
		float *idd = up(ids, sizeof(float) * count);
		cpu->embedding_forward(ids, t, count, vocab, dim, y);
		gpu->embedding_forward(idd, td, count, vocab, dim, yd);
		agree("embedding forward", y, yd, (size_t)count * dim, EXACT);
		cpu->embedding_backward(ids, dy, count, vocab, dim, dt);
		gpu->embedding_backward(idd, dyd, count, vocab, dim, dtd);
		agree("embedding backward (repeated ids, ids out of range or not integers)", dt, dtd, (size_t)vocab * dim, EXACT);
		gpu->free(td), gpu->free(dyd), gpu->free(yd), gpu->free(dtd), gpu->free(idd);
		free(ids), free(t), free(dy), free(y), free(dt);
	}

	/* upsampling: nearest and bilinear, x2 and x3, odd sizes */
	for (int mode = 0; mode <= 1; mode++)
		for (int s = 2; s <= 3; s++) {
			int planes = 24, h = 13, w = 7;
			size_t ni = (size_t)planes * h * w, no = ni * s * s;
			float *x = rnd(ni, 230), *dy = rnd(no, 231), *y = malloc(sizeof(float) * no), *dx = malloc(sizeof(float) * ni);
			float *xd = up(x, sizeof(float) * ni), *dyd = up(dy, sizeof(float) * no);
			float *yd = gpu->alloc(sizeof(float) * no), *dxd = gpu->alloc(sizeof(float) * ni);
			cpu->upsample_forward(x, planes, h, w, s, mode, y);
			gpu->upsample_forward(xd, planes, h, w, s, mode, yd);
			snprintf(what, sizeof(what), "upsample %s x%d forward", mode ? "bilinear" : "nearest", s);
			agree(what, y, yd, no, ELEM);
			cpu->upsample_backward(dy, planes, h, w, s, mode, dx);
			gpu->upsample_backward(dyd, planes, h, w, s, mode, dxd);
			snprintf(what, sizeof(what), "upsample %s x%d backward", mode ? "bilinear" : "nearest", s);
			agree(what, dx, dxd, ni, SUMS);
			gpu->free(xd), gpu->free(dyd), gpu->free(yd), gpu->free(dxd);
			free(x), free(dy), free(y), free(dx);
		}

	/* meanpool (ABI 10): 7 samples of 33 positions of width 96, masked by ids (pad 0: some samples
	 * with none, one all padding) and not; both sum in the order of t and divide: EXACT */
	for (int masked = 0; masked <= 1; masked++) {
		int batch = 7, T = 33, D = 96;
		size_t nx = (size_t)batch * T * D, ny = (size_t)batch * D;
		float *ids = malloc(sizeof(float) * batch * T), *x = rnd(nx, 240), *dy = rnd(ny, 241);
		float *y = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx);
		for (int b = 0; b < batch; b++)
			for (int t = 0; t < T; t++)
				ids[b * T + t] = b == 3 || t >= 5 * b + 2 ? 0.0f : (float)(1 + (t * 7 + b) % 40);
		float *idd = up(ids, sizeof(float) * batch * T), *xd = up(x, sizeof(float) * nx), *dyd = up(dy, sizeof(float) * ny);
		float *yd = gpu->alloc(sizeof(float) * ny), *dxd = gpu->alloc(sizeof(float) * nx);
		cpu->seqpool_forward(x, masked ? ids : NULL, 0.0f, batch, T, D, y);
		gpu->seqpool_forward(xd, masked ? idd : NULL, 0.0f, batch, T, D, yd);
		snprintf(what, sizeof(what), "meanpool%s forward", masked ? " (pad 0)" : "");
		agree(what, y, yd, ny, EXACT);
		cpu->seqpool_backward(dy, masked ? ids : NULL, 0.0f, batch, T, D, dx);
		gpu->seqpool_backward(dyd, masked ? idd : NULL, 0.0f, batch, T, D, dxd);
		snprintf(what, sizeof(what), "meanpool%s backward", masked ? " (pad 0)" : "");
		agree(what, dx, dxd, nx, EXACT);
		gpu->free(idd), gpu->free(xd), gpu->free(dyd), gpu->free(yd), gpu->free(dxd);
		free(ids), free(x), free(dy), free(y), free(dx);
	}
}

/* grouped / depthwise conv2d and convtranspose2d (lib/nn/conv_more.c): the same composition of
 * backend primitives on both backends; GEMMs and sums, so SUMS */
static void test_conv_more(void)
{
	struct dlk_conv_more cs[] = {
		{ .batch = 8, .c = 16, .h = 14, .w = 14, .f = 32, .k = 3, .stride = 1, .pad = 1, .groups = 4 },
		{ .batch = 8, .c = 32, .h = 14, .w = 14, .f = 32, .k = 3, .stride = 2, .pad = 1, .groups = 32 },
		{ .batch = 8, .c = 32, .h = 7, .w = 7, .f = 16, .k = 3, .stride = 2, .pad = 1, .out_pad = 1 },
		{ .batch = 4, .c = 8, .h = 5, .w = 6, .f = 4, .k = 2, .stride = 2 },
	};
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		struct dlk_conv_more *s = &cs[i];
		int t = s->groups == 0;
		CHECK(t ? dlk_convt_shape(s) == 0 : dlk_conv_grouped_shape(s) == 0);
		size_t nx = (size_t)s->batch * s->c * s->h * s->w, ny = (size_t)s->batch * s->f * s->oh * s->ow;
		size_t nw = t ? (size_t)s->c * s->f * s->k * s->k : (size_t)s->f * (s->c / s->groups) * s->k * s->k;
		size_t ns = t ? dlk_convt_scratch(s) : dlk_conv_grouped_scratch(s);
		float *x = rnd(nx, 240 + i), *w = rnd(nw, 250 + i), *bias = rnd(s->f, 260 + i), *dy = rnd(ny, 270 + i);
		float *y = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx), *dw = malloc(sizeof(float) * nw);
		float *db = malloc(sizeof(float) * s->f), *sc = malloc(sizeof(float) * ns);
		float *xd = up(x, sizeof(float) * nx), *wd = up(w, sizeof(float) * nw), *bd = up(bias, sizeof(float) * s->f);
		float *dyd = up(dy, sizeof(float) * ny), *yd = gpu->alloc(sizeof(float) * ny);
		float *dxd = gpu->alloc(sizeof(float) * nx), *dwd = gpu->alloc(sizeof(float) * nw);
		float *dbd = gpu->alloc(sizeof(float) * s->f), *scd = gpu->alloc(sizeof(float) * ns);
		char what[96];
		const char *name = t ? "convtranspose2d" : "conv2d groups";
		if (t) {
			dlk_convt_forward(cpu, x, w, bias, s, DLK_ACT_RELU, sc, y);
			dlk_convt_forward(gpu, xd, wd, bd, s, DLK_ACT_RELU, scd, yd);
			dlk_convt_backward(cpu, x, w, dy, s, sc, dw, db, dx);
			dlk_convt_backward(gpu, xd, wd, dyd, s, scd, dwd, dbd, dxd);
		} else {
			dlk_conv_grouped_forward(cpu, x, w, bias, s, DLK_ACT_RELU, sc, y);
			dlk_conv_grouped_forward(gpu, xd, wd, bd, s, DLK_ACT_RELU, scd, yd);
			dlk_conv_grouped_backward(cpu, x, w, dy, s, sc, dw, db, dx);
			dlk_conv_grouped_backward(gpu, xd, wd, dyd, s, scd, dwd, dbd, dxd);
		}
		snprintf(what, sizeof(what), "%s %d case %zu forward", name, s->groups, i);
		agree(what, y, yd, ny, SUMS);
		snprintf(what, sizeof(what), "%s %d case %zu dx", name, s->groups, i);
		agree(what, dx, dxd, nx, SUMS);
		snprintf(what, sizeof(what), "%s %d case %zu dw", name, s->groups, i);
		agree(what, dw, dwd, nw, SUMS);
		snprintf(what, sizeof(what), "%s %d case %zu db", name, s->groups, i);
		agree(what, db, dbd, s->f, SUMS);
		gpu->free(xd), gpu->free(wd), gpu->free(bd), gpu->free(dyd), gpu->free(yd), gpu->free(dxd), gpu->free(dwd);
		gpu->free(dbd), gpu->free(scd);
		free(x), free(w), free(bias), free(dy), free(y), free(dx), free(dw), free(db), free(sc);
	}
}

static void test_optimizer_ops(void)
{
	size_t n = 50021;
	float *p = rnd(n, 100), *g = rnd(n, 101), *m = rnd(n, 102), *v = rnd(n, 103);
	for (size_t i = 0; i < n; i++)
		v[i] = fabsf(v[i]);
	float *pd = up(p, sizeof(float) * n), *gd = up(g, sizeof(float) * n), *md = up(m, sizeof(float) * n);
	float *vd = up(v, sizeof(float) * n);
	/* momentum 0, momentum, Nesterov */
	float mom[3] = { 0, 0.9f, 0.9f };
	for (int c = 0; c < 3; c++) {
		char what[64];
		cpu->sgd_update(p, g, m, n, 0.1f, mom[c], c == 2, 1e-4f);
		gpu->sgd_update(pd, gd, md, n, 0.1f, mom[c], c == 2, 1e-4f);
		snprintf(what, sizeof(what), "sgd_update case %d: parameters", c);
		agree(what, p, pd, n, ELEM);
		snprintf(what, sizeof(what), "sgd_update case %d: momentum buffer", c);
		agree(what, m, md, n, ELEM);
	}
	for (int dec = 0; dec < 2; dec++) {
		char what[64];
		cpu->adam_update(p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, dec, 0.19f, 0.0447f);
		gpu->adam_update(pd, gd, md, vd, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, dec, 0.19f, 0.0447f);
		snprintf(what, sizeof(what), "%s: parameters", dec ? "AdamW" : "Adam");
		agree(what, p, pd, n, ELEM);
		snprintf(what, sizeof(what), "%s: moments", dec ? "AdamW" : "Adam");
		agree(what, m, md, n, ELEM);
		agree(what, v, vd, n, ELEM);
	}
	gpu->free(pd), gpu->free(gd), gpu->free(md), gpu->free(vd);
	free(p), free(g), free(m), free(v);
}

/* ---- every layer through a network, and the optimizers over several steps ---- */

static struct dlk_layer_spec D(int units) { return (struct dlk_layer_spec){ .kind = DLK_LAYER_DENSE, .units = units }; }
static struct dlk_layer_spec K(enum dlk_layer_kind k) { return (struct dlk_layer_spec){ .kind = k }; }
static struct dlk_layer_spec C(int f, int k, int s, int p)
{
	return (struct dlk_layer_spec){ .kind = DLK_LAYER_CONV2D, .filters = f, .kernel = k, .stride = s, .padding = p };
}
static struct dlk_layer_spec P(int size, int s)
{
	return (struct dlk_layer_spec){ .kind = DLK_LAYER_MAXPOOL, .size = size, .stride = s };
}
static struct dlk_layer_spec DROP(float r) { return (struct dlk_layer_spec){ .kind = DLK_LAYER_DROPOUT, .rate = r }; }

/* Builds the same network on both backends from the same seed, runs `steps` training steps of
 * forward, backward and the optimizer on each, and compares logits, loss, gradients and the
 * parameters after every step. */
static void compare_net(const char *what, int c, int h, int w, struct dlk_layer_spec *layers, int n_layers,
                        const struct dlk_training *tr, int steps)
{
	struct dlk_model m = { .input = { c, h, w }, .input_rank = 3, .layers = layers, .n_layers = n_layers, .init = "torch" };
	struct dlk_net a, b;
	struct dlk_optimizer oa, ob;
	struct dlk_err err = DLK_ERR_INIT;
	int B = 9, k = 5;
	char msg[160];

	if (dlk_net_build(&a, &m, NULL, k, cpu, &err) || dlk_net_build(&b, &m, NULL, k, gpu, &err)) {
		CHECK_MSG(0, "%s: builds (%s)", what, err.msg);
		return;
	}
	dlk_net_init_params(&a, "torch", 3, &err);
	dlk_net_init_params(&b, "torch", 3, &err);
	dlk_net_reserve(&a, B, &err);
	dlk_net_reserve(&b, B, &err);
	dlk_optimizer_init(&oa, tr, a.n_params, 1, steps, cpu, &err);
	dlk_optimizer_init(&ob, tr, b.n_params, 1, steps, gpu, &err);
	size_t nx = (size_t)B * a.input_size;
	float *x = rnd(nx, 8), *xd = up(x, sizeof(float) * nx);
	int32_t y[9] = { 0, 1, 2, 3, 4, 0, 1, 2, 3 };
	int32_t *yd = (int32_t *)up(y, sizeof(y));
	int ok = 1;
	for (int s = 0; s < steps && ok; s++) {
		const float *za = dlk_net_forward(&a, x, B, 1), *zb = dlk_net_forward(&b, xd, B, 1);
		snprintf(msg, sizeof(msg), "%s, step %d: logits", what, s + 1);
		ok &= agree(msg, za, zb, (size_t)B * k, NET);
		float la = dlk_net_backward(&a, y, B), lb = dlk_net_backward(&b, yd, B);
		CHECK_MSG(fabs(la - lb) <= 5e-5 + 5e-4 * fabs(la), "%s, step %d: loss %.7g vs %.7g", what, s + 1, la, lb);
		snprintf(msg, sizeof(msg), "%s, step %d: gradients", what, s + 1);
		ok &= agree(msg, a.grads, b.grads, a.n_params, NET);
		double na = dlk_optimizer_clip(&oa, a.grads), nb = dlk_optimizer_clip(&ob, b.grads);
		CHECK_MSG(fabs(na - nb) <= 1e-4 * na, "%s, step %d: gradient norm %.7g vs %.7g", what, s + 1, na, nb);
		double lr = dlk_optimizer_lr(&oa, s);
		dlk_optimizer_step(&oa, a.params, a.grads, lr);
		dlk_optimizer_step(&ob, b.params, b.grads, lr);
		snprintf(msg, sizeof(msg), "%s, step %d: parameters after the update", what, s + 1);
		ok &= agree(msg, a.params, b.params, a.n_params, NET);
	}
	CHECK_MSG(device_clean(), "%s: no device error", what);
	dlk_optimizer_release(&oa);
	dlk_optimizer_release(&ob);
	gpu->free(xd);
	gpu->free(yd);
	free(x);
	dlk_net_release(&a);
	dlk_net_release(&b);
}

static void test_layers(void)
{
	struct dlk_training adamw = { .epochs = 1, .batch_size = 9, .optimizer = DLK_OPT_ADAMW, .lr = 1e-2, .beta1 = 0.9,
	                              .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .step_size = 1, .grad_clip = 0.5 };
	struct dlk_layer_spec mlp_relu[] = { K(DLK_LAYER_FLATTEN), D(16), K(DLK_LAYER_RELU), D(5) };
	struct dlk_layer_spec mlp_tanh[] = { K(DLK_LAYER_FLATTEN), D(16), K(DLK_LAYER_TANH), D(5) };
	struct dlk_layer_spec mlp_sig[] = { K(DLK_LAYER_FLATTEN), D(16), K(DLK_LAYER_SIGMOID), D(5) };
	/* activations that are layers of their own (after flatten, not fused into a dense) */
	struct dlk_layer_spec acts[] = { K(DLK_LAYER_FLATTEN), K(DLK_LAYER_TANH), D(12), K(DLK_LAYER_RELU),
		                         K(DLK_LAYER_SIGMOID), D(5) };
	struct dlk_layer_spec drop[] = { K(DLK_LAYER_FLATTEN), D(32), K(DLK_LAYER_RELU), DROP(0.4f), D(5) };
	struct dlk_layer_spec conv[] = { C(4, 3, 1, 1), K(DLK_LAYER_RELU), K(DLK_LAYER_FLATTEN), D(5) };
	struct dlk_layer_spec conv_s2[] = { C(6, 5, 2, 2), K(DLK_LAYER_TANH), K(DLK_LAYER_FLATTEN), D(5) };
	struct dlk_layer_spec pool[] = { C(4, 3, 1, 1), K(DLK_LAYER_RELU), P(2, 2), K(DLK_LAYER_FLATTEN), D(5) };
	struct dlk_layer_spec pool_ov[] = { C(4, 3, 1, 0), K(DLK_LAYER_SIGMOID), P(3, 1), K(DLK_LAYER_FLATTEN), D(5) };
	struct dlk_layer_spec cnn[] = { C(8, 3, 2, 1), K(DLK_LAYER_RELU), P(3, 1), C(6, 3, 1, 1), K(DLK_LAYER_TANH),
		                        K(DLK_LAYER_FLATTEN), DROP(0.3f), D(16), K(DLK_LAYER_SIGMOID), D(5) };
	compare_net("dense + relu", 2, 5, 5, mlp_relu, 4, &adamw, 3);
	compare_net("dense + tanh", 2, 5, 5, mlp_tanh, 4, &adamw, 3);
	compare_net("dense + sigmoid", 2, 5, 5, mlp_sig, 4, &adamw, 3);
	compare_net("activation layers", 2, 5, 5, acts, 6, &adamw, 3);
	compare_net("dropout", 2, 5, 5, drop, 5, &adamw, 3);
	compare_net("conv2d 3x3/1 pad 1", 3, 8, 8, conv, 4, &adamw, 3);
	compare_net("conv2d 5x5/2 pad 2", 3, 9, 7, conv_s2, 4, &adamw, 3);
	compare_net("maxpool 2/2", 3, 8, 8, pool, 5, &adamw, 3);
	compare_net("maxpool 3/1 (overlapping)", 3, 8, 8, pool_ov, 5, &adamw, 3);
	compare_net("a CNN of every kind", 3, 12, 12, cnn, 10, &adamw, 3);
	/* the graph: a residual add (a tensor read twice), a concat of a branch from the input,
	 * globalavgpool; nothing fused, gradients summed in per-layer buffers */
	struct dlk_layer_spec graph[] = { C(4, 3, 1, 1), K(DLK_LAYER_RELU), C(4, 3, 1, 1), K(DLK_LAYER_ADD),
		                          K(DLK_LAYER_TANH), C(2, 1, 1, 0), K(DLK_LAYER_CONCAT), P(2, 2),
		                          C(5, 3, 2, 1), K(DLK_LAYER_GLOBALAVGPOOL), D(5) };
	graph[3].n_inputs = 2, graph[3].inputs[0] = 1, graph[3].inputs[1] = 2;
	graph[5].n_inputs = 1, graph[5].inputs[0] = -1;
	graph[6].n_inputs = 2, graph[6].inputs[0] = 4, graph[6].inputs[1] = 5;
	compare_net("a graph: add, concat, globalavgpool", 3, 8, 8, graph, 11, &adamw, 3);
	/* training.precision: bf16: the CPU's own bf16 convolution (on AVX512_BF16) and the GPU's
	 * im2col + cublasGemmEx round the same operands and sum in fp32, so the two agree as in fp32
	 * (where a CPU computes conv2d in fp32 under bf16 there is nothing to compare with) */
	cpu->set_precision(1);
	if (gpu->set_precision && dlk_cpu_conv_bf16()) {
		gpu->set_precision(1);
		compare_net("bf16: conv2d 3x3/1 pad 1", 3, 8, 8, conv, 4, &adamw, 3);
		compare_net("bf16: conv2d 5x5/2 pad 2", 3, 9, 7, conv_s2, 4, &adamw, 3);
		compare_net("bf16: a CNN of every kind", 3, 12, 12, cnn, 10, &adamw, 3);
		gpu->set_precision(0);
	} else {
		printf("# bf16 convolutions not compared: %s\n",
		       gpu->set_precision ? "this CPU computes conv2d in fp32 under bf16 (no AVX512_BF16)"
		                          : "the backend has no bf16");
	}
	cpu->set_precision(0);
	/* a sequence [1, 6, 8]: a dense over positions, causal attention with rotary and dropout */
	struct dlk_layer_spec att[] = { D(8), { .kind = DLK_LAYER_ATTENTION, .heads = 2, .causal = 1, .rotary = 1,
		                                .pad_id = -1, .rate = 0.1f },
		                        K(DLK_LAYER_FLATTEN), D(5) };
	compare_net("attention over a sequence (dense per position, causal, rotary, dropout)", 1, 6, 8, att, 4, &adamw, 3);
	/* a sequence's mean (meanpool, not masked: the input is not ids) between dense layers */
	struct dlk_layer_spec mp[] = { D(8), K(DLK_LAYER_GELU), { .kind = DLK_LAYER_MEANPOOL, .pad_id = -1 }, D(5) };
	compare_net("meanpool over a sequence (dense per position, gelu)", 1, 6, 8, mp, 4, &adamw, 3);

	/* every optimizer, over several steps of the same MLP */
	struct dlk_training opts[] = {
		{ .epochs = 1, .batch_size = 9, .optimizer = DLK_OPT_SGD, .lr = 0.1, .step_size = 1 },
		{ .epochs = 1, .batch_size = 9, .optimizer = DLK_OPT_SGD, .lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .step_size = 1 },
		{ .epochs = 1, .batch_size = 9, .optimizer = DLK_OPT_SGD, .lr = 0.1, .momentum = 0.9, .nesterov = 1, .step_size = 1 },
		{ .epochs = 1, .batch_size = 9, .optimizer = DLK_OPT_ADAM, .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
		  .weight_decay = 1e-3, .step_size = 1 },
		{ .epochs = 1, .batch_size = 9, .optimizer = DLK_OPT_ADAMW, .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
		  .weight_decay = 0.05, .step_size = 1, .grad_clip = 0.1 },
	};
	const char *names[] = { "SGD", "SGD momentum + weight decay", "SGD Nesterov", "Adam + L2", "AdamW + clipping" };
	for (int i = 0; i < 5; i++)
		compare_net(names[i], 2, 5, 5, mlp_relu, 4, &opts[i], 5);
}

/* The pool: after the first step the device serves no allocation; a freed block comes back. */
static void test_pool(void)
{
	struct dlk_mem_stats s0, s1, s2;
	if (!gpu->mem_stats) {
		CHECK_MSG(0, "the CUDA backend reports its memory pool");
		return;
	}
	struct dlk_layer_spec cnn[] = { C(8, 3, 1, 1), K(DLK_LAYER_RELU), P(2, 2), K(DLK_LAYER_FLATTEN), D(5) };
	struct dlk_model m = { .input = { 1, 8, 8 }, .input_rank = 3, .layers = cnn, .n_layers = 5, .init = "torch" };
	struct dlk_training tr = { .epochs = 1, .batch_size = 9, .optimizer = DLK_OPT_ADAM, .lr = 1e-2, .beta1 = 0.9,
	                           .beta2 = 0.999, .eps = 1e-8, .step_size = 1 };
	struct dlk_net net;
	struct dlk_optimizer o;
	struct dlk_err err = DLK_ERR_INIT;
	int32_t y[9] = { 0 };
	dlk_net_build(&net, &m, NULL, 5, gpu, &err);
	dlk_net_init_params(&net, "torch", 1, &err);
	dlk_net_reserve(&net, 9, &err);
	dlk_optimizer_init(&o, &tr, net.n_params, 1, 10, gpu, &err);
	float *x = rnd(9 * 64, 5), *xd = up(x, sizeof(float) * 9 * 64);
	int32_t *yd = (int32_t *)up(y, sizeof(y));
	for (int s = 0; s < 10; s++) {
		if (s == 1)
			gpu->mem_stats(&s0);
		dlk_net_forward(&net, xd, 9, 1);
		dlk_net_backward(&net, yd, 9);
		dlk_optimizer_clip(&o, net.grads);
		dlk_optimizer_step(&o, net.params, net.grads, 1e-2);
	}
	gpu->mem_stats(&s1);
	CHECK_MSG(s1.device_allocs == s0.device_allocs, "no device allocation after the first step (%llu, then %llu)",
	          s0.device_allocs, s1.device_allocs);
	void *p = gpu->alloc(12100);
	gpu->free(p);
	void *q = gpu->alloc(12000);
	gpu->mem_stats(&s2);
	CHECK_MSG(q == p && s2.reuses > s1.reuses, "a freed block of the same size class is handed out again");
	float *h = down(q, 12000);
	int zero = 1;
	for (size_t i = 0; i < 3000; i++)
		zero &= h[i] == 0;
	CHECK_MSG(zero, "a reused block comes back zero-filled");
	printf("# pool: %zu bytes held, peak %zu in use, %llu device allocations, %llu reuses\n", s2.held, s2.peak_in_use,
	       s2.device_allocs, s2.reuses);
	free(h);
	gpu->free(q);
	gpu->free(xd);
	gpu->free(yd);
	free(x);
	dlk_optimizer_release(&o);
	dlk_net_release(&net);
	CHECK_MSG(device_clean(), "pool: no device error");
}

/* 1 when group `g` was asked for on the command line (no arguments: every group) */
/* ABI 9's batch norm: training forward (the running statistics too), evaluation and backward of
 * [batch, c, hw] cases against the CPU's, within SUMS (the CPU sums in double, the GPU in float
 * with the block reduction); num_batches_tracked exactly */
static void test_batchnorm(void)
{
	char what[96];
	int shapes[][3] = { { 1, 1, 2 }, { 128, 16, 1 }, { 32, 8, 196 }, { 3, 5, 4097 } };
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		int B = shapes[si][0], c = shapes[si][1], hw = shapes[si][2];
		size_t tot = (size_t)B * c * hw, fb = sizeof(float) * tot, cb = sizeof(float) * c;
		float *x = rnd(tot, 600 + si), *w = rnd(c, 610), *b = rnd(c, 611), *dy = rnd(tot, 612 + si);
		for (size_t i = 0; i < tot; i++)
			x[i] = 3 * x[i] + 2;
		float *rm = calloc(c, sizeof(float)), *rv = malloc(cb), nb = 0, *y = malloc(fb), *dx = malloc(fb);
		float *mean = malloc(cb), *rstd = malloc(cb), *dw = malloc(cb), *db = malloc(cb);
		for (int k = 0; k < c; k++)
			rv[k] = 1;
		float *xd = up(x, fb), *wd = up(w, cb), *bd = up(b, cb), *dyd = up(dy, fb), *rmd = up(rm, cb), *rvd = up(rv, cb);
		float *nbd = up(&nb, sizeof(float)), *yd = gpu->alloc(fb), *dxd = gpu->alloc(fb), *md = gpu->alloc(cb);
		float *rd = gpu->alloc(cb), *dwd = gpu->alloc(cb), *dbd = gpu->alloc(cb);
		for (int step = 0; step < 2; step++) {
			cpu->batchnorm_forward(x, w, b, B, c, hw, 1e-5f, 0.1f, 1, rm, rv, &nb, y, mean, rstd);
			gpu->batchnorm_forward(xd, wd, bd, B, c, hw, 1e-5f, 0.1f, 1, rmd, rvd, nbd, yd, md, rd);
		}
		snprintf(what, sizeof(what), "batchnorm %dx%dx%d training forward", B, c, hw);
		agree(what, y, yd, tot, SUMS);
		snprintf(what, sizeof(what), "batchnorm %dx%dx%d running mean", B, c, hw);
		agree(what, rm, rmd, c, SUMS);
		snprintf(what, sizeof(what), "batchnorm %dx%dx%d running var", B, c, hw);
		agree(what, rv, rvd, c, SUMS);
		snprintf(what, sizeof(what), "batchnorm %dx%dx%d num_batches_tracked", B, c, hw);
		agree(what, &nb, nbd, 1, EXACT);
		cpu->batchnorm_backward(x, w, mean, rstd, dy, B, c, hw, dx, dw, db);
		gpu->batchnorm_backward(xd, wd, md, rd, dyd, B, c, hw, dxd, dwd, dbd);
		snprintf(what, sizeof(what), "batchnorm %dx%dx%d dx", B, c, hw);
		agree(what, dx, dxd, tot, SUMS);
		snprintf(what, sizeof(what), "batchnorm %dx%dx%d dw", B, c, hw);
		agree(what, dw, dwd, c, SUMS);
		snprintf(what, sizeof(what), "batchnorm %dx%dx%d db", B, c, hw);
		agree(what, db, dbd, c, SUMS);
		cpu->batchnorm_forward(x, w, b, B, c, hw, 1e-5f, 0.1f, 0, rm, rv, &nb, y, NULL, NULL);
		gpu->batchnorm_forward(xd, wd, bd, B, c, hw, 1e-5f, 0.1f, 0, rmd, rvd, nbd, yd, NULL, NULL);
		snprintf(what, sizeof(what), "batchnorm %dx%dx%d evaluation", B, c, hw);
		agree(what, y, yd, tot, SUMS);
		agree(what, &nb, nbd, 1, EXACT);
		float *all[] = { xd, wd, bd, dyd, rmd, rvd, nbd, yd, dxd, md, rd, dwd, dbd };
		for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
			gpu->free(all[k]);
		free(x), free(w), free(b), free(dy), free(rm), free(rv), free(y), free(dx), free(mean), free(rstd);
		free(dw), free(db);
	}
}

static int wanted(int argc, char **argv, const char *g)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], g))
			return 1;
	return 0;
}

/* ABI 8's attention (gpu/attention.cu) against the CPU's blocked reference: the output and the
 * rows' log-sum-exp within SUMS (the same sums in another order), the gradient of q, k and v
 * within NET (sums of sums: the weights recomputed, then summed over rows), the rotation both
 * ways within ELEM. Shapes: T = 1; T = 70 causal (a partial tile); T = 100 bidirectional with
 * padding and dropout on the weights (the same counter-based mask on both); a head width of 64. */
static void test_attention_ops(void)
{
	struct {
		int batch, T, heads, hd, causal, pad;
		float drop;
	} cases[] = { { 1, 1, 1, 8, 1, 0, 0 }, { 2, 70, 2, 16, 1, 0, 0 }, { 2, 100, 4, 16, 0, 1, 0.1f },
		      { 1, 130, 2, 64, 1, 0, 0.2f } };
	char what[128];
	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
		int B = cases[ci].batch, T = cases[ci].T, H = cases[ci].heads, hd = cases[ci].hd, D = H * hd;
		size_t nqkv = (size_t)B * T * 3 * D, no = (size_t)B * T * D, nl = (size_t)B * H * T;
		float *qkv = rnd(nqkv, 300 + ci), *dout = rnd(no, 310 + ci), *ids = malloc(sizeof(float) * B * T);
		for (int i = 0; i < B * T; i++)
			ids[i] = (float)(i % 5 == 3 ? 0 : 1 + i % 7); /* every fifth key is padding */
		float *o = malloc(sizeof(float) * no), *l = malloc(sizeof(float) * nl), *dq = calloc(nqkv, sizeof(float));
		float *qkvd = up(qkv, sizeof(float) * nqkv), *doutd = up(dout, sizeof(float) * no);
		float *idd = up(ids, sizeof(float) * B * T), *od = gpu->alloc(sizeof(float) * no);
		float *ld = gpu->alloc(sizeof(float) * nl), *dqd = gpu->alloc(sizeof(float) * nqkv);
		struct dlk_attn_shape s = { .batch = B, .T = T, .heads = H, .hd = hd, .causal = cases[ci].causal,
			                    .scale = 1.0f / sqrtf((float)hd), .dropout = cases[ci].drop, .seed = 99,
			                    .offset = 1000 };
		struct dlk_attn_shape sd = s;
		if (cases[ci].pad)
			s.ids = ids, sd.ids = idd, s.pad = sd.pad = 0.0f;
		cpu->attention_forward(&s, qkv, o, l);
		gpu->attention_forward(&sd, qkvd, od, ld);
		snprintf(what, sizeof(what), "attention B%d T%d H%d hd%d%s%s forward", B, T, H, hd,
		         s.causal ? " causal" : "", s.ids ? " padding" : "");
		agree(what, o, od, no, SUMS);
		snprintf(what, sizeof(what), "attention B%d T%d H%d hd%d log-sum-exp", B, T, H, hd);
		agree(what, l, ld, nl, SUMS);
		gpu->to_device(od, o, sizeof(float) * no); /* the backward from the same forward on both */
		gpu->to_device(ld, l, sizeof(float) * nl);
		cpu->attention_backward(&s, qkv, o, l, dout, dq);
		gpu->attention_backward(&sd, qkvd, od, ld, doutd, dqd);
		snprintf(what, sizeof(what), "attention B%d T%d H%d hd%d%s backward (dq, dk, dv)", B, T, H, hd,
		         s.dropout > 0 ? " dropout" : "");
		agree(what, dq, dqd, nqkv, NET);
		for (int inv = 0; inv <= 1; inv++) {
			cpu->rotary(qkv, B, T, H, hd, 3, inv);
			gpu->rotary(qkvd, B, T, H, hd, 3, inv);
			snprintf(what, sizeof(what), "rotary B%d T%d H%d hd%d %s", B, T, H, hd, inv ? "inverse" : "forward");
			agree(what, qkv, qkvd, nqkv, ELEM);
		}
		gpu->free(qkvd), gpu->free(doutd), gpu->free(idd), gpu->free(od), gpu->free(ld), gpu->free(dqd);
		free(qkv), free(dout), free(ids), free(o), free(l), free(dq);
	}
}

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT, e2 = DLK_ERR_INIT;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "ops") && strcmp(argv[i], "net") && strcmp(argv[i], "pool")) {
			fprintf(stderr, "usage: test_nn_gpu [ops] [net] [pool]: unknown group '%s'\n", argv[i]);
			return 2;
		}
	cpu = dlk_backend_cpu();
	/* tests run from the source tree: prefer the freshly built library */
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char lib[512];
	snprintf(lib, sizeof(lib), "%s/" DLK_CUDA_LIB_NAME, build);
	/* the loader's error names the file it tried, whatever the reason */
	CHECK(dlk_backend_cuda("/nonexistent/libdlk-cuda.so", 0, &e2) == NULL);
	CHECK_CONTAINS(e2.msg, "no CUDA backend: '/nonexistent/libdlk-cuda.so' does not exist");
	CHECK_CONTAINS(e2.hint, "DLK_CUDA_LIB");
	gpu = dlk_backend_cuda(access(lib, F_OK) == 0 ? lib : NULL, 0, &err);
	if (!gpu) {
		printf("ok %d # skip %s\n1..%d\n", check_n + 1, err.msg, check_n + 1);
		return check_failed ? 1 : 0;
	}
	printf("# device: %s\n", gpu->device);
	CHECK_STR(gpu->name, "cuda");
	if (wanted(argc, argv, "ops")) {
		test_gemm();
		test_gemm_bf16();
		test_dense_forward();
		test_elementwise();
		test_sums();
		test_conv_ops();
		test_maxpool();
		test_softmax_ce();
		test_losses();
		test_token_loss();
		test_layer_ops();
		test_attention_ops();
		test_conv_more();
		test_optimizer_ops();
		test_batchnorm();
		CHECK_MSG(device_clean(), "the operations leave no device error");
	}
	if (wanted(argc, argv, "net"))
		test_layers();
	if (wanted(argc, argv, "pool"))
		test_pool();
	return CHECK_DONE();
}
