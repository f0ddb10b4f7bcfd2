/* A small synthetic dataset for training tests: n samples of 8 features in 4 separable classes,
 * drawn from `seed` (float storage; release with dlk_dataset_release). */
#ifndef DLK_TESTS_BLOBS_H
#define DLK_TESTS_BLOBS_H

#include <stdint.h>
#include <stdlib.h>

#include "lib/data/dataset.h"
#include "lib/util/rng.h"

static void blobs(struct dlk_dataset *ds, size_t n, uint64_t seed)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	*ds = (struct dlk_dataset)DLK_DATASET_INIT;
	ds->n = n;
	ds->shape[0] = ds->shape[1] = 1;
	ds->shape[2] = 8;
	ds->sample_size = 8;
	ds->n_classes = 4;
	ds->x = malloc(sizeof(float) * n * 8);
	ds->y = malloc(sizeof(int32_t) * n);
	for (size_t i = 0; i < n; i++) {
		int c = (int)dlk_rng_below(&r, 4);
		ds->y[i] = c;
		for (int j = 0; j < 8; j++)
			ds->x[i * 8 + j] = (j % 4 == c ? 1.5f : 0.0f) + (dlk_rng_uniform(&r) - 0.5f) * 1.5f;
	}
}

#endif
