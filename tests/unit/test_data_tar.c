/* Tar shards (WebDataset convention): grouping by key, payload kinds, and every error. */
#include "tests/unit/check.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/data/dataset.h"
#include "lib/data/decode.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

struct member {
	const char *name;
	const char *data;
	size_t len;          /* 0 = strlen(data) */
};

static struct dlk_err err = DLK_ERR_INIT;

/* Builds a tar (gzip-compressed when gz) in memory. */
static void make_tar(struct dlk_buf *out, const struct member *m, int n, int gz)
{
	struct archive *a = archive_write_new();
	size_t cap = 1 << 20, used = 0;

	dlk_buf_reset(out);
	dlk_buf_grow(out, cap);
	if (gz)
		archive_write_add_filter_gzip(a);
	archive_write_set_format_pax_restricted(a);
	archive_write_open_memory(a, out->data, cap, &used);
	for (int i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		size_t len = m[i].len ? m[i].len : strlen(m[i].data);
		archive_entry_set_pathname(e, m[i].name);
		archive_entry_set_size(e, (la_int64_t)len);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_write_header(a, e);
		archive_write_data(a, m[i].data, len);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	out->len = used;
}

static int dec(const struct member *m, int n, const int *shape, struct dlk_samples *s)
{
	struct dlk_buf b = DLK_BUF_INIT;
	int r;

	make_tar(&b, m, n, 0);
	dlk_samples_release(s);
	dlk_err_clear(&err);
	r = dlk_tar_decode(b.data, b.len, "s.tar", shape, 0, s, &err);
	dlk_buf_release(&b);
	return r;
}

#define N(a) ((int)DLK_ARRAY_SIZE(a))

int main(void)
{
	struct dlk_samples s = DLK_SAMPLES_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	static const char f32[] = "\x00\x00\x80\x3f\x00\x00\x00\xc0"; /* 1.0f, -2.0f */

	/* u8 payloads, labels with whitespace, members in directories, other members ignored */
	{
		const struct member m[] = {
			{ "train/a.cls", "3\n", 0 }, { "train/a.u8", "\x01\x02\x03\x04", 4 },
			{ "train/a.json", "{}", 0 }, { "train/b.u8", "\x05\x06\x07\x08", 4 },
			{ "train/b.cls", " 1 ", 0 }, { "README", "hello", 0 },
		};
		CHECK_MSG(dec(m, N(m), NULL, &s) == 0, "u8 shard decodes: %s", err.msg);
		CHECK(s.n == 2 && s.sample_size == 4 && s.shape[0] == 1 && s.shape[1] == 1 && s.shape[2] == 4);
		CHECK(s.y[0] == 3 && s.y[1] == 1 && s.max_label == 3);
		CHECK(s.x == NULL && s.x8 && s.x8[0] == 1 && s.x8[7] == 8);  /* 8-bit data stays bytes */
		/* a model shape of the same size is taken */
		int shape[3] = { 1, 2, 2 };
		CHECK(dec(m, N(m), shape, &s) == 0);
		CHECK(s.shape[1] == 2 && s.shape[2] == 2);
		int bad[3] = { 1, 1, 5 };
		CHECK(dec(m, N(m), bad, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'train/a.u8' holds 4 values, but the model input is 1x1x5 = 5");
	}
	/* f32 and pgm payloads */
	{
		const struct member m[] = { { "k.cls", "0", 0 }, { "k.f32", f32, 8 } };
		CHECK(dec(m, N(m), NULL, &s) == 0);
		CHECK(s.n == 1 && s.sample_size == 2 && s.x8 == NULL && s.x[0] == 1.0f && s.x[1] == -2.0f);
		/* 8-bit samples before a float one move to float storage; after one, they join it */
		const struct member mix[] = {
			{ "a.cls", "0", 0 }, { "a.u8", "\x07\xff", 2 }, { "b.cls", "1", 0 }, { "b.u8", "\x00\x01", 2 },
			{ "c.cls", "2", 0 }, { "c.f32", f32, 8 }, { "d.cls", "0", 0 }, { "d.u8", "\x09\x80", 2 },
		};
		CHECK_MSG(dec(mix, N(mix), NULL, &s) == 0, "mixed shard decodes: %s", err.msg);
		CHECK(s.n == 4 && s.x8 == NULL && s.x != NULL);
		CHECK(s.x[0] == 7 && s.x[1] == 255 && s.x[2] == 0 && s.x[3] == 1);
		CHECK(s.x[4] == 1.0f && s.x[5] == -2.0f && s.x[6] == 9 && s.x[7] == 128);
		CHECK(s.y[2] == 2 && s.y[3] == 0);
		const struct member odd[] = { { "k.cls", "0", 0 }, { "k.f32", f32, 7 } };
		CHECK(dec(odd, N(odd), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'k.f32': 7 bytes is not a whole number of float32 values (the last one starts at byte offset 4)");
		const struct member inf[] = { { "k.cls", "0", 0 }, { "k.f32", "\0\0\x80\x7f", 4 } };
		CHECK(dec(inf, N(inf), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'k.f32': the value at byte offset 0 is not finite");
	}
	{
		const struct member m[] = {
			{ "p0.pgm", "P5\n# made by hand\n3 2\n255\n\x00\x01\x02\x03\x04\xff", 32 }, { "p0.cls", "7", 0 },
			{ "p1.pgm", "P5 3 2 255 abcdef", 0 }, { "p1.cls", "2", 0 },
		};
		CHECK_MSG(dec(m, N(m), NULL, &s) == 0, "pgm shard decodes: %s", err.msg);
		CHECK(s.n == 2 && s.shape[0] == 1 && s.shape[1] == 2 && s.shape[2] == 3 && s.sample_size == 6);
		CHECK(s.x8[5] == 255 && s.x8[6] == 'a' && s.y[0] == 7);
		const struct member wrong[] = { { "p.pgm", "P6 1 1 255 abc", 0 }, { "p.cls", "1", 0 } };
		CHECK(dec(wrong, N(wrong), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'p.pgm': not a binary PGM (P5) image at byte offset 0");
		const struct member deep[] = { { "p.pgm", "P5 1 1 65535 ab", 0 }, { "p.cls", "1", 0 } };
		CHECK(dec(deep, N(deep), NULL, &s) == -1);
		CHECK_CONTAINS(err.msg, "maxval 65535");
		const struct member shortpix[] = { { "p.pgm", "P5 2 2 255\nabc", 0 }, { "p.cls", "1", 0 } };
		CHECK(dec(shortpix, N(shortpix), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'p.pgm': a 2x2 image needs 4 pixel bytes from byte offset 11, the member has 3");
		const struct member hdr[] = { { "p.pgm", "P5 2 x", 0 }, { "p.cls", "1", 0 } };
		CHECK(dec(hdr, N(hdr), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'p.pgm': bad PGM header at byte offset 5");
		const struct member mixed[] = {
			{ "a.pgm", "P5 2 3 255\nabcdef", 0 }, { "a.cls", "1", 0 },
			{ "b.pgm", "P5 3 2 255\nabcdef", 0 }, { "b.cls", "1", 0 },
		};
		CHECK(dec(mixed, N(mixed), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'b.pgm' holds 6 values (2x3), but the first sample 'a' holds 6 (3x2)");
	}
	/* grouping errors */
	{
		const struct member nolabel[] = { { "a.cls", "1", 0 }, { "a.u8", "x", 0 }, { "b.u8", "y", 0 } };
		CHECK(dec(nolabel, N(nolabel), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': sample 'b' has no label: member 'b.cls' is missing");
		const struct member nodata[] = { { "a.cls", "1", 0 }, { "b.cls", "1", 0 }, { "b.u8", "y", 0 } };
		CHECK(dec(nodata, N(nodata), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': sample 'a' has no data: expected a member 'a.u8', 'a.f32', 'a.pgm', 'a.png' or 'a.jpg'");
		const struct member two[] = { { "a.cls", "1", 0 }, { "a.u8", "x", 0 }, { "a.f32", f32, 4 } };
		CHECK(dec(two, N(two), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': sample 'a' has two payloads: 'a.u8' and 'a.f32'");
		const struct member twolabels[] = { { "a.cls", "1", 0 }, { "a.cls", "2", 0 }, { "a.u8", "x", 0 } };
		CHECK(dec(twolabels, N(twolabels), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': sample 'a' has two 'a.cls' members");
		const struct member ragged[] = { { "a.cls", "1", 0 }, { "a.u8", "xy", 0 }, { "b.cls", "1", 0 }, { "b.u8", "xyz", 0 } };
		CHECK(dec(ragged, N(ragged), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'b.u8' holds 3 values (1x3), but the first sample 'a' holds 2 (1x2)");
		const struct member badlabel[] = { { "a.cls", "dog", 0 }, { "a.u8", "x", 0 } };
		CHECK(dec(badlabel, N(badlabel), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'a.cls': expected a non-negative integer label below 100000, got 'dog'");
		const struct member neg[] = { { "a.cls", "-1", 0 }, { "a.u8", "x", 0 } };
		CHECK(dec(neg, N(neg), NULL, &s) == -1);
		CHECK_CONTAINS(err.msg, "got '-1'");
		const struct member empty[] = { { "a.cls", "1", 0 }, { "a.u8", "", 0 } };
		CHECK(dec(empty, N(empty), NULL, &s) == -1);
		CHECK_STR(err.msg, "'s.tar': member 'a.u8' holds no values");
		const struct member none[] = { { "notes.txt", "hi", 0 } };
		CHECK(dec(none, N(none), NULL, &s) == -1);
		CHECK_CONTAINS(err.msg, "'s.tar': the shard holds no samples");
	}
	/* not a tar, truncated tar, gzip-compressed tar, and the size bound */
	{
		CHECK(dlk_tar_decode("hello world", 11, "s.tar", NULL, 0, &s, &err) == -1);
		CHECK_STR(err.msg, "'s.tar': not a tar archive");
		CHECK(dlk_tar_decode("", 0, "s.tar", NULL, 0, &s, &err) == -1);
		const struct member m[] = { { "a.cls", "1", 0 }, { "a.u8", "0123456789abcdef0123456789abcdef", 0 },
		                            { "b.cls", "2", 0 }, { "b.u8", "0123456789abcdef0123456789abcdeg", 0 } };
		make_tar(&b, m, N(m), 0);
		for (size_t cut = 0; cut < b.len; cut += 97) {
			int r = dlk_tar_decode(b.data, cut, "s.tar", NULL, 0, &s, &err);
			if (r == 0)
				dlk_samples_release(&s);
			CHECK_MSG(r == -1 || cut >= 2048, "a tar cut at %zu fails (%s)", cut, err.msg);
		}
		make_tar(&b, m, N(m), 1);
		CHECK_MSG(dlk_tar_decode(b.data, b.len, "s.tar.gz", NULL, 0, &s, &err) == 0, "tar.gz: %s", err.msg);
		CHECK(s.n == 2 && s.x8[63] == 'g' && s.y[1] == 2);
		dlk_samples_release(&s);
		CHECK(dlk_tar_decode(b.data, b.len, "s.tar.gz", NULL, 40, &s, &err) == -1);
		CHECK_CONTAINS(err.msg, "more than the limit of 40 bytes");
	}
	/* through dlk_data_load */
	{
		const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
		char *path = xasprintf("%s/dlk-test-tar-XXXXXX", tmp);
		int fd = mkstemp(path);
		const struct member m[] = { { "a.cls", "1", 0 }, { "a.u8", "\x00\xff", 2 }, { "b.cls", "0", 0 }, { "b.u8", "\x33\x66", 2 } };
		struct dlk_data d;
		struct dlk_dataset ds = DLK_DATASET_INIT;
		make_tar(&b, m, N(m), 1);
		CHECK(fd >= 0 && write(fd, b.data, b.len) == (ssize_t)b.len);
		close(fd);
		memset(&d, 0, sizeof(d));
		d.format = DLK_DATA_TAR;
		d.train.source.url = path;
		d.scale = 1.0f / 255, d.std = 1;
		d.max_bytes = 1 << 20;
		CHECK_MSG(dlk_data_load(&d, "train", NULL, &ds, &err) == 0, "tar loads: %s", err.msg);
		CHECK(ds.n == 2 && ds.sample_size == 2 && ds.n_classes == 2);
		CHECK(ds.storage == DLK_STORE_U8);
		float x[4];
		dlk_dataset_gather_range(&ds, 0, 2, x);
		CHECK_NEAR(x[1], 1.0, 1e-6);
		CHECK_NEAR(x[2], 0.2, 1e-6);
		size_t order[2] = { 1, 0 };
		dlk_dataset_gather(&ds, order, 2, x);
		CHECK_NEAR(x[0], 0.2, 1e-6);
		CHECK_NEAR(x[3], 1.0, 1e-6);
		dlk_dataset_release(&ds);
		unlink(path);
		free(path);
	}
	dlk_buf_release(&b);
	dlk_samples_release(&s);
	return CHECK_DONE();
}
