/* The CPU backend: OpenBLAS for GEMM, plain loops over the kernels.h formulas for the rest.
 * Loops use restrict-qualified pointers and simple bodies so that they vectorise. */

/* At -O2, GCC 12 vectorises only with its "very cheap" cost model, which rejects every loop here
 * (unknown trip counts need an epilogue). This file alone opts in to the usual model; the rest of
 * dlk keeps the project's flags. (The Adam loop stays scalar unless the build adds
 * -fno-math-errno: sqrtf's errno path is control flow the vectoriser refuses, and no pragma or
 * attribute lifts it in GCC 12.) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "lib/nn/backend.h"
#include "lib/nn/cpu_conv.h"

/* The loops below are built three times, for AVX-512, AVX2 and the baseline, and the loader picks
 * the widest the CPU has. Only the vector width differs: C here is ISO C11, so GCC contracts no
 * a * b + c into an FMA, and reductions are not reordered, so every clone gives the same bits. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

/* OpenBLAS' name for the kernels it chose (exported by every OpenBLAS build) */
char *openblas_get_corename(void);

const char *dlk_cpu_blas_coretype(void)
{
	/* the cores older than Haswell that OpenBLAS falls back to for a CPU it does not know */
	static const char *const old[] = { "Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge",
	                                   "Katmai", "Coppermine", "Northwood", "Banias", "Atom", "Nano" };
	const char *want = NULL, *have = openblas_get_corename();
	int is_old = 0;
	if (!have)
		return NULL;
	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++)
		is_old |= !strcasecmp(have, old[i]);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
		want = "SkylakeX";
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		want = "Haswell";
#endif
	return is_old ? want : NULL;
}

static void cpu_set_threads(int n)
{
	if (n <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (int)c : 1;
	}
	openblas_set_num_threads(n);
	dlk_cpu_conv_set_threads(n);
}

static void *cpu_alloc(size_t bytes)
{
	/* 64-byte alignment keeps vector loads aligned and rows off shared cache lines */
	void *p = NULL;
	size_t rounded = (bytes + 63) & ~(size_t)63;
	if (rounded == 0)
		rounded = 64;
	if (posix_memalign(&p, 64, rounded))
		return NULL;
	memset(p, 0, rounded);
	return p;
}

static void cpu_free(void *p) { free(p); }
static void cpu_copy(void *dst, const void *src, size_t bytes)
{
	if (bytes && dst != src)
		memmove(dst, src, bytes);
}
static int cpu_check(char *msg, size_t len)
{
	if (len)
		msg[0] = '\0';
	return 0;
}

static void cpu_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc)
{
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
	            alpha, a, lda, b, ldb, beta, c, ldc);
}

CLONES static void cpu_fill(float *restrict x, size_t n, float v)
{
	for (size_t i = 0; i < n; i++)
		x[i] = v;
}

CLONES static void cpu_scale(float *restrict x, size_t n, float a)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= a;
}

CLONES static void cpu_axpy(size_t n, float a, const float *restrict x, float *restrict y)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

static double cpu_sum_squares(const float *restrict x, size_t n)
{
	/* four float partial sums per block keep the loop vectorisable; blocks are summed in double */
	double total = 0;
	size_t i = 0;
	while (i < n) {
		size_t end = n - i > 4096 ? i + 4096 : n;
		float s = 0;
		for (size_t j = i; j < end; j++)
			s += x[j] * x[j];
		total += s;
		i = end;
	}
	return total;
}

CLONES static void cpu_bias_act(float *restrict y, const float *restrict bias, int rows, int cols, int act)
{
	for (int r = 0; r < rows; r++) {
		float *restrict row = y + (size_t)r * cols;
		switch (act) {
		case DLK_ACT_RELU:
			for (int c = 0; c < cols; c++)
				row[c] = dlk_k_relu(row[c] + bias[c]);
			break;
		case DLK_ACT_NONE:
			for (int c = 0; c < cols; c++)
				row[c] += bias[c];
			break;
		default:
			for (int c = 0; c < cols; c++)
				row[c] = dlk_k_act(act, row[c] + bias[c]);
		}
	}
}

CLONES static void cpu_act_forward(int act, const float *x, float *y, size_t n)
{
	if (act == DLK_ACT_RELU) {
		for (size_t i = 0; i < n; i++)
			y[i] = dlk_k_relu(x[i]);
		return;
	}
	for (size_t i = 0; i < n; i++)
		y[i] = dlk_k_act(act, x[i]);
}

CLONES static void cpu_act_backward(int act, const float *y, const float *dy, float *dx, size_t n)
{
	if (act == DLK_ACT_RELU) {
		for (size_t i = 0; i < n; i++)
			dx[i] = dlk_k_relu_grad(y[i], dy[i]);
		return;
	}
	for (size_t i = 0; i < n; i++)
		dx[i] = dlk_k_act_grad(act, y[i], dy[i]);
}

CLONES static void cpu_sum_rows(const float *restrict dy, int rows, int cols, float *restrict db)
{
	memset(db, 0, sizeof(float) * (size_t)cols);
	for (int r = 0; r < rows; r++) {
		const float *restrict row = dy + (size_t)r * cols;
		for (int c = 0; c < cols; c++)
			db[c] += row[c];
	}
}

CLONES static void cpu_sum_cols(const float *restrict dy, int rows, int cols, float *restrict db)
{
	for (int r = 0; r < rows; r++) {
		const float *restrict row = dy + (size_t)r * cols;
		float s = 0;
		for (int c = 0; c < cols; c++)
			s += row[c];
		db[r] = s;
	}
}

static void cpu_dropout_forward(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset)
{
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] * dlk_k_dropout_scale(seed, offset + i, p);
}

static void cpu_dropout_backward(const float *dy, float *dx, size_t n, float p, uint64_t seed, uint64_t offset)
{
	for (size_t i = 0; i < n; i++)
		dx[i] = dy[i] * dlk_k_dropout_scale(seed, offset + i, p);
}

/* For output column ox, the input column is ox*stride - pad + kj; the valid ox form the range
 * [lo, hi). Computing it once per row keeps the inner loops free of bounds tests. */
static void valid_range(int out, int in, int stride, int off, int *lo, int *hi)
{
	/* need 0 <= o*stride + off < in */
	int a = 0;
	if (off < 0)
		a = (-off + stride - 1) / stride;
	int b = in - off <= 0 ? 0 : (in - off + stride - 1) / stride;
	if (b > out)
		b = out;
	if (a > b)
		a = b;
	*lo = a;
	*hi = b;
}

CLONES static void cpu_im2col(const float *x, int batch, int c, int h, int w, int k, int stride, int pad,
                       int oh, int ow, float *col)
{
	size_t ohw = (size_t)oh * ow, ncol = (size_t)batch * ohw;
	for (int ch = 0; ch < c; ch++)
		for (int ki = 0; ki < k; ki++)
			for (int kj = 0; kj < k; kj++) {
				float *restrict row = col + ((size_t)(ch * k + ki) * k + kj) * ncol;
				int xlo, xhi, ylo, yhi;
				valid_range(ow, w, stride, kj - pad, &xlo, &xhi);
				valid_range(oh, h, stride, ki - pad, &ylo, &yhi);
				for (int b = 0; b < batch; b++) {
					const float *restrict img = x + ((size_t)b * c + ch) * h * w;
					float *restrict out = row + (size_t)b * ohw;
					for (int oy = 0; oy < oh; oy++) {
						float *restrict o = out + (size_t)oy * ow;
						if (oy < ylo || oy >= yhi) {
							memset(o, 0, sizeof(float) * (size_t)ow);
							continue;
						}
						const float *restrict src = img + (size_t)(oy * stride + ki - pad) * w + (kj - pad);
						for (int ox = 0; ox < xlo; ox++)
							o[ox] = 0;
						if (stride == 1) {
							for (int ox = xlo; ox < xhi; ox++)
								o[ox] = src[ox];
						} else {
							for (int ox = xlo; ox < xhi; ox++)
								o[ox] = src[ox * stride];
						}
						for (int ox = xhi; ox < ow; ox++)
							o[ox] = 0;
					}
				}
			}
}

CLONES static void cpu_col2im(const float *col, int batch, int c, int h, int w, int k, int stride, int pad,
                       int oh, int ow, float *dx)
{
	size_t ohw = (size_t)oh * ow, ncol = (size_t)batch * ohw;
	memset(dx, 0, sizeof(float) * (size_t)batch * c * h * w);
	for (int ch = 0; ch < c; ch++)
		for (int ki = 0; ki < k; ki++)
			for (int kj = 0; kj < k; kj++) {
				const float *restrict row = col + ((size_t)(ch * k + ki) * k + kj) * ncol;
				int xlo, xhi, ylo, yhi;
				valid_range(ow, w, stride, kj - pad, &xlo, &xhi);
				valid_range(oh, h, stride, ki - pad, &ylo, &yhi);
				for (int b = 0; b < batch; b++) {
					float *restrict img = dx + ((size_t)b * c + ch) * h * w;
					const float *restrict in = row + (size_t)b * ohw;
					for (int oy = ylo; oy < yhi; oy++) {
						const float *restrict o = in + (size_t)oy * ow;
						float *restrict dst = img + (size_t)(oy * stride + ki - pad) * w + (kj - pad);
						if (stride == 1) {
							for (int ox = xlo; ox < xhi; ox++)
								dst[ox] += o[ox];
						} else {
							for (int ox = xlo; ox < xhi; ox++)
								dst[ox * stride] += o[ox];
						}
					}
				}
			}
}

CLONES static void cpu_conv_out(const float *t, const float *bias, int batch, int f, int hw, int act, float *y)
{
	size_t ncol = (size_t)batch * hw;
	for (int b = 0; b < batch; b++)
		for (int ch = 0; ch < f; ch++) {
			const float *restrict src = t + (size_t)ch * ncol + (size_t)b * hw;
			float *restrict dst = y + ((size_t)b * f + ch) * hw;
			float bb = bias[ch];
			if (act == DLK_ACT_RELU) {
				for (int i = 0; i < hw; i++)
					dst[i] = dlk_k_relu(src[i] + bb);
			} else {
				for (int i = 0; i < hw; i++)
					dst[i] = dlk_k_act(act, src[i] + bb);
			}
		}
}

static void cpu_conv_grad_in(const float *dy, int batch, int f, int hw, float *dt)
{
	size_t ncol = (size_t)batch * hw;
	for (int b = 0; b < batch; b++)
		for (int ch = 0; ch < f; ch++)
			memcpy(dt + (size_t)ch * ncol + (size_t)b * hw, dy + ((size_t)b * f + ch) * hw,
			       sizeof(float) * (size_t)hw);
}

static void cpu_maxpool_backward(const float *dy, const int32_t *argmax, size_t n_out, size_t n_in, float *dx)
{
	memset(dx, 0, sizeof(float) * n_in);
	for (size_t i = 0; i < n_out; i++)
		dx[argmax[i]] += dy[i];
}

static float cpu_softmax_ce(const float *logits, const int32_t *labels, int batch, int k, float *dlogits)
{
	double total = 0;
	float inv = 1.0f / (float)batch;
	for (int b = 0; b < batch; b++) {
		const float *z = logits + (size_t)b * k;
		float m = z[0];
		for (int j = 1; j < k; j++)
			m = z[j] > m ? z[j] : m;
		float s = 0;
		for (int j = 0; j < k; j++)
			s += expf(z[j] - m);
		int y = labels[b];
		total += dlk_k_ce_loss(z[y], m, s);
		if (dlogits) {
			float *d = dlogits + (size_t)b * k;
			for (int j = 0; j < k; j++)
				d[j] = dlk_k_ce_grad(z[j], m, s, j == y, inv);
		}
	}
	return (float)(total / batch);
}

CLONES static void cpu_sgd_update(float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                           float lr, float momentum, int nesterov, float wd)
{
	/* the flags are loop-invariant: one loop per case, so each has no branch and vectorises */
	if (momentum == 0.0f) {
		for (size_t i = 0; i < n; i++) {
			float unused = 0;
			dlk_k_sgd(&p[i], g[i], &unused, lr, 0.0f, 0, wd);
		}
	} else if (nesterov) {
		for (size_t i = 0; i < n; i++)
			dlk_k_sgd(&p[i], g[i], &buf[i], lr, momentum, 1, wd);
	} else {
		for (size_t i = 0; i < n; i++)
			dlk_k_sgd(&p[i], g[i], &buf[i], lr, momentum, 0, wd);
	}
}

CLONES static void cpu_adam_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                            size_t n, float lr, float beta1, float beta2, float eps, float wd, int decoupled,
                            float bc1, float bc2_sqrt)
{
	if (decoupled) {
		for (size_t i = 0; i < n; i++)
			dlk_k_adam(&p[i], g[i], &m[i], &v[i], lr, beta1, beta2, eps, wd, 1, bc1, bc2_sqrt);
	} else {
		for (size_t i = 0; i < n; i++)
			dlk_k_adam(&p[i], g[i], &m[i], &v[i], lr, beta1, beta2, eps, wd, 0, bc1, bc2_sqrt);
	}
}

static struct dlk_backend cpu_backend = {
	.abi = DLK_BACKEND_ABI,
	.name = "cpu",
	.device = "cpu (OpenBLAS)",
	.set_threads = cpu_set_threads,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.to_device = cpu_copy,
	.to_host = cpu_copy,
	.copy = cpu_copy,
	.check = cpu_check,
	.sgemm = cpu_sgemm,
	.fill = cpu_fill,
	.scale = cpu_scale,
	.axpy = cpu_axpy,
	.sum_squares = cpu_sum_squares,
	.bias_act = cpu_bias_act,
	.act_forward = cpu_act_forward,
	.act_backward = cpu_act_backward,
	.sum_rows = cpu_sum_rows,
	.sum_cols = cpu_sum_cols,
	.dropout_forward = cpu_dropout_forward,
	.dropout_backward = cpu_dropout_backward,
	.im2col = cpu_im2col,
	.col2im = cpu_col2im,
	.conv_out = cpu_conv_out,
	.conv_grad_in = cpu_conv_grad_in,
	.maxpool_forward = dlk_cpu_maxpool_forward,
	.maxpool_backward = cpu_maxpool_backward,
	.softmax_ce = cpu_softmax_ce,
	.sgd_update = cpu_sgd_update,
	.adam_update = cpu_adam_update,
	.conv_forward = dlk_cpu_conv_forward,
	.conv_backward = dlk_cpu_conv_backward,
};

const struct dlk_backend *dlk_backend_cpu(void)
{
	if (!strcmp(cpu_backend.device, "cpu (OpenBLAS)"))
		snprintf(cpu_backend.device, sizeof(cpu_backend.device), "cpu (OpenBLAS, %s kernels)",
		         openblas_get_corename());
	return &cpu_backend;
}
