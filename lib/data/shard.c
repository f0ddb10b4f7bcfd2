/* Per-epoch shuffling and the split of a dataset across ranks.
 *
 * The permutation must be bit-identical on every rank and every machine (each rank computes it
 * independently and takes its own slice), so it uses only 64-bit integer arithmetic with a fixed
 * generator: never rand(), never floating point. */
#include "lib/data/dataset.h"

#include <stdint.h>

#include "lib/util/mem.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman and Vigna). */
static uint64_t xoshiro_next(uint64_t s[4])
{
	uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* Uniform in [0, bound): reject the low `2^64 mod bound` values so every result is equally likely. */
static uint64_t uniform_below(uint64_t s[4], uint64_t bound)
{
	uint64_t threshold = (0 - bound) % bound, r;
	do
		r = xoshiro_next(s);
	while (r < threshold);
	return r % bound;
}

size_t *dlk_epoch_permutation(size_t n, unsigned long long seed, int epoch)
{
	uint64_t s[4], x = (uint64_t)seed ^ (0xD1B54A32D192ED03ULL * ((uint64_t)(int64_t)epoch + 1));
	size_t *perm, i;

	if (n == 0)
		return NULL;
	for (i = 0; i < 4; i++)
		s[i] = splitmix64(&x);
	perm = xmalloc(n * sizeof(*perm));
	for (i = 0; i < n; i++)
		perm[i] = i;
	for (i = n - 1; i > 0; i--) {
		size_t j = (size_t)uniform_below(s, (uint64_t)i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	return perm;
}

void dlk_shard_range(size_t n, int rank, int world, size_t *begin, size_t *end)
{
	size_t per;

	if (world <= 0 || rank < 0 || rank >= world) {
		*begin = *end = 0;
		return;
	}
	per = n / (size_t)world;
	*begin = (size_t)rank * per;
	*end = *begin + per;
}
