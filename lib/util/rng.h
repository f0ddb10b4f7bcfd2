/* A small seeded generator (xoshiro256**, seeded through splitmix64): deterministic across
 * platforms, with a state of four words that a checkpoint can save and restore. */
#ifndef DLK_UTIL_RNG_H
#define DLK_UTIL_RNG_H

#include <stdint.h>

struct dlk_rng {
	uint64_t s[4];
};

void dlk_rng_seed(struct dlk_rng *r, uint64_t seed);
uint64_t dlk_rng_next(struct dlk_rng *r);
/* uniform in [0, 1) with 24 random bits */
float dlk_rng_uniform(struct dlk_rng *r);
/* standard normal (Box-Muller from two uniforms; the second value of the pair is not kept) */
float dlk_rng_normal(struct dlk_rng *r);
/* uniform integer in [0, n), n > 0, without modulo bias */
uint64_t dlk_rng_below(struct dlk_rng *r, uint64_t n);

#endif
