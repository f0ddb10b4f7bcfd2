/* Choosing the next token from a row of logits: greedy, temperature, top-k and top-p (nucleus),
 * with a seeded generator so that the same seed gives the same text.
 *
 * Semantics are those of Hugging Face transformers' generate() with do_sample=True, whose logits
 * warpers run in this order:
 *   temperature T  logits / T (TemperatureLogitsWarper); T = 0 means greedy (OpenAI's meaning;
 *                  transformers refuses 0 and uses do_sample=False for it);
 *   top-k K        keep the tokens whose logit is >= the K-th largest, ties at the K-th included
 *                  (TopKLogitsWarper: scores < topk(scores, K)[-1] are removed); K = 0: all;
 *   top-p P        over the probabilities after the two above, sorted from the largest, keep a
 *                  token when the probability of the tokens before it is below P, so the kept set
 *                  is the smallest whose total reaches P, never empty (TopPLogitsWarper with
 *                  min_tokens_to_keep 1: it removes the ascending cumulative sums <= 1 - P);
 *                  P = 1: all.
 * Then one draw from the softmax of what is left. Greedy (T = 0) takes the largest logit, the
 * lowest id among equals (torch.argmax). Tokens whose logit is -inf or NaN are never chosen; the
 * draw is dlk's own generator (lib/util/rng.h), so a seed reproduces dlk's text, not PyTorch's. */
#ifndef DLK_GEN_SAMPLE_H
#define DLK_GEN_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/util/rng.h"

struct dlk_sampling {
	double temperature;   /* >= 0; 0 = greedy */
	int top_k;            /* >= 0; 0 = no limit */
	double top_p;         /* (0, 1]; 1 = no limit */
	uint64_t seed;
};
#define DLK_SAMPLING_INIT { 1.0, 0, 1.0, 0 }

/* Scratch space for n-token rows, reused across calls. */
struct dlk_sampler {
	int n;
	float *p;              /* probabilities */
	int32_t *idx;          /* ids sorted by logit */
};
#define DLK_SAMPLER_INIT { 0, NULL, NULL }
void dlk_sampler_release(struct dlk_sampler *s);

/* The probabilities the draw uses (after temperature, top-k and top-p; 0 for removed tokens) in
 * probs[n]. With temperature 0: 1 for the greedy token. Returns how many tokens are kept; 0 when
 * no logit is finite. */
int dlk_sample_probs(struct dlk_sampler *s, const float *logits, int n, const struct dlk_sampling *cfg, float *probs);
/* The next token: -1 when no logit is finite. */
int32_t dlk_sample(struct dlk_sampler *s, const float *logits, int n, const struct dlk_sampling *cfg, struct dlk_rng *rng);

#endif
