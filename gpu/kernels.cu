/* The kernels of the CUDA backend: one per operation of the backend interface, each calling the
 * per-element functions of lib/nn/kernels.h that the CPU backend's loops call, so the CPU tests
 * check the formulas these kernels run. Every launch goes to the backend's one stream.
 *
 * Reductions keep a fixed order (the block reduction of reduce.cuh, or one thread walking a
 * column) and col2im is written as a gather, so those results are the same bits on every run;
 * sum_rows and col2im even add in the CPU's order. The one atomic scatter is maxpool_backward's
 * (see there). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu/cuda.h"
#include "gpu/reduce.cuh"

extern "C" {
#include "lib/nn/kernels.h"
}

#define THREADS 256
#define GRID_STRIDE(i, n) \
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)blockDim.x * gridDim.x)

/* enough blocks to cover n with THREADS each, capped (the loops stride over the rest) */
static unsigned blocks_for(size_t n)
{
	size_t b = (n + THREADS - 1) / THREADS;
	return (unsigned)(b < 65535u * 32 ? (b ? b : 1) : 65535u * 32);
}

#define LAUNCH(kernel, n, ...)                                                          \
	do {                                                                            \
		if ((n) > 0) {                                                          \
			kernel<<<blocks_for(n), THREADS, 0, dlk_cu_stream>>>(__VA_ARGS__); \
			dlk_cu_note(#kernel, cudaGetLastError());                       \
		}                                                                       \
	} while (0)

static double *g_partial; /* sum_squares: one double per block, then the total */
#define SUMSQ_BLOCKS 1024

/* ---- element-wise ---- */

__global__ void k_fill(float *x, size_t n, float v) { GRID_STRIDE(i, n) x[i] = v; }
__global__ void k_scale(float *x, size_t n, float a) { GRID_STRIDE(i, n) x[i] *= a; }
__global__ void k_axpy(size_t n, float a, const float *x, float *y) { GRID_STRIDE(i, n) y[i] += a * x[i]; }

static void cu_fill(float *x, size_t n, float v) { LAUNCH(k_fill, n, x, n, v); }
static void cu_scale(float *x, size_t n, float a) { LAUNCH(k_scale, n, x, n, a); }
static void cu_axpy(size_t n, float a, const float *x, float *y) { LAUNCH(k_axpy, n, n, a, x, y); }

__global__ void k_bias_act(float *y, const float *bias, size_t n, int cols, int act)
{
	GRID_STRIDE(i, n) y[i] = dlk_k_act(act, y[i] + bias[i % (size_t)cols]);
}
static void cu_bias_act(float *y, const float *bias, int rows, int cols, int act)
{
	size_t n = (size_t)rows * (size_t)cols;
	LAUNCH(k_bias_act, n, y, bias, n, cols, act);
}

__global__ void k_act_fwd(int act, const float *x, float *y, size_t n) { GRID_STRIDE(i, n) y[i] = dlk_k_act(act, x[i]); }
__global__ void k_act_bwd(int act, const float *y, const float *dy, float *dx, size_t n)
{
	GRID_STRIDE(i, n) dx[i] = dlk_k_act_grad(act, y[i], dy[i]);
}
static void cu_act_forward(int act, const float *x, float *y, size_t n) { LAUNCH(k_act_fwd, n, act, x, y, n); }
static void cu_act_backward(int act, const float *y, const float *dy, float *dx, size_t n)
{
	LAUNCH(k_act_bwd, n, act, y, dy, dx, n);
}

__global__ void k_dropout(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset)
{
	GRID_STRIDE(i, n) y[i] = x[i] * dlk_k_dropout_scale(seed, offset + i, p);
}
static void cu_dropout_forward(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset)
{
	LAUNCH(k_dropout, n, x, y, n, p, seed, offset);
}
static void cu_dropout_backward(const float *dy, float *dx, size_t n, float p, uint64_t seed, uint64_t offset)
{
	LAUNCH(k_dropout, n, dy, dx, n, p, seed, offset);
}

/* ---- reductions ---- */

/* each block sums its grid-stride share in double; the second kernel adds the blocks' partial
 * sums in block order (no atomics: the same bits every run) */
__global__ void k_sumsq_part(const float *x, size_t n, double *part)
{
	double s = 0;
	GRID_STRIDE(i, n) s += (double)x[i] * (double)x[i];
	s = dlk_block_sum(s);
	if (threadIdx.x == 0)
		part[blockIdx.x] = s;
}
__global__ void k_sum_double(double *part, int n)
{
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += part[i];
	s = dlk_block_sum(s);
	if (threadIdx.x == 0)
		part[SUMSQ_BLOCKS] = s;
}
static double cu_sum_squares(const float *x, size_t n)
{
	double h = 0;
	if (!n)
		return 0;
	unsigned nb = blocks_for(n) < SUMSQ_BLOCKS ? blocks_for(n) : SUMSQ_BLOCKS;
	k_sumsq_part<<<nb, THREADS, 0, dlk_cu_stream>>>(x, n, g_partial);
	dlk_cu_note("k_sumsq_part", cudaGetLastError());
	k_sum_double<<<1, THREADS, 0, dlk_cu_stream>>>(g_partial, (int)nb);
	dlk_cu_note("k_sum_double", cudaGetLastError());
	dlk_cu_note("cudaMemcpyAsync", cudaMemcpyAsync(&h, g_partial + SUMSQ_BLOCKS, sizeof(h), cudaMemcpyDeviceToHost,
	                                               dlk_cu_stream));
	dlk_cu_note("cudaStreamSynchronize", cudaStreamSynchronize(dlk_cu_stream));
	return h;
}

/* db[c] = sum over r of dy[r, c]: one thread per column walks the rows in order, as the CPU
 * does (the same bits); neighbouring threads read neighbouring addresses */
__global__ void k_sum_rows(const float *dy, int rows, int cols, float *db)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= cols)
		return;
	float s = 0;
	for (int r = 0; r < rows; r++)
		s += dy[(size_t)r * cols + c];
	db[c] = s;
}
static void cu_sum_rows(const float *dy, int rows, int cols, float *db)
{
	if (cols > 0) {
		k_sum_rows<<<(cols + THREADS - 1) / THREADS, THREADS, 0, dlk_cu_stream>>>(dy, rows, cols, db);
		dlk_cu_note("k_sum_rows", cudaGetLastError());
	}
}

/* db[r] = sum over c of dy[r, c]: one block per row */
__global__ void k_sum_cols(const float *dy, int cols, float *db)
{
	const float *row = dy + (size_t)blockIdx.x * cols;
	float s = 0;
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		s += row[c];
	s = dlk_block_sum(s);
	if (threadIdx.x == 0)
		db[blockIdx.x] = s;
}
static void cu_sum_cols(const float *dy, int rows, int cols, float *db)
{
	if (rows > 0) {
		k_sum_cols<<<rows, THREADS, 0, dlk_cu_stream>>>(dy, cols, db);
		dlk_cu_note("k_sum_cols", cudaGetLastError());
	}
}

/* ---- convolution: im2col, col2im and the layout changes around the GEMM ---- */

/* col[(c*k + ki)*k + kj][b*oh*ow + oy*ow + ox] = x[b][c][oy*s - pad + ki][ox*s - pad + kj] */
__global__ void k_im2col(const float *x, int batch, int c, int h, int w, int k, int stride, int pad, int oh, int ow,
                         float *col)
{
	size_t ohw = (size_t)oh * ow, ncol = (size_t)batch * ohw, n = ncol * c * k * k;
	GRID_STRIDE(i, n)
	{
		size_t row = i / ncol, cc = i % ncol;
		int kj = (int)(row % k), ki = (int)((row / k) % k), ch = (int)(row / ((size_t)k * k));
		int b = (int)(cc / ohw), rem = (int)(cc % ohw);
		int iy = (rem / ow) * stride - pad + ki, ix = (rem % ow) * stride - pad + kj;
		col[i] = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[(((size_t)b * c + ch) * h + iy) * w + ix] : 0.0f;
	}
}
static void cu_im2col(const float *x, int batch, int c, int h, int w, int k, int stride, int pad, int oh, int ow,
                      float *col)
{
	size_t n = (size_t)batch * oh * ow * c * k * k;
	LAUNCH(k_im2col, n, x, batch, c, h, w, k, stride, pad, oh, ow, col);
}

/* one thread per input element gathers its contributions in (ki, kj) order, which is the order
 * the CPU's scatter adds them in: no atomics, the CPU's bits */
__global__ void k_col2im(const float *col, int batch, int c, int h, int w, int k, int stride, int pad, int oh, int ow,
                         float *dx)
{
	size_t ncol = (size_t)batch * oh * ow, n = (size_t)batch * c * h * w;
	GRID_STRIDE(i, n)
	{
		int ix = (int)(i % w), iy = (int)((i / w) % h), ch = (int)((i / ((size_t)w * h)) % c);
		int b = (int)(i / ((size_t)w * h * c));
		float s = 0;
		for (int ki = 0; ki < k; ki++) {
			int ty = iy + pad - ki;
			if (ty < 0 || ty % stride)
				continue;
			int oy = ty / stride;
			if (oy >= oh)
				continue;
			for (int kj = 0; kj < k; kj++) {
				int tx = ix + pad - kj;
				if (tx < 0 || tx % stride)
					continue;
				int ox = tx / stride;
				if (ox >= ow)
					continue;
				s += col[((size_t)(ch * k + ki) * k + kj) * ncol + (size_t)b * oh * ow + (size_t)oy * ow + ox];
			}
		}
		dx[i] = s;
	}
}
static void cu_col2im(const float *col, int batch, int c, int h, int w, int k, int stride, int pad, int oh, int ow,
                      float *dx)
{
	size_t n = (size_t)batch * c * h * w;
	LAUNCH(k_col2im, n, col, batch, c, h, w, k, stride, pad, oh, ow, dx);
}

__global__ void k_conv_out(const float *t, const float *bias, int batch, int f, int hw, int act, float *y)
{
	size_t n = (size_t)batch * f * hw;
	GRID_STRIDE(i, n)
	{
		int p = (int)(i % hw), ch = (int)((i / hw) % f), b = (int)(i / ((size_t)hw * f));
		y[i] = dlk_k_act(act, t[(size_t)ch * batch * hw + (size_t)b * hw + p] + bias[ch]);
	}
}
static void cu_conv_out(const float *t, const float *bias, int batch, int f, int hw, int act, float *y)
{
	size_t n = (size_t)batch * f * hw;
	LAUNCH(k_conv_out, n, t, bias, batch, f, hw, act, y);
}

__global__ void k_conv_grad_in(const float *dy, int batch, int f, int hw, float *dt)
{
	size_t n = (size_t)batch * f * hw;
	GRID_STRIDE(i, n)
	{
		int p = (int)(i % hw), ch = (int)((i / hw) % f), b = (int)(i / ((size_t)hw * f));
		dt[(size_t)ch * batch * hw + (size_t)b * hw + p] = dy[i];
	}
}
static void cu_conv_grad_in(const float *dy, int batch, int f, int hw, float *dt)
{
	size_t n = (size_t)batch * f * hw;
	LAUNCH(k_conv_grad_in, n, dy, batch, f, hw, dt);
}

/* ---- max pooling ---- */

__global__ void k_maxpool_fwd(const float *x, int bc_total, int h, int w, int size, int stride, int oh, int ow,
                              float *y, int32_t *argmax)
{
	size_t n = (size_t)bc_total * oh * ow;
	GRID_STRIDE(i, n)
	{
		int ox = (int)(i % ow), oy = (int)((i / ow) % oh);
		size_t bc = i / ((size_t)ow * oh), base = bc * h * w;
		int y0 = oy * stride, x0 = ox * stride, best = y0 * w + x0;
		float bv = x[base + best];
		for (int a = 0; a < size; a++)
			for (int b = 0; b < size; b++) {
				int idx = (y0 + a) * w + x0 + b;
				float v = x[base + idx];
				if (dlk_k_max_takes(v, bv)) {
					bv = v;
					best = idx;
				}
			}
		y[i] = bv;
		argmax[i] = (int32_t)(base + best);
	}
}
static void cu_maxpool_forward(const float *x, int batch, int c, int h, int w, int size, int stride, int oh, int ow,
                               float *y, int32_t *argmax)
{
	size_t n = (size_t)batch * c * oh * ow;
	LAUNCH(k_maxpool_fwd, n, x, batch * c, h, w, size, stride, oh, ow, y, argmax);
}

/* The gradient flows to each window's argmax. The interface passes no window geometry, so this
 * is a scatter: with windows that do not overlap (stride >= size, the usual 2x2/2) every input
 * receives at most one value and the result is exact; overlapping windows add with atomics, in
 * an order that may vary from run to run within float rounding. */
__global__ void k_maxpool_bwd(const float *dy, const int32_t *argmax, size_t n_out, float *dx)
{
	GRID_STRIDE(i, n_out) atomicAdd(&dx[argmax[i]], dy[i]);
}
static void cu_maxpool_backward(const float *dy, const int32_t *argmax, size_t n_out, size_t n_in, float *dx)
{
	if (n_in)
		dlk_cu_note("cudaMemsetAsync", cudaMemsetAsync(dx, 0, sizeof(float) * n_in, dlk_cu_stream));
	LAUNCH(k_maxpool_bwd, n_out, dy, argmax, n_out, dx);
}

/* ---- loss ---- */

/* One block per row: the row's max and the sum of exponentials by the block reduction, then
 * the loss (to rowloss, summed by k_mean_loss in double) and the gradient. */
__global__ void k_softmax_ce(const float *z, const int32_t *labels, int k, float inv_batch, float *dz, float *rowloss)
{
	const float *row = z + (size_t)blockIdx.x * k;
	float m = -INFINITY, s = 0;
	for (int j = threadIdx.x; j < k; j += blockDim.x)
		m = dlk_max_op::apply(m, row[j]);
	m = dlk_block_max(m);
	for (int j = threadIdx.x; j < k; j += blockDim.x)
		s += expf(row[j] - m);
	s = dlk_block_sum(s);
	int y = labels[blockIdx.x];
	if (threadIdx.x == 0)
		rowloss[blockIdx.x] = dlk_k_ce_loss(row[y], m, s);
	if (dz)
		for (int j = threadIdx.x; j < k; j += blockDim.x)
			dz[(size_t)blockIdx.x * k + j] = dlk_k_ce_grad(row[j], m, s, j == y, inv_batch);
}
__global__ void k_mean_loss(const float *rowloss, int batch, double *out)
{
	double s = 0;
	for (int i = threadIdx.x; i < batch; i += blockDim.x)
		s += rowloss[i];
	s = dlk_block_sum(s);
	if (threadIdx.x == 0)
		*out = s / batch;
}

static float *g_rowloss;
static size_t g_rowloss_cap;

static float cu_softmax_ce(const float *z, const int32_t *labels, int batch, int k, float *dz)
{
	double loss = NAN;
	if (batch <= 0)
		return NAN;
	if ((size_t)batch > g_rowloss_cap) {
		dlk_cu_free(g_rowloss);
		g_rowloss = (float *)dlk_cu_alloc(sizeof(float) * (size_t)batch);
		g_rowloss_cap = g_rowloss ? (size_t)batch : 0;
		if (!g_rowloss) {
			dlk_cu_notef("softmax_ce: out of device memory for %d rows", batch);
			return NAN;
		}
	}
	/* a warp per row for the usual handful of classes, up to 8 warps for wide ones */
	int threads = (k + 31) / 32 * 32;
	threads = threads > THREADS ? THREADS : threads;
	k_softmax_ce<<<batch, threads, 0, dlk_cu_stream>>>(z, labels, k, 1.0f / (float)batch, dz, g_rowloss);
	dlk_cu_note("k_softmax_ce", cudaGetLastError());
	k_mean_loss<<<1, THREADS, 0, dlk_cu_stream>>>(g_rowloss, batch, g_partial + SUMSQ_BLOCKS);
	dlk_cu_note("k_mean_loss", cudaGetLastError());
	dlk_cu_note("cudaMemcpyAsync", cudaMemcpyAsync(&loss, g_partial + SUMSQ_BLOCKS, sizeof(loss),
	                                               cudaMemcpyDeviceToHost, dlk_cu_stream));
	dlk_cu_note("cudaStreamSynchronize", cudaStreamSynchronize(dlk_cu_stream));
	return (float)loss;
}

/* ---- optimizers ---- */

__global__ void k_sgd(float *p, const float *g, float *buf, size_t n, float lr, float mom, int nesterov, float wd)
{
	GRID_STRIDE(i, n)
	{
		float b = mom != 0.0f ? buf[i] : 0.0f;
		dlk_k_sgd(&p[i], g[i], &b, lr, mom, nesterov, wd);
		if (mom != 0.0f)
			buf[i] = b;
	}
}
static void cu_sgd_update(float *p, const float *g, float *buf, size_t n, float lr, float mom, int nesterov, float wd)
{
	LAUNCH(k_sgd, n, p, g, buf, n, lr, mom, nesterov, wd);
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
                       float wd, int decoupled, float bc1, float bc2_sqrt)
{
	GRID_STRIDE(i, n) dlk_k_adam(&p[i], g[i], &m[i], &v[i], lr, b1, b2, eps, wd, decoupled, bc1, bc2_sqrt);
}
static void cu_adam_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                           float eps, float wd, int decoupled, float bc1, float bc2_sqrt)
{
	LAUNCH(k_adam, n, p, g, m, v, n, lr, b1, b2, eps, wd, decoupled, bc1, bc2_sqrt);
}

extern "C" void dlk_cu_install_kernels(struct dlk_backend *b)
{
	if (!g_partial)
		g_partial = (double *)dlk_cu_alloc(sizeof(double) * (SUMSQ_BLOCKS + 1));
	b->fill = cu_fill;
	b->scale = cu_scale;
	b->axpy = cu_axpy;
	b->sum_squares = cu_sum_squares;
	b->bias_act = cu_bias_act;
	b->act_forward = cu_act_forward;
	b->act_backward = cu_act_backward;
	b->sum_rows = cu_sum_rows;
	b->sum_cols = cu_sum_cols;
	b->dropout_forward = cu_dropout_forward;
	b->dropout_backward = cu_dropout_backward;
	b->im2col = cu_im2col;
	b->col2im = cu_col2im;
	b->conv_out = cu_conv_out;
	b->conv_grad_in = cu_conv_grad_in;
	b->maxpool_forward = cu_maxpool_forward;
	b->maxpool_backward = cu_maxpool_backward;
	b->softmax_ce = cu_softmax_ce;
	b->sgd_update = cu_sgd_update;
	b->adam_update = cu_adam_update;
}
