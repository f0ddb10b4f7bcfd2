/* dlk_data_load(): fetch, verify, unpack, decode, check and scale one split. */
#include "lib/data/dataset.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <strings.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/data/corpus.h"
#include "lib/data/decode.h"
#include "lib/data/fetch.h"
#include "lib/data/image.h"
#include "lib/data/text.h"
#include "lib/data/unpack.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/machine.h"
#include "lib/util/mem.h"

static unsigned long long limit_of(const struct dlk_data *spec)
{
	return spec->max_bytes > 0 ? (unsigned long long)spec->max_bytes : 0;
}

/* where fetched and derived files are kept: the caller's, the project's data.cache_dir, or
 * .dlk/cache */
static const char *cache_dir_of(const struct dlk_data *spec, const struct dlk_data_opts *opts)
{
	return opts->cache_dir ? opts->cache_dir : spec->cache_dir ? spec->cache_dir : ".dlk/cache";
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
	dlk_dataset_add_source(ds, src->url, f->sha256);
	return 0;
}

static int shard_world(const struct dlk_data_opts *opts)
{
	return opts->shard_world > 1 ? opts->shard_world : 1;
}

struct named_range {
	struct dlk_idx_range r;
	const char *name;
};

static int named_range_sink(void *ctx, const void *data, size_t len, struct dlk_err *err)
{
	struct named_range *nr = ctx;
	return dlk_idx_range_feed(&nr->r, data, len, nr->name, err);
}

/* A shard of an IDX images file, streamed: only its samples are ever held. */
static int idx_images_shard(const char *path, const char *name, const struct dlk_data *spec,
                            const struct dlk_data_opts *opts, struct dlk_idx *images, size_t *first, size_t *total,
                            struct dlk_err *err);

static int head_sink(void *ctx, const void *data, size_t len, struct dlk_err *err)
{
	(void)err;
	dlk_buf_add(ctx, data, len);
	return 0;
}

/* A rank's part of a plain IDX file over http(s), by Range requests: the header (the first bytes),
 * then the part's bytes; the file's size (Content-Range) stands for the rest, and must not change
 * between the requests. 1 when the file is not a plain IDX file (compressed: no range of it can be
 * decoded alone) or the server ignores Range, for the caller to fetch it whole. The rank cannot check a sha256 pin over bytes
 * it does not read: rank 0 fetches the whole file and checks it (see dlk_data_opts.shard_rank). */
static int idx_images_http(const struct dlk_source *src, const struct dlk_data *spec, const struct dlk_data_opts *opts,
                           struct dlk_dataset *ds, struct dlk_idx *images, size_t *first, size_t *total,
                           struct dlk_err *err)
{
	struct named_range nr;
	struct dlk_buf head = DLK_BUF_INIT;
	unsigned long long size = 0, size2 = 0;
	const unsigned char *h;
	int rc = -1;

	dlk_idx_range_init(&nr.r, opts->shard_rank, shard_world(opts));
	nr.name = src->url;
	rc = dlk_http_range(src->url, 0, 4 + 4 * DLK_IDX_MAX_DIMS, head_sink, &head, &size, opts, err);
	if (rc == -2) {
		/* a server without Range: the whole file, as rank 0 fetches it */
		dlk_err_clear(err);
		rc = 1;
		goto out;
	}
	if (rc < 0)
		goto out;
	rc = -1;
	h = (const unsigned char *)head.data;
	if (head.len < 4 || h[0] || h[1] || !dlk_idx_type_name(h[2]) || h[3] < 1 || h[3] > DLK_IDX_MAX_DIMS) {
		rc = 1;
		goto out;
	}
	if (limit_of(spec) && size > limit_of(spec)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is %llu bytes, more than the limit of %llu bytes", src->url, size,
		         limit_of(spec));
		dlk_err_hint(err, "raise data.max_bytes if the data really is this large");
		goto out;
	}
	if (dlk_idx_range_feed(&nr.r, head.data, head.len, src->url, err) < 0)
		goto out;
	if (nr.r.header) {
		unsigned long long lo = (unsigned long long)nr.r.first * nr.r.item;
		unsigned long long hi = lo + (unsigned long long)nr.r.count * nr.r.item;
		unsigned long long from = lo > nr.r.seen ? lo : nr.r.seen;
		dlk_idx_range_skip(&nr.r, from);
		if (hi > from && nr.r.header + from < size) {
			if (dlk_http_range(src->url, nr.r.header + from, hi - from, named_range_sink, &nr, &size2, opts,
			                   err) < 0)
				goto out;
			if (size2 != size) {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s' changed while it was read: %llu bytes, then %llu", src->url,
				         size, size2);
				goto out;
			}
		}
		if (size > nr.r.header)
			dlk_idx_range_skip(&nr.r, size - nr.r.header);
	}
	if (dlk_idx_range_finish(&nr.r, src->url, err) < 0 || dlk_idx_decode_buf(&nr.r.out, src->url, images, err) < 0)
		goto out;
	*first = nr.r.first;
	*total = nr.r.n;
	/* no digest: this rank read a part; rank 0's record has the whole file's */
	dlk_dataset_add_source(ds, src->url, "");
	rc = 0;
out:
	dlk_buf_release(&head);
	dlk_idx_range_release(&nr.r);
	return rc;
}

/* Whether this rank reads its part of the images by HTTP Range: a rank other than 0 of a sharded
 * load, an http(s) URL that the cache does not hold yet (a cached copy is read by range locally). */
static int ranged_http(const struct dlk_source *src, const struct dlk_data *spec, const struct dlk_data_opts *opts)
{
	struct stat st;
	char *cached;
	int fresh;

	if (shard_world(opts) < 2 || opts->shard_rank == 0 || opts->resolve || !src->url ||
	    (strncasecmp(src->url, "http://", 7) && strncasecmp(src->url, "https://", 8)))
		return 0;
	cached = dlk_cache_path(cache_dir_of(spec, opts), src->url);
	fresh = stat(cached, &st) < 0;
	free(cached);
	return fresh;
}

static int load_idx(const struct dlk_split *sp, const struct dlk_data *spec,
                    const struct dlk_data_opts *opts, struct dlk_dataset *ds,
                    struct dlk_samples *s, struct dlk_err *err)
{
	struct dlk_fetched fi = DLK_FETCHED_INIT, fl = DLK_FETCHED_INIT;
	struct dlk_buf bi = DLK_BUF_INIT, bl = DLK_BUF_INIT;
	struct dlk_idx images = DLK_IDX_INIT, labels = DLK_IDX_INIT;
	size_t first = 0, total = 0;
	int32_t whole_max = -1;
	int ret = -1, ranged = 0;

	if (ranged_http(&sp->images, spec, opts)) {
		ranged = idx_images_http(&sp->images, spec, opts, ds, &images, &first, &total, err);
		if (ranged < 0)
			goto out;
		ranged = ranged == 0;
	}
	if ((!ranged && fetch_source(&sp->images, "images", spec, opts, ds, &fi, err) < 0) ||
	    fetch_source(&sp->labels, "labels", spec, opts, ds, &fl, err) < 0)
		goto out;
	/* a ubyte file's values stay in the unpacked buffer, and each buffer is let go as soon as it
	 * is decoded: the largest thing held is one file's values, once (a shard's, when sharded) */
	if (ranged) {
		/* read by range above */
	} else if (shard_world(opts) > 1) {
		if (idx_images_shard(fi.path, sp->images.url, spec, opts, &images, &first, &total, err) < 0)
			goto out;
	} else if (dlk_unpack_single(fi.path, sp->images.url, limit_of(spec), opts->progress, opts->progress_ctx,
	                             &bi, err) < 0 ||
	           dlk_idx_decode_buf(&bi, sp->images.url, &images, err) < 0) {
		goto out;
	}
	dlk_buf_release(&bi);
	if (dlk_unpack_single(fl.path, sp->labels.url, limit_of(spec), opts->progress, opts->progress_ctx,
	                      &bl, err) < 0 ||
	    dlk_idx_decode_buf(&bl, sp->labels.url, &labels, err) < 0)
		goto out;
	dlk_buf_release(&bl);
	if (shard_world(opts) > 1) {
		/* the labels are small: read whole, checked against the images' count, then cut */
		if (labels.ndims != 1 || labels.dims[0] != total) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' has %zu labels but '%s' has %zu images", sp->labels.url,
			         labels.ndims == 1 ? labels.dims[0] : labels.count, sp->images.url, total);
			goto out;
		}
		size_t count = images.dims[0];
		/* the classes are the split's, not the shard's */
		if (labels.data8)
			for (size_t i = 0; i < total; i++)
				if (labels.data8[i] > whole_max)
					whole_max = labels.data8[i];
		if (labels.data8)
			memmove(labels.data8, labels.data8 + first, count);
		else
			memmove(labels.data, labels.data + first, count * sizeof(float));
		labels.dims[0] = labels.count = count;
	}
	ret = dlk_idx_join(&images, sp->images.url, &labels, sp->labels.url, s, err);
	if (ret == 0 && shard_world(opts) > 1) {
		if (whole_max > s->max_label)
			s->max_label = whole_max;
		s->base = first;
		s->total = total;
	}
out:
	dlk_idx_release(&images);
	dlk_idx_release(&labels);
	dlk_buf_release(&bi);
	dlk_buf_release(&bl);
	dlk_fetched_release(&fi);
	dlk_fetched_release(&fl);
	return ret;
}

/* An uncompressed IDX file read by range: its header, then a seek to the shard's bytes, which
 * are all that is read; the file's size stands for the bytes passed over. 1 when the file is not
 * a plain IDX file (compressed, an archive): the caller streams it instead. */
static int idx_range_raw(const char *path, const char *name, struct dlk_idx_range *r, struct dlk_err *err)
{
	unsigned char buf[65536];
	struct stat st;
	char msg[512];
	FILE *fp = dlk_fopen_regular(path, msg, sizeof(msg));
	size_t got, hl;
	int rc = -1;

	if (!fp)
		return dlk_errf(err, DLK_EXIT_FAIL, "'%s': %s", name, msg);
	got = fread(buf, 1, 4, fp);
	if (got < 4 || buf[0] || buf[1] || !dlk_idx_type_name(buf[2]) || buf[3] < 1 || buf[3] > DLK_IDX_MAX_DIMS) {
		rc = 1;
		goto out;
	}
	hl = 4 * (size_t)buf[3];
	got += fread(buf + 4, 1, hl, fp);
	if (dlk_idx_range_feed(r, buf, got, name, err) < 0)
		goto out;
	if (got == 4 + hl) {
		unsigned long long lo = (unsigned long long)r->first * r->item, left = (unsigned long long)r->count * r->item;
		if (fstat(fileno(fp), &st) < 0 || fseeko(fp, (off_t)(r->header + lo), SEEK_SET) < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "'%s': cannot seek in %s: %s", name, path, strerror(errno));
			goto out;
		}
		dlk_idx_range_skip(r, lo);
		while (left > 0 && (got = fread(buf, 1, left < sizeof(buf) ? (size_t)left : sizeof(buf), fp)) > 0) {
			if (dlk_idx_range_feed(r, buf, got, name, err) < 0)
				goto out;
			left -= got;
		}
		if (ferror(fp)) {
			dlk_errf(err, DLK_EXIT_FAIL, "'%s': cannot read %s: %s", name, path, strerror(errno));
			goto out;
		}
		/* the rest of the file, not read: its length still has to be right */
		if (!left && (unsigned long long)st.st_size > r->header)
			dlk_idx_range_skip(r, (unsigned long long)st.st_size - r->header);
	}
	rc = 0;
out:
	fclose(fp);
	return rc;
}

static int idx_images_shard(const char *path, const char *name, const struct dlk_data *spec,
                            const struct dlk_data_opts *opts, struct dlk_idx *images, size_t *first, size_t *total,
                            struct dlk_err *err)
{
	struct named_range nr;
	int rc = -1, raw;

	dlk_idx_range_init(&nr.r, opts->shard_rank, shard_world(opts));
	nr.name = name;
	raw = idx_range_raw(path, name, &nr.r, err);
	if (raw < 0)
		goto out;
	if (raw == 1 && dlk_unpack_single_to(path, name, limit_of(spec), opts->progress, opts->progress_ctx,
	                                     named_range_sink, &nr, err) < 0)
		goto out;
	if (dlk_idx_range_finish(&nr.r, name, err) < 0 || dlk_idx_decode_buf(&nr.r.out, name, images, err) < 0)
		goto out;
	*first = nr.r.first;
	*total = nr.r.n;
	rc = 0;
out:
	dlk_idx_range_release(&nr.r);
	return rc;
}

static int load_csv(const struct dlk_split *sp, const struct dlk_data *spec,
                    const struct dlk_data_opts *opts, struct dlk_dataset *ds,
                    struct dlk_samples *s, struct dlk_err *err)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_csv_opts co = { spec->csv_header, spec->csv_label_column, opts->shard_rank, shard_world(opts),
		                   (const char *const *)spec->classes, spec->classes ? spec->n_classes : 0,
		                   spec->csv_targets };
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

/* Appends the samples of b to a (moving them), promoting a to float when they differ in kind. */
static int samples_append(struct dlk_samples *a, struct dlk_samples *b, const char *name, struct dlk_err *err)
{
	size_t m = b->sample_size;

	if (!a->n && !a->x && !a->x8) {
		int32_t keep = a->max_label > b->max_label ? a->max_label : b->max_label;
		*a = *b;
		a->max_label = keep;
		memset(b, 0, sizeof(*b));
		return 0;
	}
	if (m != a->sample_size)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': its samples hold %zu values, those of the shards before it %zu",
		                name, m, a->sample_size);
	if (a->x8 && !b->x8) {
		float *x = xmalloc((a->n ? a->n : 1) * m * sizeof(float));
		for (size_t i = 0; i < a->n * m; i++)
			x[i] = a->x8[i];
		free(a->x8);
		a->x8 = NULL;
		a->x = x;
	}
	a->y = xrealloc(a->y, (a->n + b->n) * sizeof(int32_t));
	memcpy(a->y + a->n, b->y, b->n * sizeof(int32_t));
	if (a->t8) { /* paired shards: targets of one shape, the model's output */
		a->t8 = xrealloc(a->t8, (a->n + b->n) * a->target_size);
		memcpy(a->t8 + a->n * a->target_size, b->t8, b->n * a->target_size);
	}
	if (a->x8) {
		a->x8 = xrealloc(a->x8, (a->n + b->n) * m);
		memcpy(a->x8 + a->n * m, b->x8, b->n * m);
	} else {
		a->x = xrealloc(a->x, (a->n + b->n) * m * sizeof(float));
		if (b->x8)
			for (size_t i = 0; i < b->n * m; i++)
				a->x[a->n * m + i] = b->x8[i];
		else
			memcpy(a->x + a->n * m, b->x, b->n * m * sizeof(float));
	}
	a->n += b->n;
	if (b->max_label > a->max_label)
		a->max_label = b->max_label;
	dlk_samples_release(b);
	return 0;
}

/* Keeps samples [from, to) of s. */
static void samples_cut(struct dlk_samples *s, size_t from, size_t to)
{
	size_t m = s->sample_size, n = to - from;

	memmove(s->y, s->y + from, n * sizeof(int32_t));
	s->y = xrealloc(s->y, (n ? n : 1) * sizeof(int32_t));
	if (s->files) {
		dlk_image_files_cut(s->files, from, to);
	} else if (s->x8) {
		memmove(s->x8, s->x8 + from * m, n * m);
		s->x8 = xrealloc(s->x8, (n ? n : 1) * m);
	} else {
		memmove(s->x, s->x + from * m, n * m * sizeof(float));
		s->x = xrealloc(s->x, (n ? n : 1) * m * sizeof(float));
	}
	if (s->t) {
		memmove(s->t, s->t + from * s->target_size, n * s->target_size * sizeof(float));
		s->t = xrealloc(s->t, (n ? n : 1) * s->target_size * sizeof(float));
	}
	if (s->t8) {
		memmove(s->t8, s->t8 + from * s->target_size, n * s->target_size);
		s->t8 = xrealloc(s->t8, (n ? n : 1) * s->target_size);
	}
	s->n = n;
}

/* data.images.decode: whether files listed for n samples are decoded as the samples are read */
static int stream_files(const struct dlk_data *spec, const struct dlk_data_opts *opts, const struct dlk_image_files *f)
{
	unsigned long long mem, bytes = (unsigned long long)f->n * (f->sample_size + f->tsample_size);

	if (spec->images.decode != DLK_DECODE_AUTO)
		return spec->images.decode == DLK_DECODE_STREAM;
	mem = opts->memory ? opts->memory : dlk_machine_memory();
	return mem && bytes > mem / 4;
}

/* A compressed shard's tar, unpacked once into the cache (named by the compressed bytes' digest)
 * so that its members can be read at their offsets (data.images.decode: stream). A copy already
 * there is used while its bytes hash to what was recorded as it was written; else it is
 * unpacked again. The caller frees the path. */
struct tar_sink {
	FILE *f;
	struct dlk_sha256 h;
};

static int tar_sink_write(void *ctx, const void *data, size_t len, struct dlk_err *err)
{
	struct tar_sink *t = ctx;
	dlk_sha256_update(&t->h, data, len);
	if (fwrite(data, 1, len, t->f) != len)
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot write the unpacked shard: %s", strerror(errno));
	return 0;
}

static char *unpacked_shard(const struct dlk_data *spec, const struct dlk_data_opts *opts, const struct dlk_fetched *fs,
                            const char *name, struct dlk_err *err)
{
	const char *dir = cache_dir_of(spec, opts);
	char *path = xasprintf("%s/unpacked-%.64s.tar", dir, fs->sha256), *sum = xasprintf("%s.sha256", path);
	char *part = xasprintf("%s.part-%ld", path, (long)getpid()), hex[65], msg[256];
	struct dlk_buf b = DLK_BUF_INIT;
	struct tar_sink t = { NULL, { 0 } };
	int ok = 0;

	if (!dlk_buf_read_file(&b, sum, 128, msg, sizeof(msg)) && b.len == 64 && !dlk_sha256_file(path, hex) &&
	    !memcmp(b.data, hex, 64)) {
		ok = 1;
		goto out;
	}
	if (dlk_mkdir_p(dir, err) < 0)
		goto out;
	if (!(t.f = fopen(part, "wbx"))) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", part, strerror(errno));
		goto out;
	}
	dlk_sha256_begin(&t.h);
	int r = dlk_decompress_to(fs->path, name, limit_of(spec), opts->progress, opts->progress_ctx, tar_sink_write, &t,
	                          err);
	if (fclose(t.f) != 0 && r == 0)
		r = dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", part, strerror(errno));
	dlk_sha256_end(&t.h, hex);
	if (r < 0 || rename(part, path) < 0) {
		if (r == 0)
			dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", path, strerror(errno));
		unlink(part);
		goto out;
	}
	ok = dlk_write_file_atomic(sum, hex, 64, 0644, err) == 0;
out:
	dlk_buf_release(&b);
	free(sum);
	free(part);
	if (!ok) {
		free(path);
		return NULL;
	}
	return path;
}

/* Appends the labels of an indexed shard b (its members in b_index) to a's (a->files), freeing b. */
static void members_append(struct dlk_samples *a, struct dlk_samples *b, struct dlk_image_files *b_index)
{
	if (!a->files) {
		int32_t keep = a->max_label > b->max_label ? a->max_label : b->max_label;
		dlk_samples_release(a);
		*a = *b;
		a->files = b_index;
		a->max_label = keep;
		memset(b, 0, sizeof(*b));
		return;
	}
	a->y = xrealloc(a->y, (a->n + b->n) * sizeof(int32_t));
	memcpy(a->y + a->n, b->y, b->n * sizeof(int32_t));
	a->n += b->n;
	if (b->max_label > a->max_label)
		a->max_label = b->max_label;
	dlk_image_files_join(a->files, b_index);
	dlk_samples_release(b);
}

/* the shape paired images' targets are decoded to: the model's output, else its input's */
static const int *target_shape(const struct dlk_data_opts *opts)
{
	return opts->target_shape[0] > 0 ? opts->target_shape : opts->shape;
}

/* The tar shards files[0, n) into s (with paired_images(), their targets too): every one fetched once; with format images and
 * data.images.decode other than once, indexed member by member when every shard allows it and
 * streamed when the decision says so (stream_files); else decoded. */
static int load_tars(const struct dlk_source *files, int n, const struct dlk_data *spec,
                     const struct dlk_data_opts *opts, struct dlk_dataset *ds, struct dlk_samples *s,
                     struct dlk_err *err)
{
	struct dlk_fetched *fs = xcalloc((size_t)(n ? n : 1), sizeof(*fs));
	int by_member = spec->format == DLK_DATA_IMAGES && spec->images.decode != DLK_DECODE_ONCE, ret = -1;
	const int *tshape = project_paired_images(spec, opts->task) ? target_shape(opts) : NULL;

	for (int i = 0; i < n; i++)
		if (fetch_source(&files[i], "tar", spec, opts, ds, &fs[i], err) < 0)
			goto out;
	for (int i = 0; i < n && by_member; i++) {
		struct dlk_samples one = DLK_SAMPLES_INIT;
		struct dlk_image_files *idx = NULL;
		struct archive *a = dlk_archive_open_file(fs[i].path, files[i].url, err);
		int r = a ? dlk_tar_index_archive(a, files[i].url, fs[i].path, opts->shape, tshape, &one, &idx, err) : -1;
		dlk_archive_close(a);
		if (r == 1 && spec->images.decode == DLK_DECODE_STREAM) {
			/* compressed: streamed from its tar, unpacked once into the cache */
			char *plain = unpacked_shard(spec, opts, &fs[i], files[i].url, err);
			if (!plain)
				goto out;
			a = dlk_archive_open_file(plain, files[i].url, err);
			r = a ? dlk_tar_index_archive(a, files[i].url, plain, opts->shape, tshape, &one, &idx, err) : -1;
			dlk_archive_close(a);
			free(plain);
		}
		if (r < 0)
			goto out;
		if (r == 0 && one.sample_size != (s->files ? s->sample_size : one.sample_size)) {
			dlk_samples_release(&one);
			dlk_image_files_free(idx);
			r = 1;
		}
		if (r == 1) {
			/* not every shard can be read by member: all are decoded */
			by_member = 0;
			dlk_samples_release(s);
			break;
		}
		members_append(s, &one, idx);
	}
	if (by_member && s->files && !stream_files(spec, opts, s->files)) {
		by_member = 0;
		dlk_samples_release(s);
	}
	if (by_member && s->files && s->files->tnames)
		s->target_size = s->files->tsample_size;
	for (int i = 0; i < n && !by_member; i++) {
		struct dlk_samples one = DLK_SAMPLES_INIT;
		struct archive *a = dlk_archive_open_file(fs[i].path, files[i].url, err);
		int r = a ? dlk_tar_decode_archive(a, files[i].url, opts->shape, tshape, limit_of(spec), &one, err) : -1;
		dlk_archive_close(a);
		if (r < 0 || samples_append(s, &one, files[i].url, err) < 0) {
			dlk_samples_release(&one);
			goto out;
		}
	}
	ret = 0;
out:
	for (int i = 0; i < n; i++)
		dlk_fetched_release(&fs[i]);
	free(fs);
	return ret;
}

static int load_tar(const struct dlk_split *sp, const struct dlk_data *spec,
                    const struct dlk_data_opts *opts, struct dlk_dataset *ds,
                    struct dlk_samples *s, struct dlk_err *err)
{
	int world = shard_world(opts), nf = sp->shards ? sp->n_shards : 1, f0 = 0, f1 = nf;
	const struct dlk_source *files = sp->shards ? sp->shards : &sp->source;
	int by_file = world > 1 && nf >= world;

	/* a worker's share of the shards: whole files when there are enough of them to go round */
	if (by_file) {
		size_t b, e;
		dlk_part_range((size_t)nf, opts->shard_rank, world, &b, &e);
		f0 = (int)b;
		f1 = (int)e;
		ds->by_file = 1;
		ds->files_first = f0;
		ds->files_count = f1 - f0;
	}
	if (load_tars(files + f0, f1 - f0, spec, opts, ds, s, err) < 0)
		return -1;
	if (world > 1 && !by_file) {
		/* fewer files than workers: every worker reads them all and keeps its range */
		size_t b, e, total = s->n;
		dlk_part_range(total, opts->shard_rank, world, &b, &e);
		samples_cut(s, b, e);
		s->base = b;
		s->total = total;
	}
	/* rank 0's record of the data names every file of the split with the digest of its bytes:
	 * a pinned file is checked against its pin by the rank that loads it (a mismatch fails the
	 * run), so is a dataset's file against its manifest's digest; an unpinned one is fetched and
	 * hashed here too (not decoded) */
	if (by_file && opts->shard_rank == 0)
		for (int i = 0; i < nf; i++) {
			struct dlk_fetched f = DLK_FETCHED_INIT;
			if (i >= f0 && i < f1)
				continue;
			if (files[i].sha256) {
				dlk_dataset_add_source(ds, files[i].url, files[i].sha256);
				continue;
			}
			if (opts->resolve && opts->digest) {
				/* a dataset's file: its verified manifest has the digest */
				char hex[65];
				if (opts->digest(opts->resolve_ctx, files[i].url, hex, err) < 0)
					return -1;
				dlk_dataset_add_source(ds, files[i].url, hex);
				continue;
			}
			if (fetch_source(&files[i], "tar", spec, opts, ds, &f, err) < 0)
				return -1;
			dlk_fetched_release(&f);
		}
	return 0;
}

/* The class names the training split found, for the test split to number its classes the same. */
static void take_train_classes(const struct dlk_data *spec, const struct dlk_data_opts *opts,
                               const char *const **classes, int *n)
{
	*classes = (const char *const *)spec->classes;
	*n = spec->classes ? spec->n_classes : 0;
	if (!*classes && opts->train && opts->train->class_names) {
		*classes = (const char *const *)opts->train->class_names;
		*n = opts->train->n_class_names;
	}
}

/* An image folder's (or paired folders') listed files into s, with their labels (taken; NULL:
 * all 0): this rank's part of them when the split is sharded, decoded now or kept to be decoded as
 * the samples are read (data.images.decode). f is taken too, freed or kept in s->files. */
/* ---- a folder inside a dataset (data.dataset) ---- */

/* a path as the dataset's manifest names it: without "./" in front (the image folder lists join
 * the top folder "." to what is below it) */
static const char *in_dataset(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return p;
}

/* a folder of the dataset as its manifest's paths begin: without "./" in front and '/' behind
 * ("." the whole dataset; caller frees) */
static char *dataset_dir(const char *url)
{
	const char *d = in_dataset(url);
	size_t n = strlen(d);
	while (n > 1 && d[n - 1] == '/')
		n--;
	return n ? xstrndup(d, n) : xstrdup(".");
}

/* The dataset's files (every path of its manifest), listed once, and the folder lists' view
 * of them */
struct ds_tree {
	char **paths;
	size_t n;
	struct dlk_image_paths view;
};

static void ds_tree_free(struct ds_tree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->paths[i]);
	free(t->paths);
	t->paths = NULL;
	t->n = 0;
}

/* Whether source url is a folder of the dataset (1: t holds the dataset's paths and *tree their
 * view), or not (0: a file of it, or nothing it has, which the caller reads as a tar shard and
 * names); -1 on error. */
static int dataset_folder(const struct dlk_data_opts *opts, const char *url, struct ds_tree *t,
                          struct dlk_image_tree *tree, struct dlk_err *err)
{
	if (!opts->list)
		return 0;
	if (!t->paths && opts->list(opts->resolve_ctx, ".", &t->paths, &t->n, err) < 0)
		return -1;
	t->view.paths = t->paths;
	t->view.n = t->n;
	*tree = dlk_image_paths_tree(&t->view);
	char *d = dataset_dir(url);
	int r = dlk_image_paths_has_dir(&t->view, d);
	free(d);
	return r;
}

/* A dataset folder's files made local files, each fetched (or read in place) and checked
 * against the digest its manifest lists, as dlk_fetch() checks a dataset's file. After a sharded
 * split's cut: a worker fetches its own part only. */
static int fetch_files(const struct dlk_data *spec, const struct dlk_data_opts *opts, struct dlk_image_files *f,
                       struct dlk_err *err)
{
	for (size_t i = 0; i < f->n; i++)
		for (int k = 0; k < (f->tpaths ? 2 : 1); k++) {
			char **p = k ? &f->tpaths[i] : &f->paths[i];
			struct dlk_source src = { .url = (char *)in_dataset(*p) };
			struct dlk_fetched got = DLK_FETCHED_INIT;
			if (dlk_fetch(&src, spec, opts, &got, err) < 0)
				return -1;
			free(*p);
			*p = got.path;
			got.path = NULL;
			dlk_fetched_release(&got);
		}
	return 0;
}

/* f's samples (a folder's, or a dataset folder's with in_dataset: its files fetched first) into
 * s: a worker's part of them, read as batches take them or decoded now */
static int take_files(const struct dlk_data *spec, const struct dlk_data_opts *opts, struct dlk_image_files *f,
                      int32_t *labels, int in_dataset, struct dlk_samples *s, struct dlk_err *err)
{
	size_t total = f->n;

	if (!labels)
		labels = xcalloc(total ? total : 1, sizeof(*labels));
	if (shard_world(opts) > 1) {
		size_t b, e;
		dlk_part_range(total, opts->shard_rank, shard_world(opts), &b, &e);
		dlk_image_files_cut(f, b, e);
		memmove(labels, labels + b, (e - b) * sizeof(*labels));
		s->base = b;
		s->total = total;
	}
	s->n = f->n;
	memcpy(s->shape, f->shape, sizeof(s->shape));
	s->sample_size = f->sample_size;
	s->y = labels;
	s->max_label = -1;
	for (size_t i = 0; i < s->n; i++)
		if (s->y[i] > s->max_label)
			s->max_label = s->y[i];
	if (f->tnames)
		s->target_size = f->tsample_size;
	if (in_dataset && fetch_files(spec, opts, f, err) < 0) {
		dlk_image_files_free(f);
		return -1;
	}
	if (stream_files(spec, opts, f)) {
		/* a file that is no image by its first bytes stops the run now, not when a batch takes it */
		if (dlk_image_files_check(f, 0, err) < 0) {
			dlk_image_files_free(f);
			return -1;
		}
		s->files = f;
		return 0;
	}
	/* the targets stay bytes: byte / 255 as batches are gathered */
	int r = dlk_image_files_decode(f, 0, &s->x8, f->tnames ? &s->t8 : NULL, err);
	dlk_image_files_free(f);
	return r;
}

/* A folder's local path: a plain path or file:// URL (against the project's folder), or
 * pvc://CLAIM/PATH on the claim the pod mounts; NULL with err for anything else (an https:// URL
 * is then no folder: the caller reads it as a tar shard). */
static char *folder_path(const char *url, const struct dlk_data_opts *opts, struct dlk_err *err)
{
	if (!strncmp(url, "pvc://", 6))
		return dlk_pvc_resolve(url, opts->pvc_root, err);
	return dlk_local_path(url, opts->base_dir, err);
}

/* format images with targets: two folders of images paired by name (local ones, or folders of
 * the dataset), the targets as floats pixel / 255 (0 to 1, the range PSNR and SSIM take) in the
 * model's output shape */
static int load_pairs(const struct dlk_split *sp, const struct dlk_data *spec, const struct dlk_data_opts *opts,
                      struct dlk_samples *s, struct dlk_err *err)
{
	const struct dlk_source *src[2] = { &sp->source, &sp->targets };
	const int *tshape = target_shape(opts);
	char *path[2] = { NULL, NULL };
	struct dlk_image_files *files;
	struct ds_tree t = { 0 };
	struct dlk_image_tree tree;
	int ret = -1;

	for (int k = 0; k < 2; k++) {
		struct stat st;
		if (!src[k]->url) {
			dlk_errf(err, DLK_EXIT_CONFIG, "paired images need both 'source' and 'targets' folders");
			goto out;
		}
		if (opts->resolve) {
			int r = dataset_folder(opts, src[k]->url, &t, &tree, err);
			if (r < 0)
				goto out;
			if (!r) {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the dataset has no folder of that name", src[k]->url);
				dlk_err_hint(err, "with data.dataset, 'source' and 'targets' are folders inside it (train/noisy, "
				             "train/clean); 'dlk data show' lists its files");
				goto out;
			}
			path[k] = dataset_dir(src[k]->url);
			continue;
		}
		if (strstr(src[k]->url, "://") && strncmp(src[k]->url, "file://", 7) && strncmp(src[k]->url, "pvc://", 6)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': paired images are read from folders, not a URL", src[k]->url);
			dlk_err_hint(err, "put both folders on a claim the pod mounts (pvc://CLAIM/PATH) or in its image, or "
			             "write the pairs as tar shards of KEY.png + KEY.target.png members, which a URL can name "
			             "(without 'targets')");
			goto out;
		}
		if (src[k]->sha256) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a folder has no sha256 to pin", src[k]->url);
			goto out;
		}
		if (!(path[k] = folder_path(src[k]->url, opts, err)))
			goto out;
		if (stat(path[k], &st) || !S_ISDIR(st.st_mode)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a folder", src[k]->url);
			dlk_err_hint(err, "paired images are two folders holding files of the same names");
			goto out;
		}
	}
	if (dlk_image_pairs_list(opts->resolve ? &tree : NULL, path[0], sp->source.url, path[1], sp->targets.url,
	                         opts->shape, tshape, &files, err) < 0 ||
	    take_files(spec, opts, files, NULL, opts->resolve != NULL, s, err) < 0)
		goto out;
	ret = 0;
out:
	ds_tree_free(&t);
	free(path[0]);
	free(path[1]);
	return ret;
}

/* format images: a folder of class folders (a local one, or a folder of the dataset), or tar
 * shards of KEY.png/KEY.jpg + KEY.cls */
static int load_images(const struct dlk_split *sp, const struct dlk_data *spec, const struct dlk_data_opts *opts,
                       struct dlk_dataset *ds, struct dlk_samples *s, struct dlk_err *err)
{
	const char *const *classes;
	struct dlk_image_files *files;
	struct ds_tree t = { 0 };
	struct dlk_image_tree tree;
	int32_t *labels;
	int n_classes;
	struct stat st;
	char *path;
	int r;

	if (sp->targets.url) {
		if (load_pairs(sp, spec, opts, s, err) < 0)
			return -1;
		dlk_dataset_add_source(ds, sp->source.url, "");
		dlk_dataset_add_source(ds, sp->targets.url, "");
		return 0;
	}
	if (sp->shards || !sp->source.url)
		return load_tar(sp, spec, opts, ds, s, err);
	if (opts->resolve) {
		/* a path inside the dataset: a folder of it, else a shard */
		if ((r = dataset_folder(opts, sp->source.url, &t, &tree, err)) <= 0) {
			ds_tree_free(&t);
			return r < 0 ? -1 : load_tar(sp, spec, opts, ds, s, err);
		}
		path = dataset_dir(sp->source.url);
	} else {
		if (strstr(sp->source.url, "://") && strncmp(sp->source.url, "file://", 7) &&
		    strncmp(sp->source.url, "pvc://", 6))
			return load_tar(sp, spec, opts, ds, s, err);
		if (!(path = folder_path(sp->source.url, opts, err)))
			return -1;
		if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
			free(path);
			return load_tar(sp, spec, opts, ds, s, err);
		}
	}
	if (project_paired_images(spec, opts->task)) {
		free(path);
		ds_tree_free(&t);
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': model.task image reads paired images, and this folder has no 'targets' beside it",
		         sp->source.url);
		return dlk_err_hint(err, "give 'targets', the folder of target images whose names match the inputs', or "
		                    "tar shards of KEY.png and KEY.target.png members as 'source'");
	}
	if (sp->source.sha256) {
		free(path);
		ds_tree_free(&t);
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a folder has no sha256 to pin", sp->source.url);
		return dlk_err_hint(err, "pin a tar shard of it instead, or push it as a dataset (dlk data push)");
	}
	take_train_classes(spec, opts, &classes, &n_classes);
	r = dlk_image_folder_list(opts->resolve ? &tree : NULL, path, sp->source.url, opts->shape, classes, n_classes,
	                          &files, &labels, classes ? NULL : &ds->class_names, &n_classes, err);
	free(path);
	ds_tree_free(&t);
	if (r < 0)
		return -1;
	if (ds->class_names)
		ds->n_class_names = ds->n_classes = n_classes;
	/* a folder has no single digest: its provenance is its path (in a dataset, the dataset's id
	 * pins its files) */
	dlk_dataset_add_source(ds, sp->source.url, "");
	return take_files(spec, opts, files, labels, opts->resolve != NULL, s, err);
}

/* the name without a compression suffix, to tell JSON Lines from CSV */
static int jsonl_source(const char *url)
{
	static const char *const comp[] = { ".gz", ".xz", ".bz2", ".zst" };
	char *n = xstrdup(url);
	size_t len = strlen(n);
	for (int i = 0; i < 4; i++) {
		size_t e = strlen(comp[i]);
		if (len > e && !strcasecmp(n + len - e, comp[i]))
			n[len - e] = 0;
	}
	int r = dlk_text_is_jsonl_name(n);
	free(n);
	return r;
}

static int read_local(const char *url, const struct dlk_data_opts *opts, struct dlk_buf *b, struct dlk_err *err)
{
	char msg[256], *path = dlk_local_path(url, opts->base_dir, err);
	int r;
	if (!path)
		return -1;
	r = dlk_buf_read_file(b, path, 1u << 30, msg, sizeof(msg));
	free(path);
	if (r < 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "cannot read '%s': %s", url, msg);
	return 0;
}

static struct dlk_tokenizer *clone_tokenizer(const struct dlk_tokenizer *t)
{
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_tokenizer *c = NULL;
	struct dlk_err e = DLK_ERR_INIT;
	dlk_tokenizer_save(t, &b);
	dlk_tokenizer_load(b.data, b.len, "tokenizer", &c, &e);
	dlk_buf_release(&b);
	return c;
}

/* The tokenizer of data.text: the training split's for the test split, else built (the byte one),
 * read (a GPT-2 pair) or trained on every row of the split (sharded or not, so that every rank
 * trains the same one). */
static int text_tokenizer(const struct dlk_data *spec, const struct dlk_data_opts *opts,
                          const struct dlk_text_rows *rows, struct dlk_tokenizer **out, struct dlk_err *err)
{
	const struct dlk_text_spec *ts = &spec->text;

	if (opts->train && opts->train->tokenizer)
		return (*out = clone_tokenizer(opts->train->tokenizer)) ? 0 : dlk_errf(err, DLK_EXIT_FAIL, "cannot copy the tokenizer");
	if (ts->tokenizer == DLK_TOKENIZER_BYTE) {
		*out = dlk_tokenizer_byte();
		return 0;
	}
	if (ts->vocab || ts->merges) {
		struct dlk_buf v = DLK_BUF_INIT, m = DLK_BUF_INIT;
		int r = -1;
		if (!ts->vocab || !ts->merges)
			return dlk_errf(err, DLK_EXIT_CONFIG, "data.text: give both vocab and merges (a GPT-2 pair), or neither");
		if (read_local(ts->vocab, opts, &v, err) == 0 && read_local(ts->merges, opts, &m, err) == 0)
			r = dlk_bpe_read_gpt2(v.data, v.len, ts->vocab, m.data, m.len, ts->merges, out, err);
		dlk_buf_release(&v);
		dlk_buf_release(&m);
		return r;
	}
	struct dlk_bpe_counter *c = dlk_bpe_counter_new();
	for (size_t i = 0; i < rows->n; i++)
		dlk_bpe_counter_add(c, rows->text[i], rows->len[i]);
	*out = dlk_bpe_counter_train(c, ts->vocab_size, err);
	dlk_bpe_counter_free(c);
	return *out ? 0 : -1;
}

/* The tokens of a corpus: the token cache's when it holds this corpus and tokenizer recipe, else
 * tokenized now (training the BPE on the corpus first where asked) and cached. *tok may hold the
 * tokenizer already (byte, a GPT-2 pair, the training split's); recipe names it. */
static int corpus_tokens(const struct dlk_data *spec, const struct dlk_data_opts *opts, const struct dlk_buf *text,
                         const char *recipe, struct dlk_tokenizer **tok, int32_t **ids, size_t *n,
                         struct dlk_err *err)
{
	const char *dir = cache_dir_of(spec, opts);
	char key[65], msg[256];
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_err e = DLK_ERR_INIT;
	struct dlk_tokenizer *ct;
	char *path;
	int r = -1;

	dlk_corpus_key(text->data, text->len, recipe, key);
	path = xasprintf("%s/tokens-%.32s.tok", dir, key);
	if (dlk_buf_read_file(&b, path, (size_t)1 << 34, msg, sizeof(msg)) == 0 &&
	    dlk_token_cache_parse(b.data, b.len, path, &ct, ids, n, &e) == 0) {
		/* a cache hit: its tokenizer is the recipe's (a trained BPE included) */
		dlk_tokenizer_free(*tok);
		*tok = ct;
		r = 0;
		goto out;
	}
	dlk_err_clear(&e);
	if (!*tok) {
		struct dlk_bpe_counter *c = dlk_bpe_counter_new();
		dlk_bpe_counter_add(c, text->data, text->len);
		*tok = dlk_bpe_counter_train(c, spec->text.vocab_size, err);
		dlk_bpe_counter_free(c);
		if (!*tok)
			goto out;
	}
	*n = dlk_tokenizer_encode(*tok, text->data, text->len, NULL, 0);
	*ids = xmalloc(sizeof(int32_t) * (*n + 1));
	dlk_tokenizer_encode(*tok, text->data, text->len, *ids, *n);
	dlk_buf_reset(&b);
	dlk_token_cache_write(&b, *tok, *ids, *n);
	/* a cache that cannot be written costs the next run the tokenizing, nothing else */
	if (dlk_mkdir_p(dir, &e) == 0)
		dlk_write_file_atomic(path, b.data, b.len, 0644, &e);
	dlk_err_clear(&e);
	r = 0;
out:
	dlk_buf_release(&b);
	free(path);
	return r;
}

/* format text with task lm: a plain text corpus, tokenized (or read from the token cache), packed
 * into sequences of the model's input length plus one (lib/data/corpus.h). The test split is
 * data.test's corpus, or the end of the training corpus with data.validation. */
static int load_corpus(const struct dlk_split *sp, const struct dlk_data *spec, const struct dlk_data_opts *opts,
                       struct dlk_dataset *ds, struct dlk_samples *s, struct dlk_err *err)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct dlk_buf text = DLK_BUF_INIT, tb = DLK_BUF_INIT;
	const struct dlk_text_spec *ts = &spec->text;
	int T = opts->shape[0] * opts->shape[1] * opts->shape[2], test = sp == &spec->test, ret = -1;
	const struct dlk_split *from = test && spec->validation > 0 ? &spec->train : sp;
	struct dlk_tokenizer *tok = NULL;
	int32_t *ids = NULL;
	char *recipe = NULL;
	size_t n = 0, lo, hi;

	if (opts->shape[0] != 1 || opts->shape[1] != 1 || T < 1)
		return dlk_errf(err, DLK_EXIT_CONFIG, "task lm needs a flat model.input: [CONTEXT], the tokens per sequence");
	if (fetch_source(&from->source, "text corpus", spec, opts, ds, &f, err) < 0 ||
	    dlk_corpus_read(f.path, from->source.url, limit_of(spec), &text, err) < 0)
		goto out;
	if (!text.len) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the corpus is empty", from->source.url);
		goto out;
	}
	if (opts->train && opts->train->tokenizer) {
		tok = clone_tokenizer(opts->train->tokenizer);
	} else if (ts->tokenizer == DLK_TOKENIZER_BYTE) {
		tok = dlk_tokenizer_byte();
	} else if (ts->vocab || ts->merges) {
		struct dlk_buf v = DLK_BUF_INIT, m = DLK_BUF_INIT;
		int r = -1;
		if (!ts->vocab || !ts->merges)
			dlk_errf(err, DLK_EXIT_CONFIG, "data.text: give both vocab and merges (a GPT-2 pair), or neither");
		else if (read_local(ts->vocab, opts, &v, err) == 0 && read_local(ts->merges, opts, &m, err) == 0)
			r = dlk_bpe_read_gpt2(v.data, v.len, ts->vocab, m.data, m.len, ts->merges, &tok, err);
		dlk_buf_release(&v);
		dlk_buf_release(&m);
		if (r < 0)
			goto out;
	}
	if (tok) {
		dlk_tokenizer_save(tok, &tb);
		dlk_buf_addc(&tb, 0);
		recipe = xstrdup(tb.data);
	} else {
		recipe = xasprintf("bpe %d\n", ts->vocab_size);
	}
	if (corpus_tokens(spec, opts, &text, recipe, &tok, &ids, &n, err) < 0)
		goto out;
	if (from == sp && !test)
		dlk_corpus_split(n, spec->validation, 0, &lo, &hi);
	else if (from != sp)
		dlk_corpus_split(n, spec->validation, 1, &lo, &hi);
	else
		lo = 0, hi = n;
	s->n = dlk_corpus_pack(ids + lo, hi - lo, T, &s->x, &s->t);
	if (!s->n) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %zu tokens%s, too few for one sequence of %d + 1", from->source.url,
		         hi - lo, from != sp ? " held out for validation" : "", T);
		dlk_err_hint(err, "give a longer corpus, a shorter model.input%s", spec->validation > 0 ? " or a smaller "
		             "data.validation" : "");
		goto out;
	}
	s->target_size = (size_t)T;
	s->y = xcalloc(s->n, sizeof(*s->y));
	s->shape[0] = s->shape[1] = 1;
	s->shape[2] = T;
	s->sample_size = (size_t)T;
	s->max_label = -1;
	ds->tokenizer = tok;
	tok = NULL;
	if (shard_world(opts) > 1) {
		size_t total = s->n;
		dlk_part_range(total, opts->shard_rank, shard_world(opts), &lo, &hi);
		samples_cut(s, lo, hi);
		s->base = lo;
		s->total = total;
	}
	ret = 0;
out:
	dlk_tokenizer_free(tok);
	free(ids);
	free(recipe);
	dlk_buf_release(&text);
	dlk_buf_release(&tb);
	dlk_fetched_release(&f);
	return ret;
}

static int load_text(const struct dlk_split *sp, const struct dlk_data *spec, const struct dlk_data_opts *opts,
                     struct dlk_dataset *ds, struct dlk_samples *s, struct dlk_err *err)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_text_rows rows = DLK_TEXT_ROWS_INIT;
	const char *const *classes;
	char **found = NULL;
	int n_classes, n_found = 0, length = opts->shape[0] * opts->shape[1] * opts->shape[2], ret = -1;
	int targets = opts->task == DLK_TASK_MULTILABEL || opts->task == DLK_TASK_REGRESSION;
	const char *sep = spec->text.separator ? spec->text.separator : "|";

	if (opts->task == DLK_TASK_LM)
		return load_corpus(sp, spec, opts, ds, s, err);
	if (opts->shape[0] != 1 || opts->shape[1] != 1 || length < 1)
		return dlk_errf(err, DLK_EXIT_CONFIG, "format text needs a flat model.input: [LENGTH], the tokens per sequence");
	if (fetch_source(&sp->source, "text", spec, opts, ds, &f, err) < 0 ||
	    dlk_unpack_single(f.path, sp->source.url, limit_of(spec), opts->progress, opts->progress_ctx, &b, err) < 0 ||
	    dlk_text_rows_parse(b.data, b.len, sp->source.url, jsonl_source(sp->source.url), spec->text.column,
	                        spec->text.label, targets ? sep : NULL, &rows, err) < 0)
		goto out;
	if (!rows.n) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': no rows", sp->source.url);
		goto out;
	}
	take_train_classes(spec, opts, &classes, &n_classes);
	if (targets) {
		/* multilabel and regression: float targets, y all 0 */
		s->y = xcalloc(rows.n, sizeof(*s->y));
		if (dlk_text_targets(&rows, sp->source.url, opts->task == DLK_TASK_MULTILABEL, sep,
		                     opts->task == DLK_TASK_MULTILABEL ? classes : NULL, n_classes, &s->t, &s->target_size,
		                     &found, &n_found, err) < 0)
			goto out;
	} else {
		s->y = xmalloc(rows.n * sizeof(*s->y));
		if (dlk_text_labels(&rows, sp->source.url, classes, n_classes, s->y, &found, &n_found, err) < 0)
			goto out;
	}
	if (text_tokenizer(spec, opts, &rows, &ds->tokenizer, err) < 0)
		goto out;
	if (found) {
		ds->class_names = found;
		ds->n_class_names = ds->n_classes = n_found;
		found = NULL;
	}
	s->n = rows.n;
	s->shape[0] = s->shape[1] = 1;
	s->shape[2] = length;
	s->sample_size = (size_t)length;
	s->x = xmalloc(rows.n * (size_t)length * sizeof(float));
	dlk_text_encode_rows(ds->tokenizer, &rows, length, s->x);
	s->max_label = -1;
	for (size_t i = 0; i < s->n; i++)
		if (s->y[i] > s->max_label)
			s->max_label = s->y[i];
	if (shard_world(opts) > 1) {
		size_t lo, hi, total = s->n;
		dlk_part_range(total, opts->shard_rank, shard_world(opts), &lo, &hi);
		samples_cut(s, lo, hi);
		s->base = lo;
		s->total = total;
	}
	ret = 0;
out:
	for (int i = 0; i < n_found; i++)
		free(found ? found[i] : NULL);
	free(found);
	dlk_text_rows_release(&rows);
	dlk_buf_release(&b);
	dlk_fetched_release(&f);
	return ret;
}

static const char *source_name(const struct dlk_data *spec, const struct dlk_split *sp)
{
	if ((spec->format == DLK_DATA_TAR || spec->format == DLK_DATA_IMAGES) && sp->shards)
		return sp->shards[0].url;
	return spec->format == DLK_DATA_IDX ? sp->images.url : sp->source.url;
}

/* 8-bit images (format images, idx, tar; the project file refuses data.images elsewhere):
 * per-channel normalisation and the training augmentation */
static int set_images(const struct dlk_data *spec, const struct dlk_samples *s, struct dlk_dataset *ds,
                      const char *name, struct dlk_err *err)
{
	const struct dlk_images_spec *im = &spec->images;
	int C = s->shape[0];

	for (int k = 0; k < 2; k++) {
		const struct dlk_channel_values *cv = k ? &im->std : &im->mean;
		if (cv->n > 1 && cv->n != C) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': data.images.%s has %d values, but the images have %d channel%s", name,
			         k ? "std" : "mean", cv->n, C, C == 1 ? "" : "s");
			return dlk_err_hint(err, "give one value per channel of model.input, or one for all");
		}
	}
	if (im->mean.n || im->std.n) {
		if (C > DLK_MAX_CHANNELS)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %d channels, more than %d", name, C, DLK_MAX_CHANNELS);
		ds->per_channel = 1;
		for (int c = 0; c < C; c++) {
			float m = im->mean.n ? im->mean.v[im->mean.n > 1 ? c : 0] : spec->mean;
			float sd = im->std.n ? im->std.v[im->std.n > 1 ? c : 0] : spec->std;
			for (int v = 0; v < 256; v++)
				ds->lut_c[c][v] = ((float)v * spec->scale - m) / sd;
		}
	}
	if (im->crop_padding >= s->shape[1] || im->crop_padding >= s->shape[2]) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': data.images.crop_padding %d is not smaller than the %dx%d input", name,
		         im->crop_padding, s->shape[1], s->shape[2]);
		return -1;
	}
	ds->aug.flip = im->flip;
	ds->aug.pad = im->crop_padding;
	ds->aug.noise = im->noise;
	return 0;
}

/* data.images.noise: the targets are the clean images, the inputs' own bytes read as byte / 255
 * (dataset.h: t_from_x8), the model's output shape [C, H, W]; the inputs get their noise as they
 * are gathered. The labels are not the task's: all 0, as with paired folders. */
static void noise_labels(struct dlk_samples *s)
{
	for (size_t i = 0; i < s->n; i++)
		s->y[i] = 0;
	s->max_label = s->n ? 0 : -1;
}

int dlk_data_load(const struct dlk_data *spec, const char *split, const struct dlk_data_opts *opts,
                  struct dlk_dataset *out, struct dlk_err *err)
{
	static const struct dlk_data_opts no_opts;
	struct dlk_data_opts unsharded;
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
	if (sp == &spec->test && opts->shard_world > 1) {
		/* the test split stays whole: rank 0 evaluates */
		unsharded = *opts;
		unsharded.shard_rank = 0;
		unsharded.shard_world = 0;
		opts = &unsharded;
	}
	if (!isfinite(scale) || !isfinite(mean) || !isfinite(std) || std == 0)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "data: scale %g, mean %g, std %g: all must be finite and std non-zero",
		                scale, mean, std);

	switch (spec->format) {
	case DLK_DATA_IDX: r = load_idx(sp, spec, opts, &ds, &s, err); break;
	case DLK_DATA_CSV: r = load_csv(sp, spec, opts, &ds, &s, err); break;
	case DLK_DATA_TAR: r = load_tar(sp, spec, opts, &ds, &s, err); break;
	case DLK_DATA_IMAGES: r = load_images(sp, spec, opts, &ds, &s, err); break;
	case DLK_DATA_TEXT: r = load_text(sp, spec, opts, &ds, &s, err); break;
	default: r = dlk_errf(err, DLK_EXIT_CONFIG, "data: unknown format %d", (int)spec->format); break;
	}
	if (r < 0)
		goto fail;
	name = source_name(spec, sp);

	/* a shard may be empty (fewer samples than workers); the split may not */
	if (s.n == 0 && !(shard_world(opts) > 1 && (s.total > 0 || ds.by_file))) {
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
	if (spec->images.decode == DLK_DECODE_STREAM && !s.files) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': data.images.decode: stream reads image folders and tar shards of "
		         ".png or .jpg members, and this is neither", name);
		dlk_err_hint(err, "leave data.images.decode out (images are then decoded once)");
		goto fail;
	}
	if (spec->images.noise > 0) {
		if (!s.x8 && !s.files) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': data.images.noise is for 8-bit images, and these samples are not", name);
			goto fail;
		}
		noise_labels(&s);
	}
	if (spec->n_classes > 0) {
		if (s.max_label >= spec->n_classes) {
			for (i = 0; i < s.n && s.y[i] < spec->n_classes; i++)
				;
			dlk_errf(err, DLK_EXIT_CONFIG,
			         "'%s': sample %zu has label %d, but there are only %d classes (labels 0 to %d)",
			         name, s.base + i, (int)s.y[i], spec->n_classes, spec->n_classes - 1);
			dlk_err_hint(err, "check data.classes and the last dense layer's units");
			goto fail;
		}
		ds.n_classes = spec->n_classes;
	} else if (ds.class_names) {
		/* the classes the data named (folders, label names), even those without samples here */
	} else {
		ds.n_classes = s.max_label + 1;
	}

	/* (raw * scale - mean) / std in float32: once per byte value for 8-bit data (gathering
	 * looks the bytes up), once per value for float data; the same floats either way */
	if (s.x8 || s.files) {
		for (i = 0; i < 256; i++)
			ds.lut[i] = ((float)i * scale - mean) / std;
		ds.storage = s.files ? DLK_STORE_FILES : DLK_STORE_U8;
		ds.x8 = s.x8;
		ds.files = s.files;
		s.x8 = NULL; /* ds owns them now */
		s.files = NULL;
		if (set_images(spec, &s, &ds, name, err) < 0)
			goto fail;
	} else if (spec->format == DLK_DATA_TEXT) {
		ds.storage = DLK_STORE_F32; /* token ids, never scaled */
		ds.x = s.x;
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
	ds.t = s.t;
	ds.t8 = s.t8;
	ds.target_size = s.target_size;
	if (spec->images.noise > 0) {
		ds.t_from_x8 = 1;
		ds.target_size = ds.sample_size;
	}
	if (shard_world(opts) > 1) {
		ds.sharded = 1;
		/* whole files: where they sit in the split only the ranks together know */
		ds.base = ds.by_file ? 0 : s.base;
		ds.total = ds.by_file ? 0 : s.total;
	} else {
		ds.base = 0;
		ds.total = ds.n;
	}
	*out = ds;
	return 0;

fail:
	dlk_samples_release(&s);
	dlk_dataset_release(&ds);
	return -1;
}
