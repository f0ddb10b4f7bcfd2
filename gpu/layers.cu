/* The CUDA kernels of the layer kinds of ABI 7 (layer normalisation, GELU, softmax, embedding,
 * upsampling) and of ABI 10 (meanpool: a sequence's masked mean), each the counterpart of the CPU reference in lib/nn/cpu_*.c and checked against it
 * by tests/unit/test_nn_gpu.c. Element-wise math is kernels.h's, shared with the CPU.
 *
 * Every result is the same bits run to run: row reductions use reduce.cuh's fixed-order block
 * reduction, the sums over rows (a layer norm's dw/db, an embedding's repeated ids) have one
 * thread per column walking the rows in order, and upsampling's backward is a gather, so nothing
 * here uses atomics. */
#include <math.h>
#include <stdint.h>

#include "gpu/cuda.h"
#include "gpu/reduce.cuh"

extern "C" {
#include "lib/nn/kernels.h"
}

#define THREADS 256
#define GRID_STRIDE(i, n) \
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)blockDim.x * gridDim.x)

static unsigned blocks_for(size_t n)
{
	size_t b = (n + THREADS - 1) / THREADS;
	return (unsigned)(b < 65535u * 32 ? (b ? b : 1) : 65535u * 32);
}

/* a warp per row for short rows, up to THREADS for long ones */
static int row_threads(int n)
{
	int t = (n + 31) / 32 * 32;
	return t > THREADS ? THREADS : (t < 32 ? 32 : t);
}

/* ---- layer normalisation: one block per row ---- */

__global__ void k_ln_fwd(const float *x, const float *w, const float *b, int n, float eps, float *y, float *mean,
                         float *rstd)
{
	size_t r = blockIdx.x;
	const float *xr = x + r * (size_t)n;
	float *yr = y + r * (size_t)n;
	float s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += xr[i];
	float m = dlk_block_sum(s) / (float)n;
	float v = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float d = xr[i] - m;
		v += d * d;
	}
	float rs = 1.0f / sqrtf(dlk_block_sum(v) / (float)n + eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float h = (xr[i] - m) * rs;
		yr[i] = w ? h * w[i] + b[i] : h;
	}
	if (threadIdx.x == 0) {
		mean[r] = m;
		rstd[r] = rs;
	}
}

__global__ void k_ln_dx(const float *x, const float *w, const float *mean, const float *rstd, const float *dy, int n,
                        float *dx)
{
	size_t r = blockIdx.x, o = r * (size_t)n;
	float m = mean[r], rs = rstd[r], sg = 0, sgh = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float g = w ? dy[o + i] * w[i] : dy[o + i];
		sg += g;
		sgh += g * ((x[o + i] - m) * rs);
	}
	sg = dlk_block_sum(sg) / (float)n;
	sgh = dlk_block_sum(sgh) / (float)n;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float g = w ? dy[o + i] * w[i] : dy[o + i];
		dx[o + i] = rs * (g - sg - (x[o + i] - m) * rs * sgh);
	}
}

__global__ void k_ln_dw(const float *x, const float *mean, const float *rstd, const float *dy, int rows, int n,
                        float *dw, float *db)
{
	GRID_STRIDE(i, (size_t)n)
	{
		float sw = 0, sb = 0;
		for (int r = 0; r < rows; r++) {
			size_t k = (size_t)r * (size_t)n + i;
			sw += dy[k] * ((x[k] - mean[r]) * rstd[r]);
			sb += dy[k];
		}
		if (dw)
			dw[i] = sw;
		if (db)
			db[i] = sb;
	}
}

static void cu_layernorm_forward(const float *x, const float *w, const float *b, int rows, int n, float eps, float *y,
                                 float *mean, float *rstd)
{
	if (rows <= 0 || n <= 0)
		return;
	k_ln_fwd<<<rows, row_threads(n), 0, dlk_cu_stream>>>(x, w, b, n, eps, y, mean, rstd);
	dlk_cu_note("k_ln_fwd", cudaGetLastError());
}

static void cu_layernorm_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                  const float *dy, int rows, int n, float *dx, float *dw, float *db)
{
	if (rows <= 0 || n <= 0)
		return;
	k_ln_dx<<<rows, row_threads(n), 0, dlk_cu_stream>>>(x, w, mean, rstd, dy, n, dx);
	dlk_cu_note("k_ln_dx", cudaGetLastError());
	if (dw || db) {
		k_ln_dw<<<blocks_for((size_t)n), THREADS, 0, dlk_cu_stream>>>(x, mean, rstd, dy, rows, n, dw, db);
		dlk_cu_note("k_ln_dw", cudaGetLastError());
	}
}

/* ---- GELU ---- */

__global__ void k_gelu_fwd(int approx, const float *x, float *y, size_t n) { GRID_STRIDE(i, n) y[i] = dlk_k_gelu(approx, x[i]); }
__global__ void k_gelu_bwd(int approx, const float *x, const float *dy, float *dx, size_t n)
{
	GRID_STRIDE(i, n) dx[i] = dlk_k_gelu_grad(approx, x[i], dy[i]);
}

static void cu_gelu_forward(int approx, const float *x, float *y, size_t n)
{
	if (!n)
		return;
	k_gelu_fwd<<<blocks_for(n), THREADS, 0, dlk_cu_stream>>>(approx, x, y, n);
	dlk_cu_note("k_gelu_fwd", cudaGetLastError());
}

static void cu_gelu_backward(int approx, const float *x, const float *dy, float *dx, size_t n)
{
	if (!n)
		return;
	k_gelu_bwd<<<blocks_for(n), THREADS, 0, dlk_cu_stream>>>(approx, x, dy, dx, n);
	dlk_cu_note("k_gelu_bwd", cudaGetLastError());
}

/* ---- softmax over the last axis: one block per row ---- */

__global__ void k_softmax_fwd(const float *x, float *y, int n)
{
	size_t o = (size_t)blockIdx.x * (size_t)n;
	float m = -INFINITY;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		if (dlk_k_max_takes(x[o + i], m))
			m = x[o + i];
	m = dlk_block_max(m);
	float s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += expf(x[o + i] - m);
	float inv = 1.0f / dlk_block_sum(s);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		y[o + i] = expf(x[o + i] - m) * inv;
}

__global__ void k_softmax_bwd(const float *y, const float *dy, float *dx, int n)
{
	size_t o = (size_t)blockIdx.x * (size_t)n;
	float s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += dy[o + i] * y[o + i];
	s = dlk_block_sum(s);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		dx[o + i] = y[o + i] * (dy[o + i] - s);
}

static void cu_softmax_forward(const float *x, float *y, int rows, int n)
{
	if (rows <= 0 || n <= 0)
		return;
	k_softmax_fwd<<<rows, row_threads(n), 0, dlk_cu_stream>>>(x, y, n);
	dlk_cu_note("k_softmax_fwd", cudaGetLastError());
}

static void cu_softmax_backward(const float *y, const float *dy, float *dx, int rows, int n)
{
	if (rows <= 0 || n <= 0)
		return;
	k_softmax_bwd<<<rows, row_threads(n), 0, dlk_cu_stream>>>(y, dy, dx, n);
	dlk_cu_note("k_softmax_bwd", cudaGetLastError());
}

/* ---- embedding ---- */

__global__ void k_emb_fwd(const float *ids, const float *table, size_t total, int vocab, int dim, float *y)
{
	GRID_STRIDE(k, total)
	{
		size_t i = k / (size_t)dim, c = k % (size_t)dim;
		int id = dlk_k_token(ids[i], vocab);
		y[k] = id >= 0 ? table[(size_t)id * dim + c] : 0.0f;
	}
}

/* one thread per column, walking the ids in order: repeated ids add as on the CPU, no atomics */
__global__ void k_emb_bwd(const float *ids, const float *dy, int count, int vocab, int dim, float *dtable)
{
	GRID_STRIDE(c, (size_t)dim)
	{
		for (int i = 0; i < count; i++) {
			int id = dlk_k_token(ids[i], vocab);
			if (id >= 0)
				dtable[(size_t)id * dim + c] += dy[(size_t)i * dim + c];
		}
	}
}

static void cu_embedding_forward(const float *ids, const float *table, int count, int vocab, int dim, float *y)
{
	size_t total = (size_t)(count > 0 ? count : 0) * (size_t)(dim > 0 ? dim : 0);
	if (!total)
		return;
	k_emb_fwd<<<blocks_for(total), THREADS, 0, dlk_cu_stream>>>(ids, table, total, vocab, dim, y);
	dlk_cu_note("k_emb_fwd", cudaGetLastError());
}

static void cu_embedding_backward(const float *ids, const float *dy, int count, int vocab, int dim, float *dtable)
{
	if (count <= 0 || dim <= 0)
		return;
	/* small blocks: dim columns are the only parallelism, spread them over many SMs */
	unsigned blocks = (unsigned)((dim + 31) / 32);
	k_emb_bwd<<<blocks, 32, 0, dlk_cu_stream>>>(ids, dy, count, vocab, dim, dtable);
	dlk_cu_note("k_emb_bwd", cudaGetLastError());
}

/* ---- upsampling: both directions gather (kernels.h's per-axis weights) ---- */

__global__ void k_up_fwd(const float *x, size_t total, int h, int w, int s, int mode, float *y)
{
	int oh = h * s, ow = w * s;
	GRID_STRIDE(k, total)
	{
		int ox = (int)(k % (size_t)ow), oy = (int)(k / (size_t)ow % (size_t)oh);
		size_t p = k / ((size_t)oh * ow);
		const float *xp = x + p * (size_t)h * w;
		int y0, y1, x0, x1;
		float ly, lx;
		dlk_k_upsample_src(mode, oy, h, s, &y0, &y1, &ly);
		dlk_k_upsample_src(mode, ox, w, s, &x0, &x1, &lx);
		float top = (1.0f - lx) * xp[y0 * w + x0] + lx * xp[y0 * w + x1];
		float bot = (1.0f - lx) * xp[y1 * w + x0] + lx * xp[y1 * w + x1];
		y[k] = (1.0f - ly) * top + ly * bot;
	}
}

__global__ void k_up_bwd(const float *dy, size_t total, int h, int w, int s, int mode, float *dx)
{
	int oh = h * s, ow = w * s;
	GRID_STRIDE(k, total)
	{
		int ix = (int)(k % (size_t)w), iy = (int)(k / (size_t)w % (size_t)h);
		size_t p = k / ((size_t)h * w);
		const float *d = dy + p * (size_t)oh * ow;
		int ylo, yhi, xlo, xhi;
		dlk_k_upsample_readers(iy, h, s, &ylo, &yhi);
		dlk_k_upsample_readers(ix, w, s, &xlo, &xhi);
		float acc = 0;
		for (int oy = ylo; oy < yhi; oy++) {
			float wy = dlk_k_upsample_weight(mode, oy, iy, h, s);
			if (wy == 0.0f)
				continue;
			float row = 0;
			for (int ox = xlo; ox < xhi; ox++)
				row += dlk_k_upsample_weight(mode, ox, ix, w, s) * d[oy * ow + ox];
			acc += wy * row;
		}
		dx[k] = acc;
	}
}

static void cu_upsample_forward(const float *x, int planes, int h, int w, int scale, int mode, float *y)
{
	if (planes <= 0 || h <= 0 || w <= 0 || scale <= 0)
		return;
	size_t total = (size_t)planes * h * scale * w * scale;
	k_up_fwd<<<blocks_for(total), THREADS, 0, dlk_cu_stream>>>(x, total, h, w, scale, mode, y);
	dlk_cu_note("k_up_fwd", cudaGetLastError());
}

static void cu_upsample_backward(const float *dy, int planes, int h, int w, int scale, int mode, float *dx)
{
	if (planes <= 0 || h <= 0 || w <= 0 || scale <= 0)
		return;
	size_t total = (size_t)planes * h * w;
	k_up_bwd<<<blocks_for(total), THREADS, 0, dlk_cu_stream>>>(dy, total, h, w, scale, mode, dx);
	dlk_cu_note("k_up_bwd", cudaGetLastError());
}

/* ---- meanpool (ABI 10): one thread per (sample, column) sums the kept positions in the order of
 * t and divides by their count, as lib/nn/cpu_seqpool.c: the same bits ---- */

__device__ static int seq_kept_count(const float *ids, float pad, size_t b, int T)
{
	int n = 0;
	for (int t = 0; t < T; t++)
		n += dlk_k_seq_kept(ids, pad, b * (size_t)T + (size_t)t);
	return n;
}

__global__ void k_seqpool_fwd(const float *x, const float *ids, float pad, size_t total, int T, int D, float *y)
{
	GRID_STRIDE(k, total)
	{
		size_t b = k / (size_t)D, d = k % (size_t)D;
		int n = seq_kept_count(ids, pad, b, T);
		float sum = 0.0f;
		for (int t = 0; t < T; t++) {
			size_t at = b * (size_t)T + (size_t)t;
			if (dlk_k_seq_kept(ids, pad, at))
				sum += x[at * D + d];
		}
		y[k] = n ? sum / (float)n : 0.0f;
	}
}

__global__ void k_seqpool_bwd(const float *dy, const float *ids, float pad, size_t total, int T, int D, float *dx)
{
	GRID_STRIDE(k, total)
	{
		size_t d = k % (size_t)D, at = k / (size_t)D, b = at / (size_t)T;
		dx[k] = dlk_k_seq_kept(ids, pad, at) ? dy[b * D + d] / (float)seq_kept_count(ids, pad, b, T) : 0.0f;
	}
}

static void cu_seqpool_forward(const float *x, const float *ids, float pad, int batch, int T, int D, float *y)
{
	if (batch <= 0 || D <= 0)
		return;
	size_t total = (size_t)batch * D;
	k_seqpool_fwd<<<blocks_for(total), THREADS, 0, dlk_cu_stream>>>(x, ids, pad, total, T, D, y);
	dlk_cu_note("k_seqpool_fwd", cudaGetLastError());
}

static void cu_seqpool_backward(const float *dy, const float *ids, float pad, int batch, int T, int D, float *dx)
{
	if (batch <= 0 || T <= 0 || D <= 0)
		return;
	size_t total = (size_t)batch * T * D;
	k_seqpool_bwd<<<blocks_for(total), THREADS, 0, dlk_cu_stream>>>(dy, ids, pad, total, T, D, dx);
	dlk_cu_note("k_seqpool_bwd", cudaGetLastError());
}

extern "C" void dlk_cu_install_layers(struct dlk_backend *b)
{
	b->layernorm_forward = cu_layernorm_forward;
	b->layernorm_backward = cu_layernorm_backward;
	b->gelu_forward = cu_gelu_forward;
	b->gelu_backward = cu_gelu_backward;
	b->softmax_forward = cu_softmax_forward;
	b->softmax_backward = cu_softmax_backward;
	b->embedding_forward = cu_embedding_forward;
	b->embedding_backward = cu_embedding_backward;
	b->upsample_forward = cu_upsample_forward;
	b->upsample_backward = cu_upsample_backward;
	b->seqpool_forward = cu_seqpool_forward;
	b->seqpool_backward = cu_seqpool_backward;
}
