/* struct dlk_dataset: release and gathering scaled samples out of either storage kind. */
#include "lib/data/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "lib/data/bpe.h"
#include "lib/data/image.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"
#include "lib/util/rng.h"

void dlk_dataset_release(struct dlk_dataset *ds)
{
	int i;

	free(ds->x);
	free(ds->x8);
	free(ds->y);
	free(ds->t);
	free(ds->t8);
	for (i = 0; i < ds->n_sources; i++)
		free(ds->sources[i].url);
	free(ds->sources);
	for (i = 0; ds->class_names && i < ds->n_class_names; i++)
		free(ds->class_names[i]);
	free(ds->class_names);
	dlk_tokenizer_free(ds->tokenizer);
	dlk_image_files_free(ds->files);
	memset(ds, 0, sizeof(*ds));
}

void dlk_dataset_add_source(struct dlk_dataset *ds, const char *url, const char *sha256)
{
	ds->sources = xrealloc(ds->sources, (size_t)(ds->n_sources + 1) * sizeof(*ds->sources));
	ds->sources[ds->n_sources].url = xstrdup(url ? url : "");
	snprintf(ds->sources[ds->n_sources].sha256, sizeof(ds->sources[0].sha256), "%s", sha256 ? sha256 : "");
	ds->n_sources++;
}

void dlk_augment_draw(const struct dlk_augment *a, unsigned long long seed, int epoch, size_t global, int *dy,
                      int *dx, int *flip)
{
	struct dlk_rng r;

	dlk_rng_seed(&r, seed ^ (0x9E3779B97F4A7C15ull * (unsigned long long)(epoch + 1)) ^
	                 (0xC2B2AE3D27D4EB4Full * (unsigned long long)(global + 1)));
	*dy = a->pad ? (int)dlk_rng_below(&r, (uint64_t)(2 * a->pad + 1)) - a->pad : 0;
	*dx = a->pad ? (int)dlk_rng_below(&r, (uint64_t)(2 * a->pad + 1)) - a->pad : 0;
	*flip = a->flip ? (int)(dlk_rng_next(&r) >> 63) : 0;
}

static const float *lut_of(const struct dlk_dataset *ds, int c)
{
	return ds->per_channel ? ds->lut_c[c] : ds->lut;
}

/* A raw pixel with the sample's next noise value: round(v + noise * N(0, 1)) within 0..255 */
static int noisy(int v, float noise, struct dlk_rng *r)
{
	float n = rintf((float)v + noise * dlk_rng_normal(r));
	return n < 0.0f ? 0 : n > 255.0f ? 255 : (int)n;
}

/* sample i's noise: (seed, epoch)'s in training, else DLK_NOISE_EVAL_SEED's */
static void noise_seed(struct dlk_rng *r, const struct dlk_dataset *ds, size_t i, int train, unsigned long long seed,
                       int epoch)
{
	unsigned long long s = train ? seed : DLK_NOISE_EVAL_SEED;
	int e = train ? epoch : -1;
	dlk_rng_seed(r, (s ^ 0xA0761D6478BD642Full) ^ (0x9E3779B97F4A7C15ull * (unsigned long long)(e + 1)) ^
	                    (0xC2B2AE3D27D4EB4Full * (unsigned long long)(ds->base + i + 1)));
}

/* raw bytes (kept, or read from files as gathered): what flips, crops and noise act on */
static int byte_storage(const struct dlk_dataset *ds)
{
	return ds->storage == DLK_STORE_U8 || ds->storage == DLK_STORE_FILES;
}

int dlk_dataset_streams(const struct dlk_dataset *ds)
{
	return ds->storage == DLK_STORE_FILES && ds->files;
}

int dlk_dataset_failed(const struct dlk_dataset *ds, struct dlk_err *err)
{
	return dlk_dataset_streams(ds) ? dlk_image_files_failed(ds->files, err) : 0;
}

/* Scratch of one thread reading samples: a file's bytes and a decoded sample (DLK_STORE_FILES). */
struct reader {
	struct dlk_buf file;
	uint8_t *px;
};

static void reader_release(struct reader *rd)
{
	dlk_buf_release(&rd->file);
	free(rd->px);
	rd->px = NULL;
}

/* sample i's raw bytes: where they are kept, or read from its file into rd (target: its target
 * image's, paired folders; the input's own otherwise) */
static const uint8_t *sample_bytes(const struct dlk_dataset *ds, size_t i, int target, struct reader *rd)
{
	if (ds->storage != DLK_STORE_FILES)
		return target ? (ds->t_from_x8 ? ds->x8 : ds->t8) + i * ds->target_size : ds->x8 + i * ds->sample_size;
	target = target && ds->files->tnames;
	if (!rd->px) {
		size_t m = ds->files->sample_size > ds->files->tsample_size ? ds->files->sample_size : ds->files->tsample_size;
		rd->px = xmalloc(m ? m : 1);
	}
	dlk_image_files_sample(ds->files, i, target, rd->px, &rd->file);
	return rd->px;
}

int dlk_dataset_has_targets(const struct dlk_dataset *ds)
{
	return ds->t || ds->t8 || (ds->files && ds->files->tnames) || (ds->t_from_x8 && (ds->x8 || ds->files));
}

static void targets_rows(const struct dlk_dataset *ds, const size_t *idx, size_t start, size_t lo, size_t hi,
                         float *out, struct reader *rd)
{
	size_t k = ds->target_size;

	for (size_t b = lo; b < hi; b++) {
		size_t i = idx ? idx[b] : start + b;
		float *o = out + b * k;
		if (ds->t) {
			memcpy(o, ds->t + i * k, sizeof(float) * k);
		} else {
			const uint8_t *src = sample_bytes(ds, i, 1, rd);
			for (size_t j = 0; j < k; j++)
				o[j] = (float)src[j] / 255.0f;
		}
	}
}

struct targets_job {
	const struct dlk_dataset *ds;
	const size_t *idx;
	size_t start, n;
	float *out;
};

static void targets_part(void *ctx, int part, int nparts)
{
	const struct targets_job *j = ctx;
	struct reader rd = { DLK_BUF_INIT, NULL };
	size_t lo, hi;

	dlk_parallel_range(j->n, part, nparts, 1, &lo, &hi);
	targets_rows(j->ds, j->idx, j->start, lo, hi, j->out, &rd);
	reader_release(&rd);
}

void dlk_dataset_targets(const struct dlk_dataset *ds, const size_t *idx, size_t start, size_t n, float *out)
{
	struct targets_job j = { ds, idx, start, n, out };
	int t = dlk_parallel_threads();

	/* files are decoded on the compute pool; targets kept in memory are a copy */
	dlk_parallel_for(dlk_dataset_streams(ds) && t > 1 && n > 1 ? (n < (size_t)t ? (int)n : t) : 1, targets_part, &j);
}

void dlk_dataset_noisy_pixels(const struct dlk_dataset *ds, size_t start, size_t n, float *out)
{
	size_t m = ds->sample_size;
	struct reader rd = { DLK_BUF_INIT, NULL };

	for (size_t i = start; i < start + n; i++) {
		const uint8_t *src = sample_bytes(ds, i, 0, &rd);
		struct dlk_rng r;
		noise_seed(&r, ds, i, 0, 0, 0);
		for (size_t k = 0; k < m; k++)
			*out++ = (float)noisy(src[k], ds->aug.noise, &r) / 255.0f;
	}
	reader_release(&rd);
}

/* A U8 sample src (sample i's raw bytes) shifted by (dy, dx) (out(y, x) = in(y + dy, x + dx), raw
 * 0 outside: padding then cropping) and mirrored when flip (train: the epoch's draws; else none),
 * then noise when the dataset has it (train: the epoch's; else DLK_NOISE_EVAL_SEED's, the same
 * every time). */
static void gather_aug(const struct dlk_dataset *ds, const uint8_t *src, size_t i, unsigned long long seed, int epoch,
                       int train, float *out)
{
	int C = ds->shape[0], H = ds->shape[1], W = ds->shape[2], dy = 0, dx = 0, flip = 0;
	float noise = ds->aug.noise;
	struct dlk_rng nr;

	if (train)
		dlk_augment_draw(&ds->aug, seed, epoch, ds->base + i, &dy, &dx, &flip);
	if (noise > 0)
		noise_seed(&nr, ds, i, train, seed, epoch);
	for (int c = 0; c < C; c++) {
		const float *lut = lut_of(ds, c);
		const uint8_t *plane = src + (size_t)c * (size_t)H * (size_t)W;
		for (int y = 0; y < H; y++) {
			int sy = y + dy;
			float *row = out + ((size_t)c * (size_t)H + (size_t)y) * (size_t)W;
			for (int x = 0; x < W; x++) {
				int sx = (flip ? W - 1 - x : x) + dx;
				int v = sy < 0 || sy >= H || sx < 0 || sx >= W ? 0 : plane[(size_t)sy * (size_t)W + (size_t)sx];
				row[x] = lut[noise > 0 ? noisy(v, noise, &nr) : v];
			}
		}
	}
}

/* One sample's values: a copy of the scaled floats, or its raw bytes src looked up in the table. */
static void gather_one(const struct dlk_dataset *ds, const uint8_t *src, size_t i, float *out)
{
	size_t k, m = ds->sample_size;

	if (!src) {
		memcpy(out, ds->x + i * m, sizeof(float) * m);
	} else if (ds->per_channel) {
		size_t plane = (size_t)ds->shape[1] * (size_t)ds->shape[2];
		for (k = 0; k < m; k++)
			out[k] = ds->lut_c[k / plane][src[k]];
	} else {
		for (k = 0; k < m; k++)
			out[k] = ds->lut[src[k]];
	}
}

/* samples idx[lo..hi) (or start+lo.. start+hi without idx) into out's rows lo..hi */
struct gather_job {
	const struct dlk_dataset *ds;
	const size_t *idx;
	size_t start, n;
	float *out;
	int augment, epoch; /* augment: 1 training's draws, 2 noise alone (DLK_NOISE_EVAL_SEED's) */
	unsigned long long seed;
};

/* rows lo..hi of j, and their targets into tout's when not NULL (a target that is the input's own
 * bytes, data.images.noise, is taken from the bytes just read) */
static void gather_rows(const struct gather_job *j, size_t lo, size_t hi, float *tout, struct reader *rd)
{
	const struct dlk_dataset *ds = j->ds;
	size_t k = ds->target_size;

	for (size_t b = lo; b < hi; b++) {
		size_t i = j->idx ? j->idx[b] : j->start + b;
		const uint8_t *src = byte_storage(ds) ? sample_bytes(ds, i, 0, rd) : NULL;
		if (j->augment)
			gather_aug(ds, src, i, j->seed, j->epoch, j->augment == 1, j->out + b * ds->sample_size);
		else
			gather_one(ds, src, i, j->out + b * ds->sample_size);
		if (!tout)
			continue;
		if (ds->t_from_x8 && src)
			for (size_t q = 0; q < k; q++)
				tout[b * k + q] = (float)src[q] / 255.0f;
		else
			targets_rows(ds, j->idx, j->start, b, b + 1, tout, rd);
	}
}

static void gather_part(void *ctx, int part, int nparts)
{
	const struct gather_job *j = ctx;
	struct reader rd = { DLK_BUF_INIT, NULL };
	size_t lo, hi;

	dlk_parallel_range(j->n, part, nparts, 1, &lo, &hi);
	gather_rows(j, lo, hi, NULL, &rd);
	reader_release(&rd);
}

/* on the compute pool when a batch is large enough to share, or read from files (each sample is
 * one part's: the same values whoever copies them) */
static void gather(const struct dlk_dataset *ds, const size_t *idx, size_t start, size_t n, int augment,
                   unsigned long long seed, int epoch, float *out)
{
	struct gather_job j = { .ds = ds, .idx = idx, .start = start, .n = n, .out = out, .augment = augment,
		                .epoch = epoch, .seed = seed };
	int t = dlk_parallel_threads(), share = n * ds->sample_size >= 16384 || dlk_dataset_streams(ds);
	dlk_parallel_for(t > 1 && n > 1 && share ? (n < (size_t)t ? (int)n : t) : 1, gather_part, &j);
}

/* 2: the noise of inputs outside training, when the dataset has noise (see struct dlk_augment) */
static int eval_noise(const struct dlk_dataset *ds)
{
	return ds->aug.noise > 0 && byte_storage(ds) ? 2 : 0;
}

/* 1: training's augmentation, when the dataset has any */
static int train_augment(const struct dlk_dataset *ds)
{
	return (ds->aug.flip || ds->aug.pad || ds->aug.noise > 0) && byte_storage(ds);
}

void dlk_dataset_gather(const struct dlk_dataset *ds, const size_t *idx, size_t n, float *out)
{
	gather(ds, idx, 0, n, eval_noise(ds), 0, 0, out);
}

void dlk_dataset_gather_train(const struct dlk_dataset *ds, const size_t *idx, size_t n, unsigned long long seed,
                              int epoch, float *out)
{
	gather(ds, idx, 0, n, train_augment(ds), seed, epoch, out);
}

void dlk_dataset_gather_train_part(const struct dlk_dataset *ds, const size_t *idx, size_t n, unsigned long long seed,
                                   int epoch, float *out, float *tout, int part, int nparts)
{
	struct gather_job j = { .ds = ds, .idx = idx, .n = n, .out = out, .augment = train_augment(ds),
		                .epoch = epoch, .seed = seed };
	struct reader rd = { DLK_BUF_INIT, NULL };
	size_t lo, hi;

	dlk_parallel_range(n, part, nparts, 1, &lo, &hi);
	gather_rows(&j, lo, hi, tout && dlk_dataset_has_targets(ds) ? tout : NULL, &rd);
	reader_release(&rd);
}

void dlk_dataset_gather_range(const struct dlk_dataset *ds, size_t start, size_t n, float *out)
{
	gather(ds, NULL, start, n, eval_noise(ds), 0, 0, out);
}
