/* dlk_data_load(): fetch, verify, unpack, decode, check and scale one split. */
#include "lib/data/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/decode.h"
#include "lib/data/fetch.h"
#include "lib/data/unpack.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

static unsigned long long limit_of(const struct dlk_data *spec)
{
	return spec->max_bytes > 0 ? (unsigned long long)spec->max_bytes : 0;
}

/* Fetches src and records its provenance in ds->sources[ds->n_sources]. */
static int fetch_source(const struct dlk_source *src, const char *what, const struct dlk_data *spec,
                        const struct dlk_data_opts *opts, struct dlk_dataset *ds,
                        struct dlk_fetched *f, struct dlk_err *err)
{
	if (!src->url || !*src->url)
		return dlk_errf(err, DLK_EXIT_CONFIG, "data: no %s source for this split", what);
	if (dlk_fetch(src, spec, opts, f, err) < 0)
		return -1;
	ds->sources[ds->n_sources].url = xstrdup(src->url);
	memcpy(ds->sources[ds->n_sources].sha256, f->sha256, sizeof(f->sha256));
	ds->n_sources++;
	return 0;
}

static int load_idx(const struct dlk_split *sp, const struct dlk_data *spec,
                    const struct dlk_data_opts *opts, struct dlk_dataset *ds,
                    struct dlk_samples *s, struct dlk_err *err)
{
	struct dlk_fetched fi = DLK_FETCHED_INIT, fl = DLK_FETCHED_INIT;
	struct dlk_buf bi = DLK_BUF_INIT, bl = DLK_BUF_INIT;
	struct dlk_idx images = DLK_IDX_INIT, labels = DLK_IDX_INIT;
	int ret = -1;

	if (fetch_source(&sp->images, "images", spec, opts, ds, &fi, err) < 0 ||
	    fetch_source(&sp->labels, "labels", spec, opts, ds, &fl, err) < 0)
		goto out;
	/* a ubyte file's values stay in the unpacked buffer, and each buffer is let go as soon as it
	 * is decoded: the largest thing held is one file's values, once */
	if (dlk_unpack_single(fi.path, sp->images.url, limit_of(spec), opts->progress, opts->progress_ctx,
	                      &bi, err) < 0 ||
	    dlk_idx_decode_buf(&bi, sp->images.url, &images, err) < 0)
		goto out;
	dlk_buf_release(&bi);
	if (dlk_unpack_single(fl.path, sp->labels.url, limit_of(spec), opts->progress, opts->progress_ctx,
	                      &bl, err) < 0 ||
	    dlk_idx_decode_buf(&bl, sp->labels.url, &labels, err) < 0)
		goto out;
	dlk_buf_release(&bl);
	ret = dlk_idx_join(&images, sp->images.url, &labels, sp->labels.url, s, err);
out:
	dlk_idx_release(&images);
	dlk_idx_release(&labels);
	dlk_buf_release(&bi);
	dlk_buf_release(&bl);
	dlk_fetched_release(&fi);
	dlk_fetched_release(&fl);
	return ret;
}

static int load_csv(const struct dlk_split *sp, const struct dlk_data *spec,
                    const struct dlk_data_opts *opts, struct dlk_dataset *ds,
                    struct dlk_samples *s, struct dlk_err *err)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_csv_opts co = { spec->csv_header, spec->csv_label_column };
	int ret = -1;

	if (fetch_source(&sp->source, "csv", spec, opts, ds, &f, err) < 0 ||
	    dlk_unpack_single(f.path, sp->source.url, limit_of(spec), opts->progress, opts->progress_ctx,
	                      &b, err) < 0)
		goto out;
	ret = dlk_csv_decode(b.data, b.len, sp->source.url, &co, s, err);
out:
	dlk_buf_release(&b);
	dlk_fetched_release(&f);
	return ret;
}

static int load_tar(const struct dlk_split *sp, const struct dlk_data *spec,
                    const struct dlk_data_opts *opts, struct dlk_dataset *ds,
                    struct dlk_samples *s, struct dlk_err *err)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct archive *a = NULL;
	int ret = -1;

	if (fetch_source(&sp->source, "tar", spec, opts, ds, &f, err) < 0)
		goto out;
	a = dlk_archive_open_file(f.path, sp->source.url, err);
	if (!a)
		goto out;
	ret = dlk_tar_decode_archive(a, sp->source.url, opts->shape, limit_of(spec), s, err);
out:
	dlk_archive_close(a);
	dlk_fetched_release(&f);
	return ret;
}

static const char *source_name(const struct dlk_data *spec, const struct dlk_split *sp)
{
	return spec->format == DLK_DATA_IDX ? sp->images.url : sp->source.url;
}

int dlk_data_load(const struct dlk_data *spec, const char *split, const struct dlk_data_opts *opts,
                  struct dlk_dataset *out, struct dlk_err *err)
{
	static const struct dlk_data_opts no_opts;
	struct dlk_dataset ds = DLK_DATASET_INIT;
	struct dlk_samples s = DLK_SAMPLES_INIT;
	const struct dlk_split *sp;
	const char *name;
	size_t i, total;
	float scale = spec->scale, mean = spec->mean, std = spec->std;
	int r;

	if (!opts)
		opts = &no_opts;
	if (!split || (strcmp(split, "train") && strcmp(split, "test")))
		return dlk_errf(err, DLK_EXIT_FAIL, "unknown data split '%s' (expected 'train' or 'test')",
		                split ? split : "(null)");
	sp = !strcmp(split, "train") ? &spec->train : &spec->test;
	if (!isfinite(scale) || !isfinite(mean) || !isfinite(std) || std == 0)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "data: scale %g, mean %g, std %g: all must be finite and std non-zero",
		                scale, mean, std);

	switch (spec->format) {
	case DLK_DATA_IDX: r = load_idx(sp, spec, opts, &ds, &s, err); break;
	case DLK_DATA_CSV: r = load_csv(sp, spec, opts, &ds, &s, err); break;
	case DLK_DATA_TAR: r = load_tar(sp, spec, opts, &ds, &s, err); break;
	default: r = dlk_errf(err, DLK_EXIT_CONFIG, "data: unknown format %d", (int)spec->format); break;
	}
	if (r < 0)
		goto fail;
	name = source_name(spec, sp);

	if (s.n == 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': no samples", name);
		goto fail;
	}
	if (opts->shape[0] > 0 || opts->shape[1] > 0 || opts->shape[2] > 0) {
		/* The model's input decides the shape; the data only has to hold as many values per
		 * sample (row-major, so an N x 28 x 28 file feeds a [1, 1, 784] input unchanged). */
		size_t want = (size_t)(opts->shape[0] > 0 ? opts->shape[0] : 0) *
		              (size_t)(opts->shape[1] > 0 ? opts->shape[1] : 0) *
		              (size_t)(opts->shape[2] > 0 ? opts->shape[2] : 0);
		if (want != s.sample_size) {
			dlk_errf(err, DLK_EXIT_CONFIG,
			         "'%s': a sample holds %dx%dx%d = %zu values but the model input is %dx%dx%d = %zu",
			         name, s.shape[0], s.shape[1], s.shape[2], s.sample_size, opts->shape[0],
			         opts->shape[1], opts->shape[2], want);
			dlk_err_hint(err, "make model.input match the data");
			goto fail;
		}
		memcpy(s.shape, opts->shape, sizeof(s.shape));
	}
	if (spec->n_classes > 0) {
		if (s.max_label >= spec->n_classes) {
			for (i = 0; i < s.n && s.y[i] < spec->n_classes; i++)
				;
			dlk_errf(err, DLK_EXIT_CONFIG,
			         "'%s': sample %zu has label %d, but there are only %d classes (labels 0 to %d)",
			         name, i, (int)s.y[i], spec->n_classes, spec->n_classes - 1);
			dlk_err_hint(err, "check data.classes and the last dense layer's units");
			goto fail;
		}
		ds.n_classes = spec->n_classes;
	} else {
		ds.n_classes = s.max_label + 1;
	}

	/* (raw * scale - mean) / std in float32: once per byte value for 8-bit data (gathering
	 * looks the bytes up), once per value for float data; the same floats either way */
	if (s.x8) {
		for (i = 0; i < 256; i++)
			ds.lut[i] = ((float)i * scale - mean) / std;
		ds.storage = DLK_STORE_U8;
		ds.x8 = s.x8;
	} else {
		total = s.n * s.sample_size;
		for (i = 0; i < total; i++)
			s.x[i] = (s.x[i] * scale - mean) / std;
		ds.storage = DLK_STORE_F32;
		ds.x = s.x;
	}
	ds.n = s.n;
	memcpy(ds.shape, s.shape, sizeof(ds.shape));
	ds.sample_size = s.sample_size;
	ds.y = s.y;
	*out = ds;
	return 0;

fail:
	dlk_samples_release(&s);
	dlk_dataset_release(&ds);
	return -1;
}
