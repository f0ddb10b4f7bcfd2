/* The CUDA kernels of batch normalisation (ABI 8), the counterpart of lib/nn/cpu_batchnorm.c,
 * checked against it by tests/unit/test_nn_gpu.c: one block per channel, whose sums over the
 * batch and hw use reduce.cuh's fixed-order block reduction (the same bits run to run, no
 * atomics). The CPU sums in double and these in float: they agree within the SUMS tolerance. */
#include <math.h>
#include <stdint.h>

#include "gpu/cuda.h"
#include "gpu/reduce.cuh"

#define THREADS 256
/* element e of channel ch: sample e / hw, position e % hw */
#define AT(e) (((size_t)((e) / hw) * (size_t)c + (size_t)ch) * (size_t)hw + (size_t)((e) % hw))

__global__ void k_bn_fwd(const float *x, const float *w, const float *b, int batch, int c, int hw, float eps,
                         float momentum, int training, float *rm, float *rv, float *y, float *mean, float *rstd)
{
	int ch = blockIdx.x;
	size_t n = (size_t)batch * (size_t)hw;
	float m, var;
	if (training) {
		float s = 0, v = 0;
		for (size_t e = threadIdx.x; e < n; e += blockDim.x)
			s += x[AT(e)];
		m = dlk_block_sum(s) / (float)n;
		for (size_t e = threadIdx.x; e < n; e += blockDim.x) {
			float d = x[AT(e)] - m;
			v += d * d;
		}
		float sq = dlk_block_sum(v);
		var = sq / (float)n;
		if (threadIdx.x == 0) { /* nothing else of this block reads them in training */
			rm[ch] = (1.0f - momentum) * rm[ch] + momentum * m;
			rv[ch] = (1.0f - momentum) * rv[ch] + momentum * (n > 1 ? sq / (float)(n - 1) : var);
		}
	} else {
		m = rm[ch];
		var = rv[ch];
	}
	float rs = 1.0f / sqrtf(var + eps), g = w ? w[ch] : 1.0f, bb = b ? b[ch] : 0.0f;
	for (size_t e = threadIdx.x; e < n; e += blockDim.x)
		y[AT(e)] = (x[AT(e)] - m) * rs * g + bb;
	if (threadIdx.x == 0 && mean) {
		mean[ch] = m;
		rstd[ch] = rs;
	}
}

__global__ void k_bn_count(float *nb) { nb[0] += 1.0f; }

__global__ void k_bn_bwd(const float *x, const float *w, const float *mean, const float *rstd, const float *dy,
                         int batch, int c, int hw, float *dx, float *dw, float *db)
{
	int ch = blockIdx.x;
	size_t n = (size_t)batch * (size_t)hw;
	float m = mean[ch], rs = rstd[ch], g = w ? w[ch] : 1.0f, sdy = 0, sdyx = 0;
	for (size_t e = threadIdx.x; e < n; e += blockDim.x) {
		sdy += dy[AT(e)];
		sdyx += dy[AT(e)] * ((x[AT(e)] - m) * rs);
	}
	sdy = dlk_block_sum(sdy);
	sdyx = dlk_block_sum(sdyx);
	if (threadIdx.x == 0) {
		if (db)
			db[ch] = sdy;
		if (dw)
			dw[ch] = sdyx;
	}
	float a = sdy / (float)n, bq = sdyx / (float)n, s = g * rs;
	for (size_t e = threadIdx.x; e < n; e += blockDim.x)
		dx[AT(e)] = s * (dy[AT(e)] - a - (x[AT(e)] - m) * rs * bq);
}

static void cu_batchnorm_forward(const float *x, const float *w, const float *b, int batch, int c, int hw, float eps,
                                 float momentum, int training, float *running_mean, float *running_var,
                                 float *num_batches, float *y, float *mean, float *rstd)
{
	if (batch <= 0 || c <= 0 || hw <= 0)
		return;
	k_bn_fwd<<<c, THREADS, 0, dlk_cu_stream>>>(x, w, b, batch, c, hw, eps, momentum, training, running_mean,
	                                           running_var, y, mean, rstd);
	dlk_cu_note("k_bn_fwd", cudaGetLastError());
	if (training && num_batches) {
		k_bn_count<<<1, 1, 0, dlk_cu_stream>>>(num_batches);
		dlk_cu_note("k_bn_count", cudaGetLastError());
	}
}

static void cu_batchnorm_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                  const float *dy, int batch, int c, int hw, float *dx, float *dw, float *db)
{
	if (batch <= 0 || c <= 0 || hw <= 0)
		return;
	k_bn_bwd<<<c, THREADS, 0, dlk_cu_stream>>>(x, w, mean, rstd, dy, batch, c, hw, dx, dw, db);
	dlk_cu_note("k_bn_bwd", cudaGetLastError());
}

extern "C" void dlk_cu_install_batchnorm(struct dlk_backend *b)
{
	b->batchnorm_forward = cu_batchnorm_forward;
	b->batchnorm_backward = cu_batchnorm_backward;
}
