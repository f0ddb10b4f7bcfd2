/* Masked mean pooling over a sequence (backend.h's seqpool_forward / seqpool_backward): the
 * samples spread over the thread pool. Each output sums its kept positions in the order of t, then
 * divides by their count, as the CUDA kernel (gpu/layers.cu) does: the two agree to the bit. */
#include <string.h>

#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/util/parallel.h"

struct seqpool_job {
	const float *src, *ids;
	float pad;
	int T, D;
	float *dst;
	size_t batch;
};

/* the kept positions of sample b */
static int kept_count(const struct seqpool_job *j, size_t b)
{
	int n = 0;
	for (int t = 0; t < j->T; t++)
		n += dlk_k_seq_kept(j->ids, j->pad, b * (size_t)j->T + (size_t)t);
	return n;
}

static void fwd_part(void *ctx, int part, int nparts)
{
	const struct seqpool_job *j = ctx;
	size_t lo, hi, D = (size_t)j->D;
	dlk_parallel_range(j->batch, part, nparts, 1, &lo, &hi);
	for (size_t b = lo; b < hi; b++) {
		float *y = j->dst + b * D;
		int n = kept_count(j, b);
		memset(y, 0, sizeof(float) * D);
		for (int t = 0; t < j->T; t++) {
			size_t at = b * (size_t)j->T + (size_t)t;
			if (!dlk_k_seq_kept(j->ids, j->pad, at))
				continue;
			const float *x = j->src + at * D;
			for (size_t d = 0; d < D; d++)
				y[d] += x[d];
		}
		for (size_t d = 0; d < D; d++)
			y[d] = n ? y[d] / (float)n : 0.0f;
	}
}

void dlk_cpu_seqpool_forward(const float *x, const float *ids, float pad, int batch, int T, int D, float *y)
{
	struct seqpool_job j = { x, ids, pad, T, D, y, (size_t)(batch > 0 ? batch : 0) };
	if (batch > 0 && D > 0)
		dlk_parallel_for(dlk_cpu_parts((size_t)batch * (size_t)T * (size_t)D, 16384), fwd_part, &j);
}

static void bwd_part(void *ctx, int part, int nparts)
{
	const struct seqpool_job *j = ctx;
	size_t lo, hi, D = (size_t)j->D;
	dlk_parallel_range(j->batch, part, nparts, 1, &lo, &hi);
	for (size_t b = lo; b < hi; b++) {
		const float *g = j->src + b * D;
		int n = kept_count(j, b);
		for (int t = 0; t < j->T; t++) {
			size_t at = b * (size_t)j->T + (size_t)t;
			float *dx = j->dst + at * D;
			if (!dlk_k_seq_kept(j->ids, j->pad, at)) {
				memset(dx, 0, sizeof(float) * D);
				continue;
			}
			for (size_t d = 0; d < D; d++)
				dx[d] = g[d] / (float)n;
		}
	}
}

void dlk_cpu_seqpool_backward(const float *dy, const float *ids, float pad, int batch, int T, int D, float *dx)
{
	struct seqpool_job j = { dy, ids, pad, T, D, dx, (size_t)(batch > 0 ? batch : 0) };
	if (batch > 0 && D > 0)
		dlk_parallel_for(dlk_cpu_parts((size_t)batch * (size_t)T * (size_t)D, 16384), bwd_part, &j);
}
