/* Multi-head self-attention, the CPU reference (backend.h's attention_forward, attention_backward,
 * rotary), flash-attention style: the keys are taken in blocks of ATT_BK with an online softmax,
 * so no more than an ATT_BQ x ATT_BK block of weights per head exists at a time (64 x 64 floats,
 * 16 KiB: it stays in L1/L2), and the backward recomputes the weights from q, k and each row's
 * log-sum-exp that the forward stored.
 *
 * Work is cut into units of (sample, head, block of ATT_BQ queries) for the forward, and of
 * (sample, head) for the backward, which visits each (query block, key block) pair once: the
 * weights and dS it recomputes there give dv and dk of the key block and dq of the query block
 * (accumulated straight into dqkv, dq over key blocks in key order, dk and dv over query blocks
 * in query order). Each unit writes its own rows and sums in a fixed order, so the results are
 * the same bits at any thread count. The block products are single-threaded OpenBLAS GEMMs (the
 * CPU backend runs OpenBLAS single-threaded; see cpu.c); the exponentials are kernels.h's
 * dlk_k_exp, whose loops vectorise (libm's expf is a call per element). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/backend.h"
#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/nn/kernels_attn.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"

#define ATT_BQ 64
#define ATT_BK 64

struct att_job {
	const struct dlk_attn_shape *s;
	const float *qkv, *out, *lse, *dout;
	float *o, *l, *dqkv;
	int nqb, nkb;
};

/* the logits block S [nq, nk] = q k^T * scale for queries i0.. and keys j0.., masked with -inf */
static void logits(const struct att_job *j, int b, int h, int i0, int nq, int j0, int nk, float *S)
{
	const struct dlk_attn_shape *s = j->s;
	int D = s->heads * s->hd, ld = 3 * D;
	const float *q = j->qkv + ((size_t)b * s->T + i0) * ld + h * s->hd;
	const float *k = j->qkv + ((size_t)b * s->T + j0) * ld + D + h * s->hd;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, s->hd, s->scale, q, ld, k, ld, 0.0f, S, ATT_BK);
	if (s->ids) /* padded keys: their whole column */
		for (int c = 0; c < nk; c++)
			if (s->ids[(size_t)b * s->T + j0 + c] == s->pad)
				for (int r = 0; r < nq; r++)
					S[r * ATT_BK + c] = -INFINITY;
	if (s->causal && j0 + nk - 1 > i0) /* keys after the query: from column i0 + r - j0 + 1 on */
		for (int r = 0; r < nq; r++)
			for (int c = i0 + r - j0 + 1 > 0 ? i0 + r - j0 + 1 : 0; c < nk; c++)
				S[r * ATT_BK + c] = -INFINITY;
}

/* row[c] = exp(row[c] - m) for c < n, in a loop that vectorises */
DLK_CPU_CLONES static void exp_shifted(float *restrict row, int n, float m)
{
	for (int c = 0; c < n; c++)
		row[c] = dlk_k_exp(row[c] - m);
}

/* A row's max and sum in ATT_LANES interleaved lanes (element c in lane c % ATT_LANES), the
 * lanes then combined in order: a fixed order (the same bits at every vector width) in loops that
 * vectorise, where one running max or sum is a chain of dependent scalar operations. */
#define ATT_LANES 16

DLK_CPU_CLONES static float row_max(const float *restrict row, int n, float m)
{
	float a[ATT_LANES];
	int c = 0;
	for (int l = 0; l < ATT_LANES; l++)
		a[l] = m;
	for (; c + ATT_LANES <= n; c += ATT_LANES)
		for (int l = 0; l < ATT_LANES; l++)
			a[l] = row[c + l] > a[l] ? row[c + l] : a[l];
	for (; c < n; c++)
		m = row[c] > m ? row[c] : m;
	for (int l = 0; l < ATT_LANES; l++)
		m = a[l] > m ? a[l] : m;
	return m;
}

DLK_CPU_CLONES static float row_sum(const float *restrict row, int n)
{
	float a[ATT_LANES] = { 0 }, t = 0;
	int c = 0;
	for (; c + ATT_LANES <= n; c += ATT_LANES)
		for (int l = 0; l < ATT_LANES; l++)
			a[l] += row[c + l];
	for (int l = 0; c + l < n; l++)
		a[l] += row[c + l];
	for (int l = 0; l < ATT_LANES; l++)
		t += a[l];
	return t;
}

/* the key blocks query block [i0, i0 + nq) sees */
static int key_blocks(const struct att_job *j, int i0, int nq)
{
	if (!j->s->causal)
		return j->nkb;
	return (i0 + nq - 1) / ATT_BK + 1;
}

static void fwd_unit(void *ctx, int unit, int nunits)
{
	const struct att_job *j = ctx;
	const struct dlk_attn_shape *s = j->s;
	int qb = unit % j->nqb, h = unit / j->nqb % s->heads, b = unit / j->nqb / s->heads;
	int hd = s->hd, D = s->heads * hd, ld = 3 * D, i0 = qb * ATT_BQ;
	int nq = s->T - i0 < ATT_BQ ? s->T - i0 : ATT_BQ;
	float *S = xmalloc(sizeof(float) * ((size_t)ATT_BQ * ATT_BK + (size_t)ATT_BQ * hd + 2 * ATT_BQ));
	float *acc = S + ATT_BQ * ATT_BK, *m = acc + (size_t)ATT_BQ * hd, *l = m + ATT_BQ;
	(void)nunits;

	for (int r = 0; r < nq; r++)
		m[r] = -INFINITY, l[r] = 0.0f;
	memset(acc, 0, sizeof(float) * (size_t)nq * hd);
	for (int kb = 0; kb < key_blocks(j, i0, nq); kb++) {
		int j0 = kb * ATT_BK, nk = s->T - j0 < ATT_BK ? s->T - j0 : ATT_BK;
		logits(j, b, h, i0, nq, j0, nk, S);
		for (int r = 0; r < nq; r++) {
			float *row = S + r * ATT_BK, mx = row_max(row, nk, m[r]);
			if (mx == -INFINITY) { /* every key so far masked: nothing to add */
				for (int c = 0; c < nk; c++)
					row[c] = 0.0f;
				continue;
			}
			float alpha = expf(m[r] - mx), sum = 0.0f; /* m = -inf: alpha 0 */
			exp_shifted(row, nk, mx);
			sum = row_sum(row, nk);
			l[r] = l[r] * alpha + sum;
			m[r] = mx;
			for (int d = 0; d < hd; d++)
				acc[r * hd + d] *= alpha;
			if (s->dropout > 0.0f)
				for (int c = 0; c < nk; c++)
					row[c] *= dlk_k_attn_drop(s->seed, s->offset, b, h, i0 + r, j0 + c, s->heads, s->T, s->dropout);
		}
		const float *v = j->qkv + ((size_t)b * s->T + j0) * ld + 2 * D + h * hd;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hd, nk, 1.0f, S, ATT_BK, v, ld, 1.0f, acc, hd);
	}
	for (int r = 0; r < nq; r++) {
		float *o = j->o + ((size_t)b * s->T + i0 + r) * D + h * hd, inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
		for (int d = 0; d < hd; d++)
			o[d] = acc[r * hd + d] * inv;
		j->l[((size_t)b * s->heads + h) * s->T + i0 + r] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
	}
	free(S);
}

void dlk_cpu_attention_forward(const struct dlk_attn_shape *s, const float *qkv, float *out, float *lse)
{
	struct att_job j = { .s = s, .qkv = qkv, .o = out, .l = lse };
	if (s->batch <= 0 || s->T <= 0)
		return;
	j.nqb = (s->T + ATT_BQ - 1) / ATT_BQ;
	j.nkb = (s->T + ATT_BK - 1) / ATT_BK;
	dlk_parallel_for(s->batch * s->heads * j.nqb, fwd_unit, &j);
}

/* dS = P * (dP - Dr) along a row, in a loop that vectorises */
DLK_CPU_CLONES static void ds_row(const float *restrict P, float *restrict dS, int n, float dr)
{
	for (int c = 0; c < n; c++)
		dS[c] = P[c] * (dS[c] - dr);
}

/* For queries [i0, i0 + nq) against keys [j0, j0 + nk) of (b, h): P (the weights, undropped,
 * into S) and dS = P * (dP - Dr) into dS, where dP = (dout v^T) * the dropout mask and Dr the
 * rows' sum of dout * out. */
static void grads_block(const struct att_job *j, int b, int h, int i0, int nq, int j0, int nk, const float *Dr, float *S,
                        float *dS)
{
	const struct dlk_attn_shape *s = j->s;
	int hd = s->hd, D = s->heads * hd, ld = 3 * D;
	const float *lse = j->lse + ((size_t)b * s->heads + h) * s->T + i0;
	logits(j, b, h, i0, nq, j0, nk, S);
	for (int r = 0; r < nq; r++) {
		if (lse[r] == -INFINITY) /* every key masked: no weights */
			memset(S + r * ATT_BK, 0, sizeof(float) * (size_t)nk);
		else
			exp_shifted(S + r * ATT_BK, nk, lse[r]);
	}
	const float *dout = j->dout + ((size_t)b * s->T + i0) * D + h * hd;
	const float *v = j->qkv + ((size_t)b * s->T + j0) * ld + 2 * D + h * hd;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, hd, 1.0f, dout, D, v, ld, 0.0f, dS, ATT_BK);
	if (s->dropout > 0.0f)
		for (int r = 0; r < nq; r++)
			for (int c = 0; c < nk; c++)
				dS[r * ATT_BK + c] *= dlk_k_attn_drop(s->seed, s->offset, b, h, i0 + r, j0 + c, s->heads, s->T,
				                                      s->dropout);
	for (int r = 0; r < nq; r++)
		ds_row(S + r * ATT_BK, dS + r * ATT_BK, nk, Dr[r]);
}

/* Dr[r] = sum over d of dout * out for queries [i0, i0 + nq) of (b, h) */
static void row_dots(const struct att_job *j, int b, int h, int i0, int nq, float *Dr)
{
	const struct dlk_attn_shape *s = j->s;
	int hd = s->hd, D = s->heads * hd;
	for (int r = 0; r < nq; r++) {
		const float *o = j->out + ((size_t)b * s->T + i0 + r) * D + h * hd;
		const float *g = j->dout + ((size_t)b * s->T + i0 + r) * D + h * hd;
		float t = 0.0f;
		for (int d = 0; d < hd; d++)
			t += o[d] * g[d];
		Dr[r] = t;
	}
}

/* dq, dk and dv of (b, h): every (key block, query block) pair it needs once, key blocks in
 * order and within each the query blocks in order, so dq of a query block sums over key blocks
 * in key order and dk, dv of a key block over query blocks in query order */
static void bwd_unit(void *ctx, int unit, int nunits)
{
	const struct att_job *j = ctx;
	const struct dlk_attn_shape *s = j->s;
	int h = unit % s->heads, b = unit / s->heads;
	int hd = s->hd, D = s->heads * hd, ld = 3 * D;
	size_t blk = (size_t)ATT_BQ * ATT_BK;
	float *S = xmalloc(sizeof(float) * (2 * blk + (size_t)s->T));
	float *dS = S + blk, *Dr = dS + blk;
	float *dqkv = j->dqkv + (size_t)b * s->T * ld + h * hd;
	const float *qkv = j->qkv + (size_t)b * s->T * ld + h * hd;
	const float *dout = j->dout + (size_t)b * s->T * D + h * hd;
	(void)nunits;

	for (int t = 0; t < s->T; t++)
		for (int p = 0; p < 3; p++)
			memset(dqkv + (size_t)t * ld + (size_t)p * D, 0, sizeof(float) * hd);
	for (int qb = 0; qb < j->nqb; qb++) {
		int i0 = qb * ATT_BQ;
		row_dots(j, b, h, i0, s->T - i0 < ATT_BQ ? s->T - i0 : ATT_BQ, Dr + i0);
	}
	for (int kb = 0; kb < j->nkb; kb++) {
		int j0 = kb * ATT_BK, nk = s->T - j0 < ATT_BK ? s->T - j0 : ATT_BK;
		for (int qb = s->causal ? j0 / ATT_BQ : 0; qb < j->nqb; qb++) {
			int i0 = qb * ATT_BQ, nq = s->T - i0 < ATT_BQ ? s->T - i0 : ATT_BQ;
			grads_block(j, b, h, i0, nq, j0, nk, Dr + i0, S, dS);
			/* dv += (P * mask)^T dout */
			if (s->dropout > 0.0f)
				for (int r = 0; r < nq; r++)
					for (int c = 0; c < nk; c++)
						S[r * ATT_BK + c] *= dlk_k_attn_drop(s->seed, s->offset, b, h, i0 + r, j0 + c, s->heads,
						                                     s->T, s->dropout);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hd, nq, 1.0f, S, ATT_BK, dout + (size_t)i0 * D,
			            D, 1.0f, dqkv + (size_t)j0 * ld + 2 * D, ld);
			/* dk += dS^T q * scale */
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hd, nq, s->scale, dS, ATT_BK,
			            qkv + (size_t)i0 * ld, ld, 1.0f, dqkv + (size_t)j0 * ld + D, ld);
			/* dq += dS k * scale */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hd, nk, s->scale, dS, ATT_BK,
			            qkv + (size_t)j0 * ld + D, ld, 1.0f, dqkv + (size_t)i0 * ld, ld);
		}
	}
	free(S);
}

void dlk_cpu_attention_backward(const struct dlk_attn_shape *s, const float *qkv, const float *out, const float *lse,
                                const float *dout, float *dqkv)
{
	struct att_job j = { .s = s, .qkv = qkv, .out = out, .lse = lse, .dout = dout, .dqkv = dqkv };
	if (s->batch <= 0 || s->T <= 0)
		return;
	j.nqb = (s->T + ATT_BQ - 1) / ATT_BQ;
	j.nkb = (s->T + ATT_BK - 1) / ATT_BK;
	dlk_parallel_for(s->batch * s->heads, bwd_unit, &j);
}

struct rot_job {
	float *qkv;
	const float *cs; /* [T, hd/2] pairs of (cos, sin) */
	int rows, T, heads, hd, inverse;
};

static void rot_part(void *ctx, int part, int nparts)
{
	const struct rot_job *j = ctx;
	int half = j->hd / 2, D = j->heads * j->hd;
	size_t lo, hi;
	dlk_parallel_range((size_t)j->rows, part, nparts, 1, &lo, &hi);
	for (size_t r = lo; r < hi; r++) {
		const float *cs = j->cs + (r % (size_t)j->T) * (size_t)j->hd;
		for (int p = 0; p < 2 * j->heads; p++) { /* q's heads, then k's */
			float *x = j->qkv + r * 3 * (size_t)D + (size_t)p * j->hd;
			for (int k = 0; k < half; k++) {
				float c = cs[2 * k], sn = j->inverse ? -cs[2 * k + 1] : cs[2 * k + 1];
				float x1 = x[k], x2 = x[k + half];
				x[k] = x1 * c - x2 * sn;
				x[k + half] = x2 * c + x1 * sn;
			}
		}
	}
}

void dlk_cpu_rotary(float *qkv, int batch, int T, int heads, int hd, int pos0, int inverse)
{
	if (batch <= 0 || T <= 0 || hd < 2)
		return;
	float *cs = xmalloc(sizeof(float) * (size_t)T * hd);
	for (int t = 0; t < T; t++)
		for (int k = 0; k < hd / 2; k++)
			dlk_k_rotary_cs(pos0 + t, k, hd, &cs[(size_t)t * hd + 2 * k], &cs[(size_t)t * hd + 2 * k + 1]);
	struct rot_job j = { .qkv = qkv, .cs = cs, .rows = batch * T, .T = T, .heads = heads, .hd = hd, .inverse = inverse };
	dlk_parallel_for(dlk_cpu_parts((size_t)batch * T * heads * hd, 16384), rot_part, &j);
	free(cs);
}
