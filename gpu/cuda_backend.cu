/* The CUDA backend: cuBLAS for GEMM, one small kernel per operation for the rest, each calling
 * the same per-element functions (lib/nn/kernels.h) that the CPU backend's loops call.
 * Built into libdlk-cuda.so; dlk loads it with dlopen and resolves DLK_BACKEND_ENTRY only. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "lib/nn/backend.h"
}

static cublasHandle_t g_blas;
static char g_error[256]; /* the first error since the last check(): errors are sticky */
static float *g_rowloss;  /* softmax_ce's per-row losses */
static size_t g_rowloss_cap;
static double *g_sumsq;   /* sum_squares' accumulator */

static void note(const char *what, cudaError_t e)
{
	if (e != cudaSuccess && !g_error[0])
		snprintf(g_error, sizeof(g_error), "%s: %s", what, cudaGetErrorString(e));
}

static void note_blas(const char *what, cublasStatus_t s)
{
	if (s != CUBLAS_STATUS_SUCCESS && !g_error[0])
		snprintf(g_error, sizeof(g_error), "%s: cuBLAS status %d", what, (int)s);
}

#define LAUNCH(n) (unsigned)(((n) + 255) / 256 < 65535 * 16 ? ((n) + 255) / 256 : 65535 * 16), 256
#define GRID_STRIDE(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)blockDim.x * gridDim.x)
#define AFTER(what) note(what, cudaGetLastError())

static void cu_set_threads(int n) { (void)n; }

static void *cu_alloc(size_t bytes)
{
	void *p = NULL;
	if (bytes == 0)
		bytes = 64;
	if (cudaMalloc(&p, bytes) != cudaSuccess) {
		cudaGetLastError(); /* out of memory is reported by the NULL, not as a sticky error */
		return NULL;
	}
	note("cudaMemset", cudaMemset(p, 0, bytes));
	return p;
}

static void cu_free(void *p)
{
	if (p)
		note("cudaFree", cudaFree(p));
}

static void cu_to_device(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		note("cudaMemcpy to device", cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

static void cu_to_host(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		note("cudaMemcpy to host", cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

static void cu_copy(void *dst, const void *src, size_t bytes)
{
	if (bytes && dst != src)
		note("cudaMemcpy on device", cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

static int cu_check(char *msg, size_t len)
{
	note("cudaDeviceSynchronize", cudaDeviceSynchronize());
	if (!g_error[0]) {
		if (len)
			msg[0] = 0;
		return 0;
	}
	snprintf(msg, len, "%s", g_error);
	g_error[0] = 0;
	return -1;
}

/* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands */
static void cu_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                     int ldb, float beta, float *c, int ldc)
{
	note_blas("cublasSgemm", cublasSgemm(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
	                                     k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

__global__ void k_fill(float *x, size_t n, float v) { GRID_STRIDE(i, n) x[i] = v; }
__global__ void k_scale(float *x, size_t n, float a) { GRID_STRIDE(i, n) x[i] *= a; }
__global__ void k_axpy(size_t n, float a, const float *x, float *y) { GRID_STRIDE(i, n) y[i] += a * x[i]; }

static void cu_fill(float *x, size_t n, float v)
{
	if (n) {
		k_fill<<<LAUNCH(n)>>>(x, n, v);
		AFTER("fill");
	}
}
static void cu_scale(float *x, size_t n, float a)
{
	if (n) {
		k_scale<<<LAUNCH(n)>>>(x, n, a);
		AFTER("scale");
	}
}
static void cu_axpy(size_t n, float a, const float *x, float *y)
{
	if (n) {
		k_axpy<<<LAUNCH(n)>>>(n, a, x, y);
		AFTER("axpy");
	}
}

__global__ void k_sumsq(const float *x, size_t n, double *out)
{
	__shared__ double part[256];
	double s = 0;
	GRID_STRIDE(i, n) s += (double)x[i] * x[i];
	part[threadIdx.x] = s;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (threadIdx.x < w)
			part[threadIdx.x] += part[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicAdd(out, part[0]);
}

static double cu_sum_squares(const float *x, size_t n)
{
	double h = 0;
	if (!n)
		return 0;
	note("cudaMemset", cudaMemset(g_sumsq, 0, sizeof(double)));
	k_sumsq<<<(unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024), 256>>>(x, n, g_sumsq);
	AFTER("sum_squares");
	note("cudaMemcpy", cudaMemcpy(&h, g_sumsq, sizeof(double), cudaMemcpyDeviceToHost));
	return h;
}

__global__ void k_bias_act(float *y, const float *bias, size_t n, int cols, int act)
{
	GRID_STRIDE(i, n) y[i] = dlk_k_act(act, y[i] + bias[i % cols]);
}
static void cu_bias_act(float *y, const float *bias, int rows, int cols, int act)
{
	size_t n = (size_t)rows * cols;
	if (n) {
		k_bias_act<<<LAUNCH(n)>>>(y, bias, n, cols, act);
		AFTER("bias_act");
	}
}

__global__ void k_act_fwd(int act, const float *x, float *y, size_t n) { GRID_STRIDE(i, n) y[i] = dlk_k_act(act, x[i]); }
__global__ void k_act_bwd(int act, const float *y, const float *dy, float *dx, size_t n)
{
	GRID_STRIDE(i, n) dx[i] = dlk_k_act_grad(act, y[i], dy[i]);
}
static void cu_act_forward(int act, const float *x, float *y, size_t n)
{
	if (n) {
		k_act_fwd<<<LAUNCH(n)>>>(act, x, y, n);
		AFTER("act_forward");
	}
}
static void cu_act_backward(int act, const float *y, const float *dy, float *dx, size_t n)
{
	if (n) {
		k_act_bwd<<<LAUNCH(n)>>>(act, y, dy, dx, n);
		AFTER("act_backward");
	}
}

/* one thread per column: consecutive threads read consecutive addresses */
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
	k_sum_rows<<<(cols + 255) / 256, 256>>>(dy, rows, cols, db);
	AFTER("sum_rows");
}

/* one block per row */
__global__ void k_sum_cols(const float *dy, int cols, float *db)
{
	__shared__ float part[256];
	const float *row = dy + (size_t)blockIdx.x * cols;
	float s = 0;
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		s += row[c];
	part[threadIdx.x] = s;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (threadIdx.x < w)
			part[threadIdx.x] += part[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		db[blockIdx.x] = part[0];
}
static void cu_sum_cols(const float *dy, int rows, int cols, float *db)
{
	if (rows) {
		k_sum_cols<<<rows, 256>>>(dy, cols, db);
		AFTER("sum_cols");
	}
}

__global__ void k_dropout(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset)
{
	GRID_STRIDE(i, n) y[i] = x[i] * dlk_k_dropout_scale(seed, offset + i, p);
}
static void cu_dropout_forward(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset)
{
	if (n) {
		k_dropout<<<LAUNCH(n)>>>(x, y, n, p, seed, offset);
		AFTER("dropout");
	}
}
static void cu_dropout_backward(const float *dy, float *dx, size_t n, float p, uint64_t seed, uint64_t offset)
{
	cu_dropout_forward(dy, dx, n, p, seed, offset);
}

/* col[(c*k + ki)*k + kj][b*oh*ow + oy*ow + ox] = x[b][c][oy*s - pad + ki][ox*s - pad + kj] */
__global__ void k_im2col(const float *x, int batch, int c, int h, int w, int k, int stride, int pad, int oh, int ow,
                         float *col)
{
	size_t ncol = (size_t)batch * oh * ow, n = ncol * c * k * k;
	GRID_STRIDE(i, n)
	{
		size_t row = i / ncol, cc = i % ncol;
		int kj = (int)(row % k), ki = (int)((row / k) % k), ch = (int)(row / ((size_t)k * k));
		int b = (int)(cc / ((size_t)oh * ow)), rem = (int)(cc % ((size_t)oh * ow));
		int iy = (rem / ow) * stride - pad + ki, ix = (rem % ow) * stride - pad + kj;
		col[i] = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[(((size_t)b * c + ch) * h + iy) * w + ix] : 0.0f;
	}
}
static void cu_im2col(const float *x, int batch, int c, int h, int w, int k, int stride, int pad, int oh, int ow,
                      float *col)
{
	size_t n = (size_t)batch * oh * ow * c * k * k;
	k_im2col<<<LAUNCH(n)>>>(x, batch, c, h, w, k, stride, pad, oh, ow, col);
	AFTER("im2col");
}

/* one thread per input element gathers its contributions: no atomics needed */
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
	k_col2im<<<LAUNCH(n)>>>(col, batch, c, h, w, k, stride, pad, oh, ow, dx);
	AFTER("col2im");
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
	k_conv_out<<<LAUNCH(n)>>>(t, bias, batch, f, hw, act, y);
	AFTER("conv_out");
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
	k_conv_grad_in<<<LAUNCH(n)>>>(dy, batch, f, hw, dt);
	AFTER("conv_grad_in");
}

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
				if (v > bv || isnan(v)) {
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
	k_maxpool_fwd<<<LAUNCH(n)>>>(x, batch * c, h, w, size, stride, oh, ow, y, argmax);
	AFTER("maxpool_forward");
}

__global__ void k_maxpool_bwd(const float *dy, const int32_t *argmax, size_t n, float *dx)
{
	GRID_STRIDE(i, n) atomicAdd(&dx[argmax[i]], dy[i]);
}
static void cu_maxpool_backward(const float *dy, const int32_t *argmax, size_t n_out, size_t n_in, float *dx)
{
	note("cudaMemset", cudaMemset(dx, 0, sizeof(float) * n_in));
	if (n_out) {
		k_maxpool_bwd<<<LAUNCH(n_out)>>>(dy, argmax, n_out, dx);
		AFTER("maxpool_backward");
	}
}

/* one thread per row; the row's loss goes to rowloss for a host-side sum in double */
__global__ void k_softmax_ce(const float *z, const int32_t *labels, int batch, int k, float *dz, float *rowloss)
{
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b >= batch)
		return;
	const float *row = z + (size_t)b * k;
	float m = row[0];
	for (int j = 1; j < k; j++)
		m = row[j] > m ? row[j] : m;
	float s = 0;
	for (int j = 0; j < k; j++)
		s += expf(row[j] - m);
	int y = labels[b];
	rowloss[b] = dlk_k_ce_loss(row[y], m, s);
	if (dz)
		for (int j = 0; j < k; j++)
			dz[(size_t)b * k + j] = dlk_k_ce_grad(row[j], m, s, j == y, 1.0f / (float)batch);
}
static float cu_softmax_ce(const float *z, const int32_t *labels, int batch, int k, float *dz)
{
	if ((size_t)batch > g_rowloss_cap) {
		cu_free(g_rowloss);
		g_rowloss = (float *)cu_alloc(sizeof(float) * (size_t)batch);
		g_rowloss_cap = g_rowloss ? (size_t)batch : 0;
		if (!g_rowloss) {
			if (!g_error[0])
				snprintf(g_error, sizeof(g_error), "softmax_ce: out of device memory");
			return NAN;
		}
	}
	k_softmax_ce<<<(batch + 127) / 128, 128>>>(z, labels, batch, k, dz, g_rowloss);
	AFTER("softmax_ce");
	float host[1024];
	double total = 0;
	for (int done = 0; done < batch; done += 1024) {
		int n = batch - done < 1024 ? batch - done : 1024;
		cu_to_host(host, g_rowloss + done, sizeof(float) * (size_t)n);
		for (int i = 0; i < n; i++)
			total += host[i];
	}
	return (float)(total / batch);
}

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
	if (n) {
		k_sgd<<<LAUNCH(n)>>>(p, g, buf, n, lr, mom, nesterov, wd);
		AFTER("sgd_update");
	}
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
                       float wd, int decoupled, float bc1, float bc2_sqrt)
{
	GRID_STRIDE(i, n) dlk_k_adam(&p[i], g[i], &m[i], &v[i], lr, b1, b2, eps, wd, decoupled, bc1, bc2_sqrt);
}
static void cu_adam_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                           float eps, float wd, int decoupled, float bc1, float bc2_sqrt)
{
	if (n) {
		k_adam<<<LAUNCH(n)>>>(p, g, m, v, n, lr, b1, b2, eps, wd, decoupled, bc1, bc2_sqrt);
		AFTER("adam_update");
	}
}

static struct dlk_backend g_backend;

extern "C" __attribute__((visibility("default"))) const struct dlk_backend *dlk_backend_cuda_entry(char *msg, size_t len)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		snprintf(msg, len, "no CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return NULL;
	}
	if (!g_blas) {
		cublasStatus_t s = cublasCreate(&g_blas);
		if (s != CUBLAS_STATUS_SUCCESS) {
			snprintf(msg, len, "cuBLAS cannot start (status %d)", (int)s);
			return NULL;
		}
		if (cudaMalloc((void **)&g_sumsq, sizeof(double)) != cudaSuccess) {
			snprintf(msg, len, "cannot allocate device memory");
			return NULL;
		}
	}
	struct cudaDeviceProp prop;
	int dev = 0;
	cudaGetDevice(&dev);
	cudaGetDeviceProperties(&prop, dev);
	struct dlk_backend *b = &g_backend;
	memset(b, 0, sizeof(*b));
	b->abi = DLK_BACKEND_ABI;
	b->name = "cuda";
	snprintf(b->device, sizeof(b->device), "cuda:%d (%.80s, %.0f GiB)", dev, prop.name,
	         (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024));
	b->set_threads = cu_set_threads;
	b->alloc = cu_alloc;
	b->free = cu_free;
	b->to_device = cu_to_device;
	b->to_host = cu_to_host;
	b->copy = cu_copy;
	b->check = cu_check;
	b->sgemm = cu_sgemm;
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
	return b;
}
