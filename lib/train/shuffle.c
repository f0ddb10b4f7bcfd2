/* Per-epoch shuffling and per-rank sharding (declared in lib/data/dataset.h). Every rank
 * computes the same permutation from (seed, epoch), so no order has to be communicated. */
#include <stdint.h>

#include "lib/data/dataset.h"
#include "lib/nn/rng.h"
#include "lib/util/mem.h"

size_t *dlk_epoch_permutation(size_t n, unsigned long long seed, int epoch)
{
	size_t *perm = xmalloc(sizeof(*perm) * (n ? n : 1));
	struct dlk_rng r;
	/* mix the epoch in through the seeder, so epochs are unrelated streams */
	dlk_rng_seed(&r, (uint64_t)seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(epoch + 1)));
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)dlk_rng_below(&r, i);
		size_t t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
	return perm;
}

void dlk_shard_range(size_t n, int rank, int world, size_t *begin, size_t *end)
{
	if (world < 1 || rank < 0 || rank >= world) {
		*begin = *end = 0;
		return;
	}
	size_t per = n / (size_t)world;
	*begin = per * (size_t)rank;
	*end = *begin + per;
}
