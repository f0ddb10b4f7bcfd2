/* Sampling the next token (see sample.h for the semantics). */
#include "lib/gen/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util/mem.h"

void dlk_sampler_release(struct dlk_sampler *s)
{
	free(s->p);
	free(s->idx);
	*s = (struct dlk_sampler)DLK_SAMPLER_INIT;
}

static void reserve(struct dlk_sampler *s, int n)
{
	if (s->n >= n)
		return;
	free(s->p);
	free(s->idx);
	s->p = xmalloc((size_t)n * sizeof(float));
	s->idx = xmalloc((size_t)n * sizeof(int32_t));
	s->n = n;
}

/* descending by logit, the lower id first among equals (qsort_r: glibc's argument order) */
static int by_logit(const void *a, const void *b, void *ctx)
{
	const float *keys = ctx;
	int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
	float x = keys[i], y = keys[j];
	if (x != y)
		return x > y ? -1 : 1;
	return i < j ? -1 : i > j;
}

static int usable(float v)
{
	return !isnan(v) && v != -INFINITY;
}

int dlk_sample_probs(struct dlk_sampler *s, const float *logits, int n, const struct dlk_sampling *cfg, float *probs)
{
	int m = 0, keep;
	double t = cfg->temperature, sum = 0, before = 0;

	if (n <= 0)
		return 0;
	memset(probs, 0, (size_t)n * sizeof(float));
	reserve(s, n);
	for (int i = 0; i < n; i++)
		if (usable(logits[i]))
			s->idx[m++] = i;
	if (!m)
		return 0;
	qsort_r(s->idx, (size_t)m, sizeof(int32_t), by_logit, (void *)logits);
	if (t <= 0) {
		probs[s->idx[0]] = 1;
		return 1;
	}
	keep = m;
	/* top-k: every token whose logit is at least the k-th largest */
	if (cfg->top_k > 0 && cfg->top_k < m) {
		float kth = logits[s->idx[cfg->top_k - 1]];
		keep = cfg->top_k;
		while (keep < m && logits[s->idx[keep]] >= kth)
			keep++;
	}
	/* softmax of logit / T over what is kept, in double; +inf logits share the mass */
	double top = (double)logits[s->idx[0]] / t;
	if (isinf(top)) {
		int n_inf = 0;
		while (n_inf < keep && isinf(logits[s->idx[n_inf]]))
			n_inf++;
		for (int r = 0; r < n_inf; r++)
			probs[s->idx[r]] = 1.0f / (float)n_inf;
		return n_inf;
	}
	for (int r = 0; r < keep; r++)
		sum += exp((double)logits[s->idx[r]] / t - top);
	/* top-p: a token stays while the mass before it is below P */
	int kept = 0;
	double kept_sum = 0;
	for (int r = 0; r < keep; r++) {
		double p = exp((double)logits[s->idx[r]] / t - top) / sum;
		if (cfg->top_p < 1 && r > 0 && before >= cfg->top_p)
			break;
		before += p;
		kept_sum += p;
		s->p[r] = (float)p;
		kept++;
	}
	for (int r = 0; r < kept; r++)
		probs[s->idx[r]] = (float)(s->p[r] / kept_sum);
	return kept;
}

int32_t dlk_sample(struct dlk_sampler *s, const float *logits, int n, const struct dlk_sampling *cfg, struct dlk_rng *rng)
{
	if (n <= 0)
		return -1;
	reserve(s, n);
	float *probs = xmalloc((size_t)n * sizeof(float));
	int kept = dlk_sample_probs(s, logits, n, cfg, probs);
	int32_t tok = -1;

	if (kept == 1 || (kept > 0 && cfg->temperature <= 0)) {
		tok = s->idx[0];
		for (int i = 0; i < n; i++)
			if (probs[i] > 0) {
				tok = i;
				break;
			}
	} else if (kept > 1) {
		/* one draw over the kept tokens in rank order (s->idx[0..kept)) */
		double u = dlk_rng_uniform(rng), c = 0;
		tok = s->idx[kept - 1];
		for (int r = 0; r < kept; r++) {
			c += probs[s->idx[r]];
			if (u < c) {
				tok = s->idx[r];
				break;
			}
		}
	}
	free(probs);
	return tok;
}
