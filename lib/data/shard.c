/* Per-epoch shuffling and the split of a dataset across ranks.
 *
 * The permutation must be bit-identical on every rank and every machine (each rank computes it
 * independently and takes its own slice), so it uses only 64-bit integer arithmetic with a fixed
 * generator: never rand(), never floating point. */
#include "lib/data/dataset.h"

#include <stdint.h>

#include "lib/util/mem.h"
#include "lib/util/rng.h"

size_t *dlk_epoch_permutation(size_t n, unsigned long long seed, int epoch)
{
	struct dlk_rng r;
	size_t *perm, i;

	if (n == 0)
		return NULL;
	dlk_rng_seed(&r, (uint64_t)seed ^ (0xD1B54A32D192ED03ULL * ((uint64_t)(int64_t)epoch + 1)));
	perm = xmalloc(n * sizeof(*perm));
	for (i = 0; i < n; i++)
		perm[i] = i;
	for (i = n - 1; i > 0; i--) {
		size_t j = (size_t)dlk_rng_below(&r, (uint64_t)i + 1), t = perm[i];
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

void dlk_part_range(size_t n, int rank, int world, size_t *begin, size_t *end)
{
	size_t per, rem;

	if (world <= 0 || rank < 0 || rank >= world) {
		*begin = *end = 0;
		return;
	}
	/* n * r / world without overflow for any n a machine can hold */
	per = n / (size_t)world;
	rem = n % (size_t)world;
	*begin = (size_t)rank * per + rem * (size_t)rank / (size_t)world;
	*end = (size_t)(rank + 1) * per + rem * (size_t)(rank + 1) / (size_t)world;
}

size_t dlk_shard_walk(size_t *perm, size_t n, size_t base, size_t count)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (perm[i] >= base && perm[i] - base < count)
			perm[k++] = perm[i] - base;
	return k;
}
