/* libFuzzer target: the data decoders (IDX, CSV, tar shards), and the per-rank range readers of
 * data.shard (IDX fed in chunks, CSV rows, the Content-Range header of a ranged http read).
 * A compressed shard is decompressed as data.images.decode: stream unpacks one.
 * Corpus: tests/fuzz/data/ (idx/, csv/, tar/ seeds are prefixed by the harness's selector on
 * replay, so every seed reaches every decoder). */
#include "lib/data/decode.h"
#include "lib/data/fetch.h"
#include "lib/data/image.h"
#include "lib/data/unpack.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The IDX range reader (a shard of a file, data.shard) fed the input in chunks: whatever the
 * whole-file decoder accepts, every rank's range of it must be accepted too, with its part of
 * the samples. */
static void idx_range(const uint8_t *data, size_t size, int whole_ok, size_t whole_n)
{
	struct dlk_err err = DLK_ERR_INIT;
	int world = 1 + (int)(size % 5);

	for (int rank = 0; rank < world; rank++) {
		struct dlk_idx_range r;
		struct dlk_idx out = DLK_IDX_INIT;
		size_t chunk = 1 + size % 61, at = 0;
		int ok = 1;

		dlk_idx_range_init(&r, rank, world);
		while (ok && at < size) {
			size_t n = size - at < chunk ? size - at : chunk;
			ok = dlk_idx_range_feed(&r, data + at, n, "fuzz.idx", &err) == 0;
			at += n;
		}
		ok = ok && dlk_idx_range_finish(&r, "fuzz.idx", &err) == 0 &&
		     dlk_idx_decode_buf(&r.out, "fuzz.idx", &out, &err) == 0;
		if (whole_ok && (!ok || r.n != whole_n || out.dims[0] != r.count))
			abort();
		dlk_idx_release(&out);
		dlk_idx_range_release(&r);
	}
}

static int count_sink(void *ctx, const void *data, size_t len, struct dlk_err *err)
{
	(void)data, (void)err;
	*(unsigned long long *)ctx += len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_idx a = DLK_IDX_INIT, b = DLK_IDX_INIT;
	struct dlk_samples s = DLK_SAMPLES_INIT;
	struct dlk_csv_opts co = { -1, -1, 0, 0, NULL, 0, 0 };

	/* every decoder sees every input: the seeds of one format are mutations for the others */
	unsigned long long total;
	/* a Content-Range header line, as a ranged read of a shard parses it */
	if (!dlk_http_content_range((const char *)data, size, &total) && total == 0)
		abort();
	int idx_ok = !dlk_idx_decode(data, size, "fuzz.idx", &a, &err);
	idx_range(data, size, idx_ok, idx_ok ? a.dims[0] : 0);
	if (idx_ok) {
		/* join an input with itself: images and labels counts agree only for 1-D files */
		if (!dlk_idx_decode(data, size, "fuzz-labels.idx", &b, &err))
			dlk_idx_join(&a, "fuzz.idx", &b, "fuzz-labels.idx", &s, &err);
		dlk_samples_release(&s);
	}
	dlk_idx_release(&a);
	dlk_idx_release(&b);
	dlk_csv_decode(data, size, "fuzz.csv", &co, &s, &err);
	dlk_samples_release(&s);
	/* a shard of the rows (data.shard): every row parsed and checked, one part kept */
	co.shard_world = 1 + (int)(size % 4);
	co.shard_rank = (int)(size / 4 % (size_t)co.shard_world);
	dlk_csv_decode(data, size, "fuzz.csv", &co, &s, &err);
	dlk_samples_release(&s);
	/* float target columns (data.csv.targets), the last 1 to 3 */
	co.shard_world = 0;
	co.targets = 1 + (int)(size % 3);
	if (!dlk_csv_decode(data, size, "fuzz.csv", &co, &s, &err) && (!s.t || s.target_size != (size_t)co.targets))
		abort();
	dlk_samples_release(&s);
	dlk_tar_decode(data, size, "fuzz.tar", NULL, 64u << 20, &s, &err);
	dlk_samples_release(&s);
	/* with a model input, as format images reads shards: .png/.jpg members are decoded to it */
	static const int shape[3] = { 1, 8, 8 };
	dlk_tar_decode(data, size, "fuzz.tar", shape, 64u << 20, &s, &err);
	dlk_samples_release(&s);
	/* paired images (KEY.png + KEY.target.png, model.task image): as many targets as inputs */
	static const int tshape[3] = { 3, 4, 4 };
	struct archive *ar = size ? dlk_archive_open_mem(data, size, "fuzz.tar", &err) : NULL;
	if (ar && dlk_tar_decode_archive(ar, "fuzz.tar", shape, tshape, 64u << 20, &s, &err) == 0 &&
	    (!s.t8 || s.target_size != 48 || !s.n))
		abort();
	dlk_archive_close(ar);
	dlk_samples_release(&s);
	/* indexed member by member (data.images.decode: stream), without and with targets: every
	 * member inside the bytes */
	for (int paired = 0; paired < 2; paired++) {
		struct dlk_image_files *idx = NULL;
		ar = size ? dlk_archive_open_mem(data, size, "fuzz.tar", &err) : NULL;
		if (ar && dlk_tar_index_archive(ar, "fuzz.tar", "fuzz.tar", shape, paired ? tshape : NULL, &s, &idx, &err) == 0) {
			if (!idx || idx->n != s.n || (paired && !idx->tnames) || (!paired && idx->tnames))
				abort();
			for (size_t i = 0; i < idx->n; i++)
				if (idx->offset[i] > size || idx->length[i] > size - idx->offset[i] ||
				    (paired && (idx->toffset[i] > size || idx->tlength[i] > size - idx->toffset[i])))
					abort();
		}
		dlk_archive_close(ar);
		dlk_image_files_free(idx);
		dlk_samples_release(&s);
	}
	/* a compressed shard decompressed (data.images.decode: stream unpacks it into the cache),
	 * bounded: never more than the limit handed on */
	int fd = memfd_create("shard", 0);
	if (fd >= 0) {
		char path[64];
		unsigned long long out = 0;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (write(fd, data, size) == (ssize_t)size &&
		    !dlk_decompress_to(path, "fuzz.tar.gz", 1u << 20, NULL, NULL, count_sink, &out, &err) && out > (1u << 20))
			abort();
		close(fd);
	}
	return 0;
}
