/* Embedding lookup and its sparse gradient. The forward copies rows, ids spread over the thread
 * pool. The backward touches only the rows of the ids; it is cut by columns, not by ids, so two
 * parts never add into the same element and repeated ids add in id order (as the CUDA kernel). */
#include <string.h>

#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/util/parallel.h"

struct emb_job {
	const float *ids;
	const float *src;
	float *dst;
	int count, vocab, dim;
};

static void emb_fwd_part(void *ctx, int part, int nparts)
{
	const struct emb_job *j = ctx;
	size_t lo, hi, d = (size_t)j->dim;
	dlk_parallel_range((size_t)j->count, part, nparts, 1, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		int id = dlk_k_token(j->ids[i], j->vocab);
		if (id >= 0)
			memcpy(j->dst + i * d, j->src + (size_t)id * d, sizeof(float) * d);
		else
			memset(j->dst + i * d, 0, sizeof(float) * d);
	}
}

void dlk_cpu_embedding_forward(const float *ids, const float *table, int count, int vocab, int dim, float *y)
{
	struct emb_job j = { .ids = ids, .src = table, .dst = y, .count = count, .vocab = vocab, .dim = dim };
	if (count > 0 && dim > 0)
		dlk_parallel_for(dlk_cpu_parts((size_t)count * (size_t)dim, 16384), emb_fwd_part, &j);
}

static void emb_bwd_part(void *ctx, int part, int nparts)
{
	const struct emb_job *j = ctx;
	size_t lo, hi, d = (size_t)j->dim;
	dlk_parallel_range(d, part, nparts, 16, &lo, &hi);
	for (int i = 0; i < j->count; i++) {
		int id = dlk_k_token(j->ids[i], j->vocab);
		if (id < 0)
			continue;
		float *t = j->dst + (size_t)id * d;
		const float *g = j->src + (size_t)i * d;
		for (size_t c = lo; c < hi; c++)
			t[c] += g[c];
	}
}

void dlk_cpu_embedding_backward(const float *ids, const float *dy, int count, int vocab, int dim, float *dtable)
{
	struct emb_job j = { .ids = ids, .src = dy, .dst = dtable, .count = count, .vocab = vocab, .dim = dim };
	if (count <= 0 || dim <= 0)
		return;
	int parts = dlk_cpu_parts((size_t)count * (size_t)dim, 16384), cols = (dim + 15) / 16;
	dlk_parallel_for(parts < cols ? parts : cols, emb_bwd_part, &j);
}
