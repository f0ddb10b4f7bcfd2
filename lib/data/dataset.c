/* struct dlk_dataset: release and gathering scaled samples out of either storage kind. */
#include "lib/data/dataset.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "lib/util/mem.h"
#include "lib/util/parallel.h"

void dlk_dataset_release(struct dlk_dataset *ds)
{
	int i;

	free(ds->x);
	free(ds->x8);
	free(ds->y);
	free(ds->t);
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

/* samples idx[lo..hi) (or start+lo.. start+hi without idx) into out's rows lo..hi */
struct gather_job {
	const struct dlk_dataset *ds;
	const size_t *idx;
	size_t start, n;
	float *out;
};

static void gather_part(void *ctx, int part, int nparts)
{
	const struct gather_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range(j->n, part, nparts, 1, &lo, &hi);
	for (size_t b = lo; b < hi; b++)
		gather_one(j->ds, j->idx ? j->idx[b] : j->start + b, j->out + b * j->ds->sample_size);
}

/* on the compute pool when a batch is large enough to share (each sample is one part's: the
 * same values whoever copies them) */
static void gather(const struct dlk_dataset *ds, const size_t *idx, size_t start, size_t n, float *out)
{
	struct gather_job j = { .ds = ds, .idx = idx, .start = start, .n = n, .out = out };
	int t = dlk_parallel_threads();
	dlk_parallel_for(t > 1 && n > 1 && n * ds->sample_size >= 16384 ? (n < (size_t)t ? (int)n : t) : 1, gather_part,
	                 &j);
}

void dlk_dataset_gather(const struct dlk_dataset *ds, const size_t *idx, size_t n, float *out)
{
	gather(ds, idx, 0, n, out);
}

void dlk_dataset_gather_range(const struct dlk_dataset *ds, size_t start, size_t n, float *out)
{
	gather(ds, NULL, start, n, out);
}
