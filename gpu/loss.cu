/* The losses of lib/nn/loss.h on the GPU, the per-element math shared with the CPU reference
 * (lib/nn/kernels.h). Sums are per-block partials in double, then one block adds them in a fixed
 * order: the same bits on every run. test_nn_gpu checks each against lib/nn/loss.c. */
#include <math.h>
#include <stdint.h>

#include "gpu/cuda.h"
#include "gpu/reduce.cuh"

extern "C" {
#include "lib/nn/kernels.h"
}

#define LOSS_THREADS 256
#define LOSS_BLOCKS 256

/* one double per block, then the total */
static double *g_loss_partial;
static float *g_loss_rows;
static size_t g_loss_rows_cap;

/* cross-entropy with label smoothing: one block per row */
__global__ void k_loss_ce(const float *z, const int32_t *labels, int k, float eps, float inv_batch, float *dz,
                          float *rowloss)
{
	const float *row = z + (size_t)blockIdx.x * k;
	float m = -INFINITY, s = 0, zsum = 0;
	for (int j = threadIdx.x; j < k; j += blockDim.x)
		m = dlk_max_op::apply(m, row[j]);
	m = dlk_block_max(m);
	for (int j = threadIdx.x; j < k; j += blockDim.x) {
		s += expf(row[j] - m);
		zsum += row[j] - m;
	}
	s = dlk_block_sum(s);
	zsum = dlk_block_sum(zsum);
	int y = labels[blockIdx.x];
	if (threadIdx.x == 0)
		rowloss[blockIdx.x] = dlk_k_ce_smooth_loss(row[y], m, s, zsum, k, eps);
	if (dz)
		for (int j = threadIdx.x; j < k; j += blockDim.x)
			dz[(size_t)blockIdx.x * k + j] = dlk_k_ce_smooth_grad(row[j], m, s, j == y, k, eps, inv_batch);
}

/* next-token cross-entropy (task lm): the targets are token ids in floats, a negative one
 * ignored. First the count of counted positions (and 1/count, which scales the gradient), then
 * one block per position that writes the position's loss and its gradient row, never the
 * softmax itself. */
__global__ void k_token_count(const float *targets, int rows, double *count, double *inv)
{
	double c = 0;
	for (int i = threadIdx.x; i < rows; i += blockDim.x)
		c += dlk_k_token_id(targets[i]) >= 0;
	c = dlk_block_sum(c);
	if (threadIdx.x == 0) {
		*count = c;
		*inv = c > 0 ? 1.0 / c : 0.0;
	}
}

__global__ void k_loss_token(const float *z, const float *targets, int k, const double *inv, float *dz,
                             float *rowloss)
{
	const float *row = z + (size_t)blockIdx.x * k;
	int y = dlk_k_token_id(targets[blockIdx.x]);
	if (y < 0 || y >= k) {
		if (threadIdx.x == 0)
			rowloss[blockIdx.x] = 0;
		if (dz)
			for (int j = threadIdx.x; j < k; j += blockDim.x)
				dz[(size_t)blockIdx.x * k + j] = 0;
		return;
	}
	float m = -INFINITY, s = 0, sc = (float)*inv;
	for (int j = threadIdx.x; j < k; j += blockDim.x)
		m = dlk_max_op::apply(m, row[j]);
	m = dlk_block_max(m);
	for (int j = threadIdx.x; j < k; j += blockDim.x)
		s += expf(row[j] - m);
	s = dlk_block_sum(s);
	if (threadIdx.x == 0)
		rowloss[blockIdx.x] = dlk_k_ce_smooth_loss(row[y], m, s, 0, k, 0);
	if (dz)
		for (int j = threadIdx.x; j < k; j += blockDim.x)
			dz[(size_t)blockIdx.x * k + j] = dlk_k_ce_smooth_grad(row[j], m, s, j == y, k, 0, sc);
}

__global__ void k_token_total(const double *partial, const double *count, double *out)
{
	*out = *count > 0 ? partial[0] / *count : 0.0;
}

__global__ void k_loss_rows(const float *rowloss, int batch, double *partial)
{
	double s = 0;
	for (int i = threadIdx.x; i < batch; i += blockDim.x)
		s += rowloss[i];
	s = dlk_block_sum(s);
	if (threadIdx.x == 0)
		partial[0] = s;
}

/* element-wise losses: a grid-stride loop, a partial sum per block */
__global__ void k_loss_elem(int kind, const float *z, const float *t, size_t n, float param, float inv_n, float *dz,
                            double *partial)
{
	double s = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
		float l, g;
		switch (kind) {
		case DLK_K_LOSS_BCE: l = dlk_k_bce_loss(z[i], t[i]); g = dlk_k_bce_grad(z[i], t[i]); break;
		case DLK_K_LOSS_MSE: l = dlk_k_mse_loss(z[i], t[i]); g = dlk_k_mse_grad(z[i], t[i]); break;
		case DLK_K_LOSS_L1: l = dlk_k_l1_loss(z[i], t[i]); g = dlk_k_l1_grad(z[i], t[i]); break;
		default: l = dlk_k_huber_loss(z[i], t[i], param); g = dlk_k_huber_grad(z[i], t[i], param); break;
		}
		s += l;
		if (dz)
			dz[i] = g * inv_n;
	}
	s = dlk_block_sum(s);
	if (threadIdx.x == 0)
		partial[blockIdx.x] = s;
}

__global__ void k_loss_total(const double *partial, int n, double scale, double *out)
{
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += partial[i];
	s = dlk_block_sum(s);
	if (threadIdx.x == 0)
		*out = s * scale;
}

static float cu_loss(int kind, const float *out, const int32_t *labels, const float *targets, int batch, int k,
                     float param, float *dout)
{
	size_t n = (size_t)batch * (size_t)k;
	double loss = NAN;

	if (batch <= 0 || k <= 0)
		return NAN;
	/* the partial sums, the total, and (token_cross_entropy) the count and its inverse */
	if (!g_loss_partial && !(g_loss_partial = (double *)dlk_cu_alloc(sizeof(double) * (LOSS_BLOCKS + 3)))) {
		dlk_cu_notef("loss: out of device memory");
		return NAN;
	}
	if (kind == DLK_K_LOSS_CE || kind == DLK_K_LOSS_TOKEN_CE) {
		if ((size_t)batch > g_loss_rows_cap) {
			dlk_cu_free(g_loss_rows);
			g_loss_rows = (float *)dlk_cu_alloc(sizeof(float) * (size_t)batch);
			g_loss_rows_cap = g_loss_rows ? (size_t)batch : 0;
			if (!g_loss_rows) {
				dlk_cu_notef("loss: out of device memory for %d rows", batch);
				return NAN;
			}
		}
		int threads = (k + 31) / 32 * 32;
		threads = threads > LOSS_THREADS ? LOSS_THREADS : threads;
		if (kind == DLK_K_LOSS_TOKEN_CE) {
			double *count = g_loss_partial + LOSS_BLOCKS + 1, *inv = g_loss_partial + LOSS_BLOCKS + 2;
			k_token_count<<<1, LOSS_THREADS, 0, dlk_cu_stream>>>(targets, batch, count, inv);
			dlk_cu_note("k_token_count", cudaGetLastError());
			k_loss_token<<<batch, threads, 0, dlk_cu_stream>>>(out, targets, k, inv, dout, g_loss_rows);
			dlk_cu_note("k_loss_token", cudaGetLastError());
			k_loss_rows<<<1, LOSS_THREADS, 0, dlk_cu_stream>>>(g_loss_rows, batch, g_loss_partial);
			dlk_cu_note("k_loss_rows", cudaGetLastError());
			k_token_total<<<1, 1, 0, dlk_cu_stream>>>(g_loss_partial, count, g_loss_partial + LOSS_BLOCKS);
		} else {
			k_loss_ce<<<batch, threads, 0, dlk_cu_stream>>>(out, labels, k, param, 1.0f / (float)batch, dout,
			                                                 g_loss_rows);
			dlk_cu_note("k_loss_ce", cudaGetLastError());
			k_loss_rows<<<1, LOSS_THREADS, 0, dlk_cu_stream>>>(g_loss_rows, batch, g_loss_partial);
			dlk_cu_note("k_loss_rows", cudaGetLastError());
			k_loss_total<<<1, 32, 0, dlk_cu_stream>>>(g_loss_partial, 1, 1.0 / batch, g_loss_partial + LOSS_BLOCKS);
		}
	} else {
		size_t want = (n + LOSS_THREADS - 1) / LOSS_THREADS;
		int blocks = want < LOSS_BLOCKS ? (int)want : LOSS_BLOCKS;
		k_loss_elem<<<blocks, LOSS_THREADS, 0, dlk_cu_stream>>>(kind, out, targets, n, param, 1.0f / (float)n,
		                                                         dout, g_loss_partial);
		dlk_cu_note("k_loss_elem", cudaGetLastError());
		k_loss_total<<<1, LOSS_THREADS, 0, dlk_cu_stream>>>(g_loss_partial, blocks, 1.0 / (double)n,
		                                                     g_loss_partial + LOSS_BLOCKS);
	}
	dlk_cu_note("k_loss_total", cudaGetLastError());
	dlk_cu_note("cudaMemcpyAsync", cudaMemcpyAsync(&loss, g_loss_partial + LOSS_BLOCKS, sizeof(loss),
	                                               cudaMemcpyDeviceToHost, dlk_cu_stream));
	dlk_cu_note("cudaStreamSynchronize", cudaStreamSynchronize(dlk_cu_stream));
	return (float)loss;
}

extern "C" void dlk_cu_install_loss(struct dlk_backend *b) { b->loss = cu_loss; }
