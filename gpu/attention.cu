/* Attention on the GPU (backend.h's attention_forward, attention_backward, rotary), the
 * counterpart of lib/nn/cpu_attention.c and checked against it by tests/unit/test_nn_gpu.c.
 *
 * Flash-attention style: no T x T matrix in global memory. The forward has one thread block per
 * (query tile of TILE rows, head, sample) and one thread per query row; the tile's keys and values
 * are staged in shared memory TILE rows at a time and each thread keeps its row's running maximum,
 * sum and output (online softmax), then writes the output and the row's log-sum-exp. The backward
 * recomputes the weights from q, k and the log-sum-exp in two kernels: one thread per key row
 * summing its dk and dv over the query tiles, one thread per query row summing its dq over the key
 * tiles. Every sum runs in a fixed order (no atomics), so results are the same bits run to run.
 * Masking, the dropout mask and the rotary angles are kernels_attn.h's, shared with the CPU.
 *
 * This is the first, plain kernel: a head width up to ATT_HD_MAX, per-thread arrays in local
 * memory; tensor-core tiles (and cuDNN's fused attention where present) are the next step. */
#include <math.h>
#include <stdint.h>

#include "gpu/cuda.h"

extern "C" {
#include "lib/nn/kernels_attn.h"
}

#define TILE 32
#define ATT_HD_MAX 128

__device__ static inline int att_masked(const struct dlk_attn_shape s, int b, int i, int j)
{
	return (s.causal && j > i) || (s.ids && s.ids[(size_t)b * s.T + j] == s.pad);
}

__global__ void k_att_fwd(struct dlk_attn_shape s, const float *qkv, float *out, float *lse)
{
	extern __shared__ float sm[];
	int hd = s.hd, D = s.heads * hd, ld = 3 * D, h = blockIdx.y, b = blockIdx.z;
	int i0 = blockIdx.x * TILE, i = i0 + threadIdx.x;
	float *Ks = sm, *Vs = sm + TILE * hd;
	float q[ATT_HD_MAX], acc[ATT_HD_MAX], sc[TILE];
	float m = -INFINITY, l = 0.0f;
	int row = i < s.T;

	if (row)
		for (int d = 0; d < hd; d++) {
			q[d] = qkv[((size_t)b * s.T + i) * ld + h * hd + d];
			acc[d] = 0.0f;
		}
	int last = s.causal ? min(s.T, i0 + TILE) : s.T;
	for (int j0 = 0; j0 < last; j0 += TILE) {
		int nk = min(TILE, s.T - j0);
		__syncthreads();
		for (int e = threadIdx.x; e < nk * hd; e += blockDim.x) {
			int c = e / hd, d = e % hd;
			const float *r = qkv + ((size_t)b * s.T + j0 + c) * ld + h * hd + d;
			Ks[c * hd + d] = r[D];
			Vs[c * hd + d] = r[2 * D];
		}
		__syncthreads();
		if (!row)
			continue;
		float mx = m;
		for (int c = 0; c < nk; c++) {
			float v = -INFINITY;
			if (!att_masked(s, b, i, j0 + c)) {
				v = 0.0f;
				for (int d = 0; d < hd; d++)
					v += q[d] * Ks[c * hd + d];
				v *= s.scale;
			}
			sc[c] = v;
			mx = v > mx ? v : mx;
		}
		if (mx == -INFINITY)
			continue;
		float alpha = expf(m - mx), sum = 0.0f;
		for (int d = 0; d < hd; d++)
			acc[d] *= alpha;
		for (int c = 0; c < nk; c++) {
			float p = expf(sc[c] - mx);
			sum += p;
			if (s.dropout > 0.0f)
				p *= dlk_k_attn_drop(s.seed, s.offset, b, h, i, j0 + c, s.heads, s.T, s.dropout);
			for (int d = 0; d < hd; d++)
				acc[d] += p * Vs[c * hd + d];
		}
		l = l * alpha + sum;
		m = mx;
	}
	if (!row)
		return;
	float inv = l > 0.0f ? 1.0f / l : 0.0f;
	for (int d = 0; d < hd; d++)
		out[((size_t)b * s.T + i) * D + h * hd + d] = acc[d] * inv;
	lse[((size_t)b * s.heads + h) * s.T + i] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/* one thread per key row: dk and dv over the query tiles that see it, in query order */
__global__ void k_att_bwd_kv(struct dlk_attn_shape s, const float *qkv, const float *out, const float *lse,
                             const float *dout, float *dqkv)
{
	extern __shared__ float sm[];
	int hd = s.hd, D = s.heads * hd, ld = 3 * D, h = blockIdx.y, b = blockIdx.z;
	int j0 = blockIdx.x * TILE, j = j0 + threadIdx.x;
	float *Qs = sm, *Gs = sm + TILE * hd, *Ls = Gs + TILE * hd, *Rs = Ls + TILE;
	float k[ATT_HD_MAX], v[ATT_HD_MAX], dk[ATT_HD_MAX], dv[ATT_HD_MAX];
	int row = j < s.T;

	if (row)
		for (int d = 0; d < hd; d++) {
			const float *r = qkv + ((size_t)b * s.T + j) * ld + h * hd + d;
			k[d] = r[D];
			v[d] = r[2 * D];
			dk[d] = dv[d] = 0.0f;
		}
	for (int i0 = s.causal ? j0 : 0; i0 < s.T; i0 += TILE) {
		int nq = min(TILE, s.T - i0);
		__syncthreads();
		for (int e = threadIdx.x; e < nq * hd; e += blockDim.x) {
			int r = e / hd, d = e % hd;
			Qs[r * hd + d] = qkv[((size_t)b * s.T + i0 + r) * ld + h * hd + d];
			Gs[r * hd + d] = dout[((size_t)b * s.T + i0 + r) * D + h * hd + d];
		}
		if (threadIdx.x < nq) { /* each query row's sum of dout * out, and its log-sum-exp */
			int r = threadIdx.x;
			const float *o = out + ((size_t)b * s.T + i0 + r) * D + h * hd;
			const float *g = dout + ((size_t)b * s.T + i0 + r) * D + h * hd;
			float t = 0.0f;
			for (int d = 0; d < hd; d++)
				t += o[d] * g[d];
			Rs[r] = t;
			Ls[r] = lse[((size_t)b * s.heads + h) * s.T + i0 + r];
		}
		__syncthreads();
		if (!row)
			continue;
		for (int r = 0; r < nq; r++) {
			int i = i0 + r;
			if (Ls[r] == -INFINITY || att_masked(s, b, i, j))
				continue;
			float sv = 0.0f, dp = 0.0f;
			for (int d = 0; d < hd; d++) {
				sv += Qs[r * hd + d] * k[d];
				dp += Gs[r * hd + d] * v[d];
			}
			float p = expf(sv * s.scale - Ls[r]);
			float md = s.dropout > 0.0f ? dlk_k_attn_drop(s.seed, s.offset, b, h, i, j, s.heads, s.T, s.dropout) : 1.0f;
			float ds = p * (dp * md - Rs[r]);
			for (int d = 0; d < hd; d++) {
				dv[d] += p * md * Gs[r * hd + d];
				dk[d] += ds * s.scale * Qs[r * hd + d];
			}
		}
	}
	if (!row)
		return;
	float *r = dqkv + ((size_t)b * s.T + j) * ld + h * hd;
	for (int d = 0; d < hd; d++) {
		r[D + d] = dk[d];
		r[2 * D + d] = dv[d];
	}
}

/* one thread per query row: dq over the key tiles it sees, in key order */
__global__ void k_att_bwd_q(struct dlk_attn_shape s, const float *qkv, const float *out, const float *lse,
                            const float *dout, float *dqkv)
{
	extern __shared__ float sm[];
	int hd = s.hd, D = s.heads * hd, ld = 3 * D, h = blockIdx.y, b = blockIdx.z;
	int i0 = blockIdx.x * TILE, i = i0 + threadIdx.x;
	float *Ks = sm, *Vs = sm + TILE * hd;
	float q[ATT_HD_MAX], g[ATT_HD_MAX], dq[ATT_HD_MAX];
	float L = -INFINITY, R = 0.0f;
	int row = i < s.T;

	if (row) {
		for (int d = 0; d < hd; d++) {
			q[d] = qkv[((size_t)b * s.T + i) * ld + h * hd + d];
			g[d] = dout[((size_t)b * s.T + i) * D + h * hd + d];
			R += out[((size_t)b * s.T + i) * D + h * hd + d] * g[d];
			dq[d] = 0.0f;
		}
		L = lse[((size_t)b * s.heads + h) * s.T + i];
	}
	int last = s.causal ? min(s.T, i0 + TILE) : s.T;
	for (int j0 = 0; j0 < last; j0 += TILE) {
		int nk = min(TILE, s.T - j0);
		__syncthreads();
		for (int e = threadIdx.x; e < nk * hd; e += blockDim.x) {
			int c = e / hd, d = e % hd;
			const float *r = qkv + ((size_t)b * s.T + j0 + c) * ld + h * hd + d;
			Ks[c * hd + d] = r[D];
			Vs[c * hd + d] = r[2 * D];
		}
		__syncthreads();
		if (!row || L == -INFINITY)
			continue;
		for (int c = 0; c < nk; c++) {
			int j = j0 + c;
			if (att_masked(s, b, i, j))
				continue;
			float sv = 0.0f, dp = 0.0f;
			for (int d = 0; d < hd; d++) {
				sv += q[d] * Ks[c * hd + d];
				dp += g[d] * Vs[c * hd + d];
			}
			float p = expf(sv * s.scale - L);
			float md = s.dropout > 0.0f ? dlk_k_attn_drop(s.seed, s.offset, b, h, i, j, s.heads, s.T, s.dropout) : 1.0f;
			float ds = p * (dp * md - R);
			for (int d = 0; d < hd; d++)
				dq[d] += ds * s.scale * Ks[c * hd + d];
		}
	}
	if (!row)
		return;
	for (int d = 0; d < hd; d++)
		dqkv[((size_t)b * s.T + i) * ld + h * hd + d] = dq[d];
}

static int att_fits(const struct dlk_attn_shape *s)
{
	if (s->hd > ATT_HD_MAX) {
		dlk_cu_notef("attention: a head width of %d is more than the CUDA kernel's %d", s->hd, ATT_HD_MAX);
		return 0;
	}
	return s->batch > 0 && s->T > 0 && s->heads > 0 && s->hd > 0;
}

static void cu_attention_forward(const struct dlk_attn_shape *s, const float *qkv, float *out, float *lse)
{
	if (!att_fits(s))
		return;
	dim3 grid((unsigned)((s->T + TILE - 1) / TILE), (unsigned)s->heads, (unsigned)s->batch);
	size_t shm = sizeof(float) * 2 * TILE * (size_t)s->hd;
	k_att_fwd<<<grid, TILE, shm, dlk_cu_stream>>>(*s, qkv, out, lse);
	dlk_cu_note("k_att_fwd", cudaGetLastError());
}

static void cu_attention_backward(const struct dlk_attn_shape *s, const float *qkv, const float *out, const float *lse,
                                  const float *dout, float *dqkv)
{
	if (!att_fits(s))
		return;
	dim3 grid((unsigned)((s->T + TILE - 1) / TILE), (unsigned)s->heads, (unsigned)s->batch);
	size_t shm = sizeof(float) * (2 * TILE * (size_t)s->hd + 2 * TILE);
	k_att_bwd_kv<<<grid, TILE, shm, dlk_cu_stream>>>(*s, qkv, out, lse, dout, dqkv);
	dlk_cu_note("k_att_bwd_kv", cudaGetLastError());
	k_att_bwd_q<<<grid, TILE, shm, dlk_cu_stream>>>(*s, qkv, out, lse, dout, dqkv);
	dlk_cu_note("k_att_bwd_q", cudaGetLastError());
}

__global__ void k_rotary(float *qkv, size_t total, int T, int heads, int hd, int pos0, int inverse)
{
	int half = hd / 2, D = heads * hd;
	for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)blockDim.x * gridDim.x) {
		int k = (int)(e % (size_t)half);
		int p = (int)(e / (size_t)half % (size_t)(2 * heads));
		size_t r = e / ((size_t)half * 2 * heads);
		float c, sn;
		dlk_k_rotary_cs(pos0 + (int)(r % (size_t)T), k, hd, &c, &sn);
		if (inverse)
			sn = -sn;
		float *x = qkv + r * 3 * (size_t)D + (size_t)p * hd;
		float x1 = x[k], x2 = x[k + half];
		x[k] = x1 * c - x2 * sn;
		x[k + half] = x2 * c + x1 * sn;
	}
}

static void cu_rotary(float *qkv, int batch, int T, int heads, int hd, int pos0, int inverse)
{
	if (batch <= 0 || T <= 0 || hd < 2)
		return;
	size_t total = (size_t)batch * T * 2 * heads * (hd / 2);
	size_t blocks = (total + 255) / 256;
	k_rotary<<<(unsigned)(blocks < 65535u * 32 ? blocks : 65535u * 32), 256, 0, dlk_cu_stream>>>(qkv, total, T, heads,
	                                                                                              hd, pos0, inverse);
	dlk_cu_note("k_rotary", cudaGetLastError());
}

extern "C" void dlk_cu_install_attention(struct dlk_backend *b)
{
	b->attention_forward = cu_attention_forward;
	b->attention_backward = cu_attention_backward;
	b->rotary = cu_rotary;
}
