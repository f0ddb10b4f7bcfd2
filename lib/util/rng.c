#include "lib/util/rng.h"
#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void dlk_rng_seed(struct dlk_rng *r, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dlk_rng_next(struct dlk_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

float dlk_rng_uniform(struct dlk_rng *r)
{
	return (float)(dlk_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float dlk_rng_normal(struct dlk_rng *r)
{
	float u1 = dlk_rng_uniform(r), u2 = dlk_rng_uniform(r);
	return sqrtf(-2.0f * logf(1.0f - u1)) * cosf(6.2831853f * u2);
}

uint64_t dlk_rng_below(struct dlk_rng *r, uint64_t n)
{
	/* rejection: draw until below the largest multiple of n */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = dlk_rng_next(r);
	while (x >= limit);
	return x % n;
}
