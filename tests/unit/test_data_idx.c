/* IDX decoding, containers (gzip, tar.gz, zip, plain) and dlk_data_load() on Fashion-MNIST. */
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/data/dataset.h"
#include "lib/data/decode.h"
#include "lib/data/unpack.h"
#include "lib/util/buf.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#define FMNIST "/usr/share/datasets/fashion-mnist/"

static char *tmpdir;

static void be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* An IDX ubyte file of n images h x w with pixel value (i + j) % 256. */
static void make_images(struct dlk_buf *b, uint32_t n, uint32_t h, uint32_t w)
{
	unsigned char hdr[16] = { 0, 0, 8, 3 };
	be32(hdr + 4, n), be32(hdr + 8, h), be32(hdr + 12, w);
	dlk_buf_add(b, hdr, 16);
	for (uint32_t i = 0; i < n * h * w; i++)
		dlk_buf_addc(b, (char)((i / (h * w) + i % (h * w)) % 256));
}

static void make_labels(struct dlk_buf *b, uint32_t n, int mod)
{
	unsigned char hdr[8] = { 0, 0, 8, 1 };
	be32(hdr + 4, n);
	dlk_buf_add(b, hdr, 8);
	for (uint32_t i = 0; i < n; i++)
		dlk_buf_addc(b, (char)(i % (uint32_t)mod));
}

static char *write_file(const char *name, const void *data, size_t len)
{
	char *path = xasprintf("%s/%s", tmpdir, name);
	FILE *f = fopen(path, "wb");
	fwrite(data, 1, len, f);
	fclose(f);
	return path;
}

/* Writes an archive with libarchive: "gz", "bz2", "xz", "zst" (one compressed file), "tar.gz",
 * "zip", "tar". */
static char *write_container(const char *name, const char *kind, const char *const *members,
                             const struct dlk_buf *const *datas, int n)
{
	char *path = xasprintf("%s/%s", tmpdir, name);
	struct archive *a = archive_write_new();

	if (!strcmp(kind, "gz") || !strcmp(kind, "bz2") || !strcmp(kind, "xz") || !strcmp(kind, "zst")) {
		if (!strcmp(kind, "gz"))
			archive_write_add_filter_gzip(a);
		else if (!strcmp(kind, "bz2"))
			archive_write_add_filter_bzip2(a);
		else if (!strcmp(kind, "xz"))
			archive_write_add_filter_xz(a);
		else
			archive_write_add_filter_zstd(a);
		archive_write_set_format_raw(a);
	} else if (!strcmp(kind, "tar.gz")) {
		archive_write_add_filter_gzip(a);
		archive_write_set_format_pax_restricted(a);
	} else if (!strcmp(kind, "tar")) {
		archive_write_set_format_pax_restricted(a);
	} else {
		archive_write_set_format_zip(a);
	}
	archive_write_open_filename(a, path);
	for (int i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, members[i]);
		archive_entry_set_size(e, (la_int64_t)datas[i]->len);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_write_header(a, e);
		archive_write_data(a, datas[i]->data, datas[i]->len);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	return path;
}

static struct dlk_data idx_spec(char *images, char *labels)
{
	struct dlk_data d;
	memset(&d, 0, sizeof(d));
	d.format = DLK_DATA_IDX;
	d.train.images.url = images;
	d.train.labels.url = labels;
	d.test.images.url = images;
	d.test.labels.url = labels;
	d.csv_header = -1;
	d.csv_label_column = -1;
	d.scale = 1.0f / 255;
	d.mean = 0;
	d.std = 1;
	d.max_bytes = 1 << 30;
	return d;
}

static void decode_errors(void)
{
	struct dlk_idx idx = DLK_IDX_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	unsigned char raw[64];

	/* short magic */
	CHECK(dlk_idx_decode("\0\0", 2, "x.idx", &idx, &err) == -1);
	CHECK_STR(err.msg, "'x.idx': truncated IDX header: the file ends at byte offset 2, the magic number needs 4 bytes");
	CHECK(err.code == DLK_EXIT_CONFIG);
	/* bad magic */
	CHECK(dlk_idx_decode("PK\3\4abcd", 8, "x.idx", &idx, &err) == -1);
	CHECK_CONTAINS(err.msg, "not an IDX file: bad magic 0x504b0304 at byte offset 0");
	/* unknown type */
	memcpy(raw, "\0\0\x07\x01\0\0\0\1x", 9);
	CHECK(dlk_idx_decode(raw, 9, "x.idx", &idx, &err) == -1);
	CHECK_CONTAINS(err.msg, "bad magic 0x00000701");
	/* ndims 0 and too many */
	memcpy(raw, "\0\0\x08\x00", 4);
	CHECK(dlk_idx_decode(raw, 4, "x.idx", &idx, &err) == -1);
	CHECK_CONTAINS(err.msg, "byte offset 3 declares 0 dimensions");
	memcpy(raw, "\0\0\x08\x05", 4);
	CHECK(dlk_idx_decode(raw, 4, "x.idx", &idx, &err) == -1);
	CHECK_CONTAINS(err.msg, "declares 5 dimensions");
	/* dims cut short */
	memcpy(raw, "\0\0\x08\x03\0\0\0\2\0\0", 10);
	CHECK(dlk_idx_decode(raw, 10, "x.idx", &idx, &err) == -1);
	CHECK_STR(err.msg, "'x.idx': truncated IDX header: the file ends at byte offset 10, 3 dimensions need 16 header bytes");
	/* truncated data: 2 x 3 x 3 ubyte = 18 bytes after a 16-byte header, only 10 present */
	make_images(&b, 2, 3, 3);
	CHECK(dlk_idx_decode(b.data, 26, "img", &idx, &err) == -1);
	CHECK_STR(err.msg, "'img': truncated IDX data: the file ends at byte offset 26, but the header declares 18 ubyte values (34 bytes in all)");
	/* trailing garbage */
	dlk_buf_add(&b, "zz", 2);
	CHECK(dlk_idx_decode(b.data, b.len, "img", &idx, &err) == -1);
	CHECK_STR(err.msg, "'img': 2 unexpected bytes after the IDX data at byte offset 34 (the header declares 34 bytes in all)");
	/* overflow of the product of dims */
	memcpy(raw, "\0\0\x08\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 20);
	CHECK(dlk_idx_decode(raw, 20, "big", &idx, &err) == -1);
	CHECK_CONTAINS(err.msg, "more than 2^48 values");
	/* float NaN is rejected with its offset */
	memcpy(raw, "\0\0\x0d\x01\0\0\0\2\x3f\x80\0\0\x7f\xc0\0\0", 16);
	CHECK(dlk_idx_decode(raw, 16, "f", &idx, &err) == -1);
	CHECK_STR(err.msg, "'f': value at byte offset 12 is not a finite float32");
	dlk_buf_release(&b);
}

static void decode_types(void)
{
	struct dlk_idx idx = DLK_IDX_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	unsigned char raw[64];

	memcpy(raw, "\0\0\x09\x01\0\0\0\2\xff\x05", 10);
	CHECK(dlk_idx_decode(raw, 10, "s", &idx, &err) == 0);
	CHECK(idx.count == 2 && idx.data[0] == -1 && idx.data[1] == 5);
	dlk_idx_release(&idx);
	memcpy(raw, "\0\0\x0b\x01\0\0\0\2\xff\xfe\x01\x00", 12);
	CHECK(dlk_idx_decode(raw, 12, "s", &idx, &err) == 0);
	CHECK(idx.data[0] == -2 && idx.data[1] == 256);
	dlk_idx_release(&idx);
	memcpy(raw, "\0\0\x0c\x01\0\0\0\1\x00\x01\x00\x00", 12);
	CHECK(dlk_idx_decode(raw, 12, "i", &idx, &err) == 0);
	CHECK(idx.data[0] == 65536);
	dlk_idx_release(&idx);
	memcpy(raw, "\0\0\x0d\x01\0\0\0\1\x3f\xc0\0\0", 12);
	CHECK(dlk_idx_decode(raw, 12, "f", &idx, &err) == 0);
	CHECK(idx.data[0] == 1.5f);
	dlk_idx_release(&idx);
	memcpy(raw, "\0\0\x0e\x02\0\0\0\1\0\0\0\1\xc0\x04\0\0\0\0\0\0", 20);
	CHECK(dlk_idx_decode(raw, 20, "d", &idx, &err) == 0);
	CHECK(idx.ndims == 2 && idx.data[0] == -2.5f);
	dlk_idx_release(&idx);
}

static void join_errors(void)
{
	struct dlk_buf bi = DLK_BUF_INIT, bl = DLK_BUF_INIT;
	struct dlk_idx im = DLK_IDX_INIT, lb = DLK_IDX_INIT;
	struct dlk_samples s = DLK_SAMPLES_INIT;
	struct dlk_err err = DLK_ERR_INIT;

	make_images(&bi, 5, 2, 2);
	make_labels(&bl, 4, 3);
	CHECK(dlk_idx_decode(bi.data, bi.len, "im", &im, &err) == 0);
	CHECK(dlk_idx_decode(bl.data, bl.len, "lb", &lb, &err) == 0);
	CHECK(dlk_idx_join(&im, "im", &lb, "lb", &s, &err) == -1);
	CHECK_STR(err.msg, "'im' holds 5 images but 'lb' holds 4 labels");
	dlk_idx_release(&lb);
	/* a label that is not a class index (sbyte -1), at offset 8 + 2 */
	dlk_buf_reset(&bl);
	dlk_buf_add(&bl, "\0\0\x09\x01\0\0\0\5\0\1\xff\0\0", 13);
	CHECK(dlk_idx_decode(bl.data, bl.len, "lb", &lb, &err) == 0);
	CHECK(dlk_idx_join(&im, "im", &lb, "lb", &s, &err) == -1);
	CHECK_STR(err.msg, "'lb': label -1 of sample 2 at byte offset 10 is not a class index (0 to 99999)");
	dlk_idx_release(&lb);
	dlk_buf_reset(&bl);
	make_labels(&bl, 5, 3);
	CHECK(dlk_idx_decode(bl.data, bl.len, "lb", &lb, &err) == 0);
	CHECK(dlk_idx_join(&im, "im", &lb, "lb", &s, &err) == 0);
	CHECK(s.n == 5 && s.sample_size == 4 && s.shape[0] == 1 && s.shape[1] == 2 && s.shape[2] == 2);
	CHECK(s.max_label == 2 && s.y[4] == 1);
	/* ubyte images stay bytes: image 1 pixel 0 = (1 + 0), pixel 1 = 2 */
	CHECK(s.x == NULL && s.x8 && s.x8[4] == 1 && s.x8[5] == 2);
	CHECK(im.data == NULL && im.data8 == NULL);
	dlk_samples_release(&s);
	dlk_idx_release(&im);
	dlk_idx_release(&lb);
	dlk_buf_release(&bi);
	dlk_buf_release(&bl);
}

static void containers(void)
{
	struct dlk_buf im = DLK_BUF_INIT, lb = DLK_BUF_INIT, out = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	const char *kinds[] = { "gz", "tar.gz", "zip", "tar", "bz2", "xz", "zst" };
	char *plain_im, *plain_lb;

	make_images(&im, 7, 4, 3);
	make_labels(&lb, 7, 4);
	plain_im = write_file("im.idx", im.data, im.len);
	plain_lb = write_file("lb.idx", lb.data, lb.len);

	/* plain files pass through unchanged */
	CHECK(dlk_unpack_single(plain_im, "im.idx", 0, NULL, NULL, &out, &err) == 0);
	CHECK(out.len == im.len && !memcmp(out.data, im.data, im.len));
	dlk_buf_reset(&out);

	for (size_t k = 0; k < DLK_ARRAY_SIZE(kinds); k++) {
		const char *m1[] = { "images" }, *m2[] = { "labels" };
		const struct dlk_buf *d1[] = { &im }, *d2[] = { &lb };
		/* names deliberately carry no hint of the container: detection is by content */
		char *n1 = xasprintf("im-%zu.bin", k), *n2 = xasprintf("lb-%zu.bin", k);
		char *p1 = write_container(n1, kinds[k], m1, d1, 1);
		char *p2 = write_container(n2, kinds[k], m2, d2, 1);
		struct dlk_data spec = idx_spec(p1, p2);
		struct dlk_dataset ds = DLK_DATASET_INIT;

		CHECK(dlk_unpack_single(p1, n1, 0, NULL, NULL, &out, &err) == 0);
		CHECK_MSG(out.len == im.len && !memcmp(out.data, im.data, im.len), "%s unpacks to the IDX bytes", kinds[k]);
		dlk_buf_reset(&out);
		CHECK_MSG(dlk_data_load(&spec, "train", NULL, &ds, &err) == 0, "%s loads: %s", kinds[k], err.msg);
		CHECK(ds.n == 7 && ds.sample_size == 12 && ds.n_classes == 4 && ds.y[5] == 1);
		CHECK(ds.storage == DLK_STORE_U8 && ds.x == NULL && ds.x8 != NULL);
		float one[12];
		dlk_dataset_gather_range(&ds, 1, 1, one);
		CHECK_NEAR(one[1], 2.0 / 255, 1e-6);
		CHECK(ds.n_sources == 2 && !strcmp(ds.sources[0].url, p1));
		dlk_dataset_release(&ds);

		/* the decompression-bomb bound stops unpacking */
		spec.max_bytes = 80;
		CHECK(dlk_data_load(&spec, "train", NULL, &ds, &err) == -1);
		CHECK_MSG(strstr(err.msg, "limit of 80 bytes") != NULL, "%s bounded: %s", kinds[k], err.msg);
		CHECK(err.code == DLK_EXIT_CONFIG);
		free(n1), free(n2), free(p1), free(p2);
	}

	/* an archive holding two files is ambiguous for an idx source */
	{
		const char *m[] = { "a.idx", "b.idx" };
		const struct dlk_buf *d[] = { &im, &lb };
		char *p = write_container("two.tgz", "tar.gz", m, d, 2);
		CHECK(dlk_unpack_single(p, "two.tgz", 0, NULL, NULL, &out, &err) == -1);
		CHECK_STR(err.msg, "'two.tgz': the archive holds 2 files ('a.idx', 'b.idx'); expected exactly one");
		free(p);
	}
	/* a truncated gzip stream */
	{
		const char *m[] = { "x" };
		const struct dlk_buf *d[] = { &im };
		char *p = write_container("cut.gz", "gz", m, d, 1), *q;
		struct dlk_buf gz = DLK_BUF_INIT;
		char msg[256];
		CHECK(dlk_buf_read_file(&gz, p, 0, msg, sizeof(msg)) == 0);
		q = write_file("cut2.gz", gz.data, gz.len / 2);
		dlk_buf_reset(&out);
		CHECK(dlk_unpack_single(q, "cut2.gz", 0, NULL, NULL, &out, &err) == -1);
		CHECK_CONTAINS(err.msg, "'cut2.gz': truncated gzip input");
		dlk_buf_release(&gz);
		free(p), free(q);
	}
	/* an empty file is empty, and then a truncated IDX header */
	{
		char *p = write_file("empty", "", 0);
		struct dlk_data spec = idx_spec(p, plain_lb);
		struct dlk_dataset ds = DLK_DATASET_INIT;
		CHECK(dlk_data_load(&spec, "test", NULL, &ds, &err) == -1);
		CHECK_CONTAINS(err.msg, "the file ends at byte offset 0");
		free(p);
	}
	/* a model input of a different size is refused; one of the same size reshapes */
	{
		struct dlk_data spec = idx_spec(plain_im, plain_lb);
		struct dlk_dataset ds = DLK_DATASET_INIT;
		struct dlk_data_opts o;
		memset(&o, 0, sizeof(o));
		o.shape[0] = 1, o.shape[1] = 1, o.shape[2] = 12;
		CHECK(dlk_data_load(&spec, "train", &o, &ds, &err) == 0);
		CHECK(ds.shape[0] == 1 && ds.shape[1] == 1 && ds.shape[2] == 12);
		dlk_dataset_release(&ds);
		o.shape[2] = 13;
		CHECK(dlk_data_load(&spec, "train", &o, &ds, &err) == -1);
		CHECK_CONTAINS(err.msg, "a sample holds 1x4x3 = 12 values but the model input is 1x1x13 = 13");
		/* spec n_classes below the labels present */
		spec.n_classes = 3;
		CHECK(dlk_data_load(&spec, "train", NULL, &ds, &err) == -1);
		CHECK_CONTAINS(err.msg, "sample 3 has label 3, but there are only 3 classes");
		spec.n_classes = 10;
		spec.mean = 0.5f, spec.std = 0.25f;
		CHECK(dlk_data_load(&spec, "train", NULL, &ds, &err) == 0);
		CHECK(ds.n_classes == 10);
		float first[12];
		dlk_dataset_gather_range(&ds, 0, 1, first);
		CHECK_NEAR(first[1], (1 / 255.0 - 0.5) / 0.25, 1e-5);
		dlk_dataset_release(&ds);
		spec.std = 0;
		CHECK(dlk_data_load(&spec, "train", NULL, &ds, &err) == -1);
		CHECK(dlk_data_load(&spec, "validation", NULL, &ds, &err) == -1);
		CHECK_CONTAINS(err.msg, "unknown data split 'validation'");
	}
	free(plain_im), free(plain_lb);
	dlk_buf_release(&im), dlk_buf_release(&lb), dlk_buf_release(&out);
}

/* The IDX float32 (type 0x0d) twin of a ubyte images file: same header dims, same values. */
static void float_twin(struct dlk_buf *out, const struct dlk_buf *ubyte)
{
	const unsigned char *p = (const unsigned char *)ubyte->data;
	size_t header = 4 + 4 * (size_t)p[3];
	unsigned char hdr[4 + 4 * 4];

	memcpy(hdr, p, header);
	hdr[2] = 0x0d;
	dlk_buf_add(out, hdr, header);
	for (size_t i = header; i < ubyte->len; i++) {
		float f = p[i];
		uint32_t u;
		unsigned char be[4];
		memcpy(&u, &f, sizeof(u));
		be32(be, u);
		dlk_buf_add(out, be, 4);
	}
}

/* Gathers every sample of a and b, in order and in a scrambled order, and says whether the floats
 * are the same bit for bit. */
static int same_floats(const struct dlk_dataset *a, const struct dlk_dataset *b)
{
	size_t m = a->sample_size, chunk = 1000, *idx;
	float *fa, *fb;
	int same = a->n == b->n && m == b->sample_size;

	if (!same)
		return 0;
	fa = xmalloc(sizeof(float) * chunk * m);
	fb = xmalloc(sizeof(float) * chunk * m);
	idx = xmalloc(sizeof(size_t) * chunk);
	for (size_t start = 0; start < a->n && same; start += chunk) {
		size_t n = a->n - start < chunk ? a->n - start : chunk;
		dlk_dataset_gather_range(a, start, n, fa);
		dlk_dataset_gather_range(b, start, n, fb);
		same = !memcmp(fa, fb, sizeof(float) * n * m);
		for (size_t i = 0; i < n; i++)
			idx[i] = (start + i * 7919) % a->n;
		dlk_dataset_gather(a, idx, n, fa);
		dlk_dataset_gather(b, idx, n, fb);
		same = same && !memcmp(fa, fb, sizeof(float) * n * m);
	}
	free(fa), free(fb), free(idx);
	return same;
}

/* 8-bit storage scaled at gather time gives the floats that float storage (scaled at load, as
 * every dataset was before) holds, bit for bit, for every byte value and several scalings. */
static void gather_matches_float_storage(void)
{
	struct dlk_buf im = DLK_BUF_INIT, imf = DLK_BUF_INIT, lb = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	static const float scalings[][3] = {
		{ 1.0f / 255, 0, 1 }, { 1.0f / 255, 0.2860f, 0.3530f }, { 1, 127.5f, 127.5f }, { 0.5f, -3, 7 },
	};

	/* 16 images of 8 x 8, pixel (i + j) % 256 for image i, pixel j: */
	make_images(&im, 16, 8, 8);
	for (size_t i = 16; i < im.len; i++)  /* ... scrambled so that all 256 values occur */
		im.data[i] = (char)((i * 37 + 11) % 256);
	float_twin(&imf, &im);
	make_labels(&lb, 16, 10);
	char *pu = write_file("u8.idx", im.data, im.len), *pf = write_file("f32.idx", imf.data, imf.len);
	char *pl = write_file("lb16.idx", lb.data, lb.len);
	for (size_t k = 0; k < DLK_ARRAY_SIZE(scalings); k++) {
		struct dlk_data su = idx_spec(pu, pl), sf = idx_spec(pf, pl);
		struct dlk_dataset du = DLK_DATASET_INIT, df = DLK_DATASET_INIT;
		su.scale = sf.scale = scalings[k][0];
		su.mean = sf.mean = scalings[k][1];
		su.std = sf.std = scalings[k][2];
		CHECK_MSG(dlk_data_load(&su, "train", NULL, &du, &err) == 0, "ubyte loads: %s", err.msg);
		CHECK_MSG(dlk_data_load(&sf, "train", NULL, &df, &err) == 0, "float loads: %s", err.msg);
		CHECK(du.storage == DLK_STORE_U8 && du.x8 && !du.x);
		CHECK(df.storage == DLK_STORE_F32 && df.x && !df.x8);
		CHECK_MSG(same_floats(&du, &df), "scaling %zu: the same floats from both storages", k);
		/* and they are (raw * scale - mean) / std in float32 */
		float x[64];
		dlk_dataset_gather_range(&du, 3, 1, x);
		float want = ((float)(unsigned char)im.data[16 + 3 * 64 + 5] * su.scale - su.mean) / su.std;
		CHECK(!memcmp(&x[5], &want, sizeof(want)));
		dlk_dataset_release(&du);
		dlk_dataset_release(&df);
	}
	free(pu), free(pf), free(pl);
	dlk_buf_release(&im), dlk_buf_release(&imf), dlk_buf_release(&lb);
}

/* dlk_idx_decode_buf() takes a ubyte file's buffer over instead of copying it, and leaves other
 * types' buffers alone. */
static void decode_buf(void)
{
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_idx idx = DLK_IDX_INIT;
	struct dlk_err err = DLK_ERR_INIT;

	make_images(&b, 3, 2, 2);
	CHECK(dlk_idx_decode_buf(&b, "u8", &idx, &err) == 0);
	CHECK(b.cap == 0 && b.len == 0); /* the bytes were taken, not copied */
	CHECK(idx.count == 12 && idx.data == NULL && idx.data8[0] == 0 && idx.data8[4] == 1 && idx.data8[11] == 5);
	dlk_idx_release(&idx);
	dlk_buf_add(&b, "\0\0\x0d\x01\0\0\0\1\x3f\xc0\0\0", 12);
	CHECK(dlk_idx_decode_buf(&b, "f", &idx, &err) == 0);
	CHECK(b.len == 12 && idx.data8 == NULL && idx.data[0] == 1.5f);
	dlk_idx_release(&idx);
	dlk_buf_reset(&b);
	make_images(&b, 3, 2, 2);
	b.len--;
	CHECK(dlk_idx_decode_buf(&b, "cut", &idx, &err) == -1);
	CHECK(b.len == 27 && b.data != NULL);
	CHECK_CONTAINS(err.msg, "'cut': truncated IDX data");
	dlk_buf_release(&b);
}

static void fashion_mnist(void)
{
	struct dlk_data spec = idx_spec(FMNIST "train-images-idx3-ubyte.gz", FMNIST "train-labels-idx1-ubyte.gz");
	struct dlk_dataset ds = DLK_DATASET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	int counts[10] = { 0 }, ok = 1;
	float lo = 1, hi = 0;
	char hex[65];

	if (access(FMNIST "train-images-idx3-ubyte.gz", R_OK) != 0) {
		CHECK_MISSING("Fashion-MNIST (dataset-fashion-mnist)");
		return;
	}
	spec.test.images.url = FMNIST "t10k-images-idx3-ubyte.gz";
	spec.test.labels.url = FMNIST "t10k-labels-idx1-ubyte.gz";
	CHECK_MSG(dlk_data_load(&spec, "train", NULL, &ds, &err) == 0, "train loads: %s", err.msg);
	CHECK(ds.n == 60000);
	CHECK(ds.shape[0] == 1 && ds.shape[1] == 28 && ds.shape[2] == 28 && ds.sample_size == 784);
	CHECK(ds.n_classes == 10);
	CHECK(ds.y[0] == 9);  /* the first training image is an ankle boot */
	for (size_t i = 0; i < ds.n; i++) {
		if (ds.y[i] < 0 || ds.y[i] > 9)
			ok = 0;
		else
			counts[ds.y[i]]++;
	}
	CHECK(ok);
	for (int c = 0; c < 10; c++)
		ok &= counts[c] == 6000;
	CHECK_MSG(ok, "6000 training images per class");
	CHECK(ds.storage == DLK_STORE_U8);
	for (size_t i = 0; i < ds.n; i++) {
		float x[784];
		dlk_dataset_gather_range(&ds, i, 1, x);
		for (size_t j = 0; j < 784; j++) {
			lo = x[j] < lo ? x[j] : lo;
			hi = x[j] > hi ? x[j] : hi;
		}
	}
	CHECK(lo == 0.0f && hi == 1.0f);
	CHECK(ds.n_sources == 2);
	CHECK(dlk_sha256_file(FMNIST "train-images-idx3-ubyte.gz", hex) == 0);
	CHECK_STR(ds.sources[0].sha256, hex);
	CHECK_STR(ds.sources[1].url, FMNIST "train-labels-idx1-ubyte.gz");
	dlk_dataset_release(&ds);

	CHECK_MSG(dlk_data_load(&spec, "test", NULL, &ds, &err) == 0, "test loads: %s", err.msg);
	CHECK(ds.n == 10000 && ds.sample_size == 784 && ds.n_classes == 10);
	CHECK(ds.y[0] == 9);
	/* the test images as float32 IDX load into float storage with the same floats */
	{
		struct dlk_buf u8 = DLK_BUF_INIT, f32 = DLK_BUF_INIT;
		struct dlk_dataset df = DLK_DATASET_INIT;
		struct dlk_data sf = spec;
		CHECK(dlk_unpack_single(FMNIST "t10k-images-idx3-ubyte.gz", "t10k", 0, NULL, NULL, &u8, &err) == 0);
		float_twin(&f32, &u8);
		dlk_buf_release(&u8);
		char *p = write_file("t10k-f32.idx", f32.data, f32.len);
		dlk_buf_release(&f32);
		sf.test.images.url = p;
		sf.test.images.sha256 = NULL;
		sf.mean = 0.2860f, sf.std = 0.3530f;
		spec.mean = sf.mean, spec.std = sf.std;
		dlk_dataset_release(&ds);
		CHECK_MSG(dlk_data_load(&spec, "test", NULL, &ds, &err) == 0, "test loads: %s", err.msg);
		CHECK_MSG(dlk_data_load(&sf, "test", NULL, &df, &err) == 0, "float twin loads: %s", err.msg);
		CHECK(ds.storage == DLK_STORE_U8 && df.storage == DLK_STORE_F32);
		CHECK_MSG(same_floats(&ds, &df), "Fashion-MNIST test set: gathered bytes = float storage, bit for bit");
		dlk_dataset_release(&df);
		unlink(p);
		free(p);
		spec.mean = 0, spec.std = 1;
	}
	dlk_dataset_release(&ds);

	/* the pin is checked against the bytes as fetched */
	spec.test.labels.sha256 = "0000000000000000000000000000000000000000000000000000000000000000";
	CHECK(dlk_data_load(&spec, "test", NULL, &ds, &err) == -1);
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "t10k-labels-idx1-ubyte.gz': sha256 mismatch: expected 0000000000000000000000000000000000000000000000000000000000000000, got ");
}

/* data.shard: each rank's part of a plain (read by range) and a gzip (streamed) IDX file is its
 * range of the whole, the parts cover the split, and a file of the wrong length fails either way;
 * the range reader fed a byte at a time agrees; the test split is never sharded. */
static void sharded_loads(void)
{
	struct dlk_buf im = DLK_BUF_INIT, lb = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	const char *m1[] = { "images" }, *m2[] = { "labels" };
	const struct dlk_buf *d1[] = { &im }, *d2[] = { &lb };
	struct dlk_dataset whole = DLK_DATASET_INIT;
	char *paths[2][2];

	make_images(&im, 11, 2, 3);
	make_labels(&lb, 11, 5);
	paths[0][0] = write_file("sh-im.idx", im.data, im.len);
	paths[0][1] = write_file("sh-lb.idx", lb.data, lb.len);
	paths[1][0] = write_container("sh-im.gz", "gz", m1, d1, 1);
	paths[1][1] = write_container("sh-lb.gz", "gz", m2, d2, 1);
	{
		struct dlk_data spec = idx_spec(paths[0][0], paths[0][1]);
		CHECK(dlk_data_load(&spec, "train", NULL, &whole, &err) == 0 && whole.n == 11);
	}
	for (int k = 0; k < 2; k++)
		for (int world = 2; world <= 4; world++) {
			size_t next = 0;
			for (int rank = 0; rank < world; rank++) {
				struct dlk_data spec = idx_spec(paths[k][0], paths[k][1]);
				struct dlk_data_opts o = { 0 };
				struct dlk_dataset ds = DLK_DATASET_INIT;
				o.shard_rank = rank;
				o.shard_world = world;
				CHECK_MSG(dlk_data_load(&spec, "train", &o, &ds, &err) == 0, "%s %d/%d: %s", k ? "gz" : "plain", rank,
				          world, err.msg);
				CHECK_MSG(ds.sharded && ds.base == next && ds.total == 11 && ds.n_classes == 5 &&
				          !memcmp(ds.x8, whole.x8 + ds.base * 6, ds.n * 6) &&
				          !memcmp(ds.y, whole.y + ds.base, ds.n * sizeof(int32_t)),
				          "%s rank %d of %d holds samples [%zu, +%zu) of the whole", k ? "gz" : "plain", rank, world,
				          ds.base, ds.n);
				next = ds.base + ds.n;
				dlk_dataset_release(&ds);
				/* the test split stays whole */
				CHECK(dlk_data_load(&spec, "test", &o, &ds, &err) == 0 && !ds.sharded && ds.n == 11);
				dlk_dataset_release(&ds);
			}
			CHECK_MSG(next == 11, "the parts of %d ranks cover the split", world);
		}
	/* a plain file one byte short, or one byte long, fails although the shard's bytes are there */
	for (int d = -1; d <= 1; d += 2) {
		char *bad = write_file("sh-bad.idx", im.data, d < 0 ? im.len - 1 : im.len);
		if (d > 0) {
			FILE *f = fopen(bad, "ab");
			fputc(7, f);
			fclose(f);
		}
		struct dlk_data spec = idx_spec(bad, paths[0][1]);
		struct dlk_data_opts o = { 0 };
		struct dlk_dataset ds = DLK_DATASET_INIT;
		o.shard_world = 2;
		CHECK(dlk_data_load(&spec, "train", &o, &ds, &err) == -1);
		CHECK_MSG(strstr(err.msg, d < 0 ? "truncated IDX data" : "unexpected bytes after the IDX data") != NULL,
		          "a file of the wrong length: %s", err.msg);
		dlk_err_clear(&err);
		free(bad);
	}
	/* byte by byte, the reader keeps the same range */
	{
		struct dlk_idx_range r;
		dlk_idx_range_init(&r, 1, 3);
		for (size_t i = 0; i < im.len; i++)
			CHECK(dlk_idx_range_feed(&r, im.data + i, 1, "im", &err) == 0);
		CHECK(dlk_idx_range_finish(&r, "im", &err) == 0);
		CHECK(r.n == 11 && r.first == 3 && r.count == 4 && r.out.len == 16 + 4 * 6 &&
		      !memcmp(r.out.data + 16, im.data + 16 + 3 * 6, 4 * 6));
		dlk_idx_range_release(&r);
		dlk_idx_range_init(&r, 0, 2);
		CHECK(dlk_idx_range_feed(&r, "\1\0\10\1", 4, "im", &err) == -1 && strstr(err.msg, "bad magic"));
		dlk_idx_range_release(&r);
		dlk_idx_range_init(&r, 0, 2);
		CHECK(dlk_idx_range_feed(&r, im.data, 10, "im", &err) == 0);
		CHECK(dlk_idx_range_finish(&r, "im", &err) == -1 && strstr(err.msg, "truncated IDX header"));
		dlk_idx_range_release(&r);
	}
	dlk_dataset_release(&whole);
	for (int k = 0; k < 2; k++)
		free(paths[k][0]), free(paths[k][1]);
	dlk_buf_release(&im);
	dlk_buf_release(&lb);
}

int main(void)
{
	tmpdir = test_tmpdir("test-idx");
	if (!tmpdir)
		return 1;
	decode_errors();
	decode_types();
	join_errors();
	decode_buf();
	containers();
	gather_matches_float_storage();
	sharded_loads();
	fashion_mnist();
	test_tmpdir_remove(tmpdir);
	return CHECK_DONE();
}
