/* struct dlk_dataset: release and gathering scaled samples out of either storage kind. */
#include "lib/data/dataset.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "lib/util/mem.h"

void dlk_dataset_release(struct dlk_dataset *ds)
{
	int i;

	free(ds->x);
	free(ds->x8);
	free(ds->y);
	for (i = 0; i < ds->n_sources; i++)
		free(ds->sources[i].url);
	free(ds->sources);
	memset(ds, 0, sizeof(*ds));
}

void dlk_dataset_add_source(struct dlk_dataset *ds, const char *url, const char *sha256)
{
	ds->sources = xrealloc(ds->sources, (size_t)(ds->n_sources + 1) * sizeof(*ds->sources));
	ds->sources[ds->n_sources].url = xstrdup(url ? url : "");
	snprintf(ds->sources[ds->n_sources].sha256, sizeof(ds->sources[0].sha256), "%s", sha256 ? sha256 : "");
	ds->n_sources++;
}

/* One sample's values: a copy of the scaled floats, or the bytes looked up in the table. */
static void gather_one(const struct dlk_dataset *ds, size_t i, float *out)
{
	size_t k, m = ds->sample_size;

	if (ds->storage == DLK_STORE_U8) {
		const uint8_t *src = ds->x8 + i * m;
		for (k = 0; k < m; k++)
			out[k] = ds->lut[src[k]];
	} else {
		memcpy(out, ds->x + i * m, sizeof(float) * m);
	}
}

void dlk_dataset_gather(const struct dlk_dataset *ds, const size_t *idx, size_t n, float *out)
{
	for (size_t b = 0; b < n; b++)
		gather_one(ds, idx[b], out + b * ds->sample_size);
}

void dlk_dataset_gather_range(const struct dlk_dataset *ds, size_t start, size_t n, float *out)
{
	if (ds->storage == DLK_STORE_U8) {
		const uint8_t *src = ds->x8 + start * ds->sample_size;
		size_t total = n * ds->sample_size;
		for (size_t k = 0; k < total; k++)
			out[k] = ds->lut[src[k]];
	} else if (n) {
		memcpy(out, ds->x + start * ds->sample_size, sizeof(float) * n * ds->sample_size);
	}
}
