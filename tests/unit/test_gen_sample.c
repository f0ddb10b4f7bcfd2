/* The token samplers on small distributions whose answers are known exactly: greedy and
 * temperature 0, top-k with ties, top-p's kept set (transformers' TopPLogitsWarper semantics),
 * temperature's effect on the probabilities, and a seeded draw that is repeatable and follows the
 * distribution. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

#include "lib/gen/sample.h"

static int kept_set(const float *probs, int n, const int *want, int n_want)
{
	int k = 0;
	for (int i = 0; i < n; i++) {
		int in = 0;
		for (int j = 0; j < n_want; j++)
			in |= want[j] == i;
		if ((probs[i] > 0) != in)
			return 0;
		k += probs[i] > 0;
	}
	return k == n_want;
}

int main(void)
{
	struct dlk_sampler s = DLK_SAMPLER_INIT;
	struct dlk_rng rng;
	float probs[8];

	/* logits whose softmax is exactly 0.5, 0.3, 0.2 (ids 2, 0, 1) */
	float l3[3] = { logf(0.3f), logf(0.2f), logf(0.5f) };

	/* greedy */
	struct dlk_sampling g = { 0, 0, 1, 1 };
	dlk_rng_seed(&rng, 1);
	CHECK(dlk_sample(&s, l3, 3, &g, &rng) == 2);
	float tie[4] = { 1, 3, 3, 2 };
	CHECK_MSG(dlk_sample(&s, tie, 4, &g, &rng) == 1, "greedy takes the lowest id among equal logits (torch.argmax)");
	float none[2] = { -INFINITY, NAN };
	CHECK(dlk_sample(&s, none, 2, &g, &rng) == -1);
	float nan_first[3] = { NAN, 1, 0 };
	CHECK_MSG(dlk_sample(&s, nan_first, 3, &g, &rng) == 1, "NaN is never chosen");

	/* plain sampling: the softmax itself */
	struct dlk_sampling full = { 1, 0, 1, 1 };
	CHECK(dlk_sample_probs(&s, l3, 3, &full, probs) == 3);
	CHECK_NEAR(probs[0], 0.3, 1e-6);
	CHECK_NEAR(probs[1], 0.2, 1e-6);
	CHECK_NEAR(probs[2], 0.5, 1e-6);

	/* temperature 2 over logits 0 and ln 4: probabilities 1/3, 2/3 (4^(1/2) = 2) */
	float l2[2] = { 0, logf(4) };
	struct dlk_sampling t2 = { 2, 0, 1, 1 };
	dlk_sample_probs(&s, l2, 2, &t2, probs);
	CHECK_NEAR(probs[0], 1.0 / 3, 1e-6);
	CHECK_NEAR(probs[1], 2.0 / 3, 1e-6);

	/* top-p: 0.5 keeps {0.5} alone (the mass before 0.3 is 0.5, not below 0.5) */
	struct dlk_sampling p = { 1, 0, 0.5, 1 };
	CHECK(dlk_sample_probs(&s, l3, 3, &p, probs) == 1);
	CHECK(kept_set(probs, 3, (int[]){ 2 }, 1));
	CHECK_NEAR(probs[2], 1.0, 1e-6);
	/* 0.6 keeps {0.5, 0.3}, renormalised to 5/8, 3/8 */
	p.top_p = 0.6;
	CHECK(dlk_sample_probs(&s, l3, 3, &p, probs) == 2);
	CHECK(kept_set(probs, 3, (int[]){ 2, 0 }, 2));
	CHECK_NEAR(probs[2], 0.625, 1e-6);
	CHECK_NEAR(probs[0], 0.375, 1e-6);
	/* 0.8 is reached by {0.5, 0.3}: 0.2 is not needed */
	p.top_p = 0.8;
	CHECK(dlk_sample_probs(&s, l3, 3, &p, probs) == 2);
	p.top_p = 0.81;
	CHECK(dlk_sample_probs(&s, l3, 3, &p, probs) == 3);
	/* a tiny P still keeps the best token */
	p.top_p = 1e-9;
	CHECK(dlk_sample_probs(&s, l3, 3, &p, probs) == 1 && probs[2] == 1.0f);

	/* top-k, ties at the k-th logit kept */
	float l5[5] = { 1, 4, 2, 2, 0 };
	struct dlk_sampling k = { 1, 2, 1, 1 };
	CHECK(dlk_sample_probs(&s, l5, 5, &k, probs) == 3);
	CHECK(kept_set(probs, 5, (int[]){ 1, 2, 3 }, 3));
	k.top_k = 1;
	CHECK(dlk_sample_probs(&s, l5, 5, &k, probs) == 1 && probs[1] == 1.0f);
	k.top_k = 5;
	CHECK(dlk_sample_probs(&s, l5, 5, &k, probs) == 5);
	/* top-k then top-p: k = 2 leaves ids 1, 2, 3 with e^4, e^2, e^2; p = 0.5 keeps id 1 alone */
	k.top_k = 2;
	k.top_p = 0.5;
	CHECK(dlk_sample_probs(&s, l5, 5, &k, probs) == 1);

	/* a seeded draw: repeatable, and close to the distribution */
	int counts[3] = { 0 }, seq1[64], seq2[64], same = 1;
	dlk_rng_seed(&rng, 42);
	for (int i = 0; i < 64; i++)
		seq1[i] = dlk_sample(&s, l3, 3, &full, &rng);
	dlk_rng_seed(&rng, 42);
	for (int i = 0; i < 64; i++)
		same &= (seq2[i] = dlk_sample(&s, l3, 3, &full, &rng)) == seq1[i];
	CHECK_MSG(same, "the same seed draws the same tokens");
	dlk_rng_seed(&rng, 43);
	same = 1;
	for (int i = 0; i < 64; i++)
		same &= dlk_sample(&s, l3, 3, &full, &rng) == seq1[i];
	CHECK_MSG(!same, "another seed draws other tokens");
	dlk_rng_seed(&rng, 7);
	for (int i = 0; i < 30000; i++)
		counts[dlk_sample(&s, l3, 3, &full, &rng)]++;
	/* binomial sd at 30000 draws is under 0.003: 0.01 is over 3 sd */
	CHECK_MSG(fabs(counts[0] / 30000.0 - 0.3) < 0.01 && fabs(counts[1] / 30000.0 - 0.2) < 0.01 &&
	          fabs(counts[2] / 30000.0 - 0.5) < 0.01, "draws follow 0.3/0.2/0.5 (%d %d %d)", counts[0], counts[1], counts[2]);
	/* top-p 0.6 never draws the removed token */
	p.top_p = 0.6;
	counts[1] = 0;
	for (int i = 0; i < 2000; i++)
		counts[1] += dlk_sample(&s, l3, 3, &p, &rng) == 1;
	CHECK(counts[1] == 0);
	/* +inf logits share the probability */
	float inf2[3] = { INFINITY, 0, INFINITY };
	CHECK(dlk_sample_probs(&s, inf2, 3, &full, probs) == 2 && probs[0] == 0.5f && probs[2] == 0.5f);

	dlk_sampler_release(&s);
	return CHECK_DONE();
}
