/* Tar shards in the WebDataset convention: members grouped by key, one sample per key: KEY.cls
 * (the label) with one payload (KEY.u8, .f32, .pgm, .png or .jpg), or, for paired images
 * (image-to-image), KEY.png or KEY.jpg (the input) with KEY.target.png or KEY.target.jpg. */
#include "lib/data/decode.h"
#include "lib/data/image.h"

#include <archive.h>
#include <archive_entry.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/unpack.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

enum payload { PAY_NONE, PAY_U8, PAY_F32, PAY_PGM, PAY_IMG };

struct shard {
	const char *name;
	const int *want;               /* the model's shape, or NULL */
	const int *twant;              /* paired images: the targets' shape; NULL: labels */
	struct dlk_samples s;           /* in s.x8 while every payload so far was 8-bit, else s.x */
	size_t cap;
	char *first_key;               /* the sample that fixed the shape, for messages */
	/* the sample being assembled */
	char *key;
	int have_label;
	int32_t label;
	enum payload pay;
	char *pay_member;
	struct dlk_buf data;
	int shape[3];
	/* paired: the target member being assembled, and the targets so far (s.t8, tcap of them) */
	char *tgt_member;
	struct dlk_buf tdata;
	size_t tcap;
	/* indexing (dlk_tar_index_archive): the members to decode later, and the payloads' places */
	const char *local;
	struct dlk_image_files *index;
	unsigned long long pay_off, pay_len, tgt_off, tgt_len;
};

static int pgm_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Reads a decimal header number of a P5 file, skipping blanks and '#' comments before it. */
static int pgm_number(const unsigned char *p, size_t len, size_t *pos, unsigned long *v)
{
	for (;;) {
		while (*pos < len && pgm_space(p[*pos]))
			(*pos)++;
		if (*pos < len && p[*pos] == '#') {
			while (*pos < len && p[*pos] != '\n')
				(*pos)++;
			continue;
		}
		break;
	}
	if (*pos >= len || p[*pos] < '0' || p[*pos] > '9')
		return -1;
	*v = 0;
	while (*pos < len && p[*pos] >= '0' && p[*pos] <= '9') {
		*v = *v * 10 + (unsigned long)(p[*pos] - '0');
		if (*v > 1000000)
			return -1;
		(*pos)++;
	}
	return 0;
}

/* Moves the samples so far from x8 to x, for a float payload after 8-bit ones. */
static void promote_to_float(struct shard *sh)
{
	size_t i, total = sh->s.n * sh->s.sample_size;

	sh->s.x = xmalloc((sh->cap ? sh->cap : 1) * sh->s.sample_size * sizeof(float));
	for (i = 0; i < total; i++)
		sh->s.x[i] = sh->s.x8[i];
	free(sh->s.x8);
	sh->s.x8 = NULL;
}

/* Turns the payload in sh->data into values appended to sh->s.x8 (8-bit payloads, as long as
 * every one so far was) or sh->s.x (after checking the shape). */
static int take_payload(struct shard *sh, struct dlk_err *err)
{
	const unsigned char *p = (const unsigned char *)sh->data.data;
	size_t len = sh->data.len, n = 0, i, pos = 0;
	int shape[3] = { 1, 1, 0 };
	float *dst;
	int f32;

	if (sh->pay == PAY_IMG) {
		/* a PNG or JPEG becomes the model input's 8-bit planar pixels, then is a .u8 payload */
		size_t want;
		uint8_t *px;
		if (!sh->want || sh->want[0] < 1 || sh->want[1] < 1 || sh->want[2] < 1)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s': images need a model input [C, H, W]",
			                sh->name, sh->pay_member);
		want = (size_t)sh->want[0] * (size_t)sh->want[1] * (size_t)sh->want[2];
		px = xmalloc(want);
		char *what = xasprintf("%s: %s", sh->name, sh->pay_member);
		int r = dlk_image_sample(p, len, what, sh->want, px, err);
		free(what);
		if (r < 0) {
			free(px);
			return -1;
		}
		dlk_buf_reset(&sh->data);
		dlk_buf_add(&sh->data, px, want);
		free(px);
		sh->pay = PAY_U8;
		p = (const unsigned char *)sh->data.data;
		len = sh->data.len;
	}

	switch (sh->pay) {
	case PAY_U8:
		n = len;
		break;
	case PAY_F32:
		if (len % 4)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': member '%s': %zu bytes is not a whole number of float32 values (the last one starts at byte offset %zu)",
			                sh->name, sh->pay_member, len, len - len % 4);
		n = len / 4;
		break;
	case PAY_PGM: {
		unsigned long w, h, maxval;
		if (len < 2 || p[0] != 'P' || p[1] != '5')
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': member '%s': not a binary PGM (P5) image at byte offset 0", sh->name,
			                sh->pay_member);
		pos = 2;
		if (pgm_number(p, len, &pos, &w) < 0 || pgm_number(p, len, &pos, &h) < 0 ||
		    pgm_number(p, len, &pos, &maxval) < 0 || pos >= len || !pgm_space(p[pos]))
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': member '%s': bad PGM header at byte offset %zu", sh->name,
			                sh->pay_member, pos);
		pos++;
		if (w == 0 || h == 0 || maxval == 0 || maxval > 255)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': member '%s': PGM %lux%lu with maxval %lu; dlk reads 8-bit images (maxval 1 to 255) of at least 1x1",
			                sh->name, sh->pay_member, w, h, maxval);
		if (len - pos != w * h)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': member '%s': a %lux%lu image needs %lu pixel bytes from byte offset %zu, the member has %zu",
			                sh->name, sh->pay_member, w, h, w * h, pos, len - pos);
		shape[1] = (int)h;
		shape[2] = (int)w;
		n = w * h;
		break;
	}
	case PAY_NONE:
	case PAY_IMG:
		break;
	}
	if (n == 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s' holds no values", sh->name, sh->pay_member);
	if (n > (1u << 30))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s' holds more than 2^30 values", sh->name,
		                sh->pay_member);
	if (shape[2] == 0)
		shape[2] = (int)n;

	if (sh->s.n == 0) {
		if (sh->want && (sh->want[0] > 0 || sh->want[1] > 0 || sh->want[2] > 0)) {
			size_t want = (size_t)(sh->want[0] > 0 ? sh->want[0] : 0) *
			              (size_t)(sh->want[1] > 0 ? sh->want[1] : 0) *
			              (size_t)(sh->want[2] > 0 ? sh->want[2] : 0);
			if (want != n)
				return dlk_errf(err, DLK_EXIT_CONFIG,
				                "'%s': member '%s' holds %zu values, but the model input is %dx%dx%d = %zu",
				                sh->name, sh->pay_member, n, sh->want[0], sh->want[1], sh->want[2], want);
			memcpy(shape, sh->want, sizeof(shape));
		}
		memcpy(sh->s.shape, shape, sizeof(shape));
		sh->s.sample_size = n;
		sh->first_key = xstrdup(sh->key);
	} else if (n != sh->s.sample_size ||
	           (sh->pay == PAY_PGM && !(sh->want && sh->want[0] > 0) &&
	            (shape[1] != sh->s.shape[1] || shape[2] != sh->s.shape[2]))) {
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': member '%s' holds %zu values (%dx%d), but the first sample '%s' holds %zu (%dx%d)",
		                sh->name, sh->pay_member, n, shape[1], shape[2], sh->first_key,
		                sh->s.sample_size, sh->s.shape[1], sh->s.shape[2]);
	}
	/* the first sample picks the storage; a float one after 8-bit ones switches to float */
	f32 = sh->s.n ? sh->s.x != NULL : sh->pay == PAY_F32;
	if (!f32 && sh->pay == PAY_F32) {
		promote_to_float(sh);
		f32 = 1;
	}
	if (sh->s.n == sh->cap) {
		if (sh->cap > ((size_t)1 << 40) / sh->s.sample_size)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': too many samples", sh->name);
		sh->cap = sh->cap ? 2 * sh->cap : 256;
		if (f32)
			sh->s.x = xrealloc(sh->s.x, sh->cap * sh->s.sample_size * sizeof(float));
		else
			sh->s.x8 = xrealloc(sh->s.x8, sh->cap * sh->s.sample_size);
		sh->s.y = xrealloc(sh->s.y, sh->cap * sizeof(int32_t));
	}
	if (!f32) {
		memcpy(sh->s.x8 + sh->s.n * sh->s.sample_size, p + pos, n);
		return 0;
	}
	dst = sh->s.x + sh->s.n * sh->s.sample_size;
	if (sh->pay == PAY_F32) {
		for (i = 0; i < n; i++) {
			uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
			             (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
			float f;
			memcpy(&f, &u, sizeof(f));
			if (!isfinite(f))
				return dlk_errf(err, DLK_EXIT_CONFIG,
				                "'%s': member '%s': the value at byte offset %zu is not finite",
				                sh->name, sh->pay_member, 4 * i);
			dst[i] = f;
		}
	} else {
		for (i = 0; i < n; i++)
			dst[i] = p[pos + i];
	}
	return 0;
}

/* Indexing: the sample's image member appended to the index, decoded later. */
static int index_payload(struct shard *sh, struct dlk_err *err)
{
	if (!sh->want || sh->want[0] < 1 || sh->want[1] < 1 || sh->want[2] < 1)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s': images need a model input [C, H, W]", sh->name,
		                sh->pay_member);
	if (!sh->index) {
		sh->index = dlk_image_files_members(sh->want, sh->twant);
		memcpy(sh->s.shape, sh->want, sizeof(sh->s.shape));
		sh->s.sample_size = sh->index->sample_size;
	}
	if (sh->s.n == sh->cap) {
		sh->cap = sh->cap ? 2 * sh->cap : 256;
		sh->s.y = xrealloc(sh->s.y, sh->cap * sizeof(int32_t));
	}
	char *what = xasprintf("%s: %s", sh->name, sh->pay_member), *twhat = NULL;
	struct dlk_member in = { sh->pay_off, sh->pay_len, what }, t = { sh->tgt_off, sh->tgt_len, NULL };
	if (sh->twant)
		t.name = twhat = xasprintf("%s: %s", sh->name, sh->tgt_member);
	dlk_image_files_add_member(sh->index, sh->local, &in, sh->twant ? &t : NULL);
	free(what);
	free(twhat);
	return 0;
}

/* Paired: the sample's target image decoded to the targets' shape, appended to s.t8 (at the
 * sample's index: take_payload() has taken its input). */
static int take_target(struct shard *sh, struct dlk_err *err)
{
	size_t m = (size_t)sh->twant[0] * (size_t)sh->twant[1] * (size_t)sh->twant[2];
	if (sh->s.n >= sh->tcap) {
		sh->tcap = sh->cap > sh->s.n ? sh->cap : sh->s.n + 1;
		sh->s.t8 = xrealloc(sh->s.t8, sh->tcap * m);
	}
	sh->s.target_size = m;
	char *what = xasprintf("%s: %s", sh->name, sh->tgt_member);
	int r = dlk_image_sample(sh->tdata.data, sh->tdata.len, what, sh->twant, sh->s.t8 + sh->s.n * m, err);
	free(what);
	return r;
}

/* Completes the sample under assembly (if any). */
static int finish_sample(struct shard *sh, struct dlk_err *err)
{
	int ret = 0;

	if (!sh->key)
		return 0;
	if (sh->twant && sh->pay == PAY_NONE)
		ret = dlk_errf(err, DLK_EXIT_CONFIG, "'%s': sample '%s' has no input image: member '%s.png' or '%s.jpg' is missing",
		               sh->name, sh->key, sh->key, sh->key);
	else if (sh->twant && !sh->tgt_member)
		ret = dlk_errf(err, DLK_EXIT_CONFIG,
		               "'%s': sample '%s' has no target image: member '%s.target.png' or '%s.target.jpg' is missing",
		               sh->name, sh->key, sh->key, sh->key);
	else if (!sh->twant && !sh->have_label)
		ret = dlk_errf(err, DLK_EXIT_CONFIG, "'%s': sample '%s' has no label: member '%s.cls' is missing",
		               sh->name, sh->key, sh->key);
	else if (sh->pay == PAY_NONE)
		ret = dlk_errf(err, DLK_EXIT_CONFIG,
		               "'%s': sample '%s' has no data: expected a member '%s.u8', '%s.f32', '%s.pgm', '%s.png' or '%s.jpg'",
		               sh->name, sh->key, sh->key, sh->key, sh->key, sh->key, sh->key);
	else if ((sh->local ? index_payload(sh, err) : take_payload(sh, err)) < 0)
		ret = -1;
	else if (sh->twant && !sh->local && take_target(sh, err) < 0)
		ret = -1;
	if (ret == 0) {
		sh->s.y[sh->s.n++] = sh->label;
		if (sh->label > sh->s.max_label)
			sh->s.max_label = sh->label;
	}
	free(sh->key);
	free(sh->pay_member);
	free(sh->tgt_member);
	sh->key = sh->pay_member = sh->tgt_member = NULL;
	sh->have_label = 0;
	sh->label = 0;
	sh->pay = PAY_NONE;
	return ret;
}

static int parse_label(struct shard *sh, const char *member, const struct dlk_buf *b, struct dlk_err *err)
{
	char text[32];
	size_t i = 0, n = b->len;
	long v = 0;

	while (i < n && pgm_space((unsigned char)b->data[i]))
		i++;
	while (n > i && pgm_space((unsigned char)b->data[n - 1]))
		n--;
	if (i == n)
		goto bad;
	for (size_t k = i; k < n; k++) {
		if (b->data[k] < '0' || b->data[k] > '9')
			goto bad;
		v = v * 10 + (b->data[k] - '0');
		if (v >= DLK_MAX_CLASSES)
			goto bad;
	}
	sh->label = (int32_t)v;
	sh->have_label = 1;
	return 0;
bad:
	snprintf(text, sizeof(text), "%.*s", (int)(n - i < 20 ? n - i : 20), b->data + i);
	for (i = 0; text[i]; i++)
		if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] >= 0x7f || text[i] == '\'')
			text[i] = '?';
	return dlk_errf(err, DLK_EXIT_CONFIG,
	                "'%s': member '%s': expected a non-negative integer label below %d, got '%s'",
	                sh->name, member, DLK_MAX_CLASSES, text);
}

/* A sample's payload or target member e (path): with `local`, where its bytes lie in the archive
 * (*off, *len; 1 when it cannot be read by member: not an image, no size, sparse), else its bytes
 * into b (total counts what the archive unpacked to, against max_bytes). */
static int take_member(struct archive *a, struct archive_entry *e, const char *name, const char *path,
                       unsigned long long max_bytes, unsigned long long *total, const char *local, int image,
                       unsigned long long *off, unsigned long long *len, struct dlk_buf *b, struct dlk_err *err)
{
	if (max_bytes && archive_entry_size_is_set(e) && (unsigned long long)archive_entry_size(e) > max_bytes - *total) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': unpacks to more than the limit of %llu bytes (stopped in member '%s')",
		         name, max_bytes, path);
		return dlk_err_hint(err, "raise data.max_bytes if the data really is this large");
	}
	dlk_buf_reset(b);
	if (local) {
		/* the member's bytes are where the archive's reader stands now */
		if (!image || !archive_entry_size_is_set(e) || archive_entry_sparse_count(e) > 0)
			return 1;
		*off = (unsigned long long)archive_filter_bytes(a, 0);
		*len = (unsigned long long)archive_entry_size(e);
		/* its first bytes, checked now rather than when a batch takes it: a member that is no
		 * PNG or JPEG stops the run before its first step, as decoding once would */
		unsigned char head[8];
		la_ssize_t got = archive_read_data(a, head, sizeof(head));
		if (got < 0)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s': %s", name, path, archive_error_string(a));
		if (!dlk_image_signature(head, (size_t)got))
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s: %s': neither a PNG nor a JPEG (by its first bytes)", name, path);
		return 0;
	}
	return dlk_archive_read_entry(a, name, path, max_bytes, total, NULL, NULL, b, err) < 0 ? -1 : 0;
}

/* dlk_tar_decode_archive(), or with `local` (the archive's local path) its index: *index gets
 * the image members, out the labels (and the shape), nothing decoded; 1 (nothing set) when the
 * archive cannot be read by member (compressed, not a tar, a payload that is not an image). */
static int tar_walk(struct archive *a, const char *name, const int shape[3], const int tshape[3],
                    unsigned long long max_bytes, const char *local, struct dlk_samples *out,
                    struct dlk_image_files **index, struct dlk_err *err)
{
	struct shard sh = { .data = DLK_BUF_INIT, .tdata = DLK_BUF_INIT };
	struct archive_entry *e;
	struct dlk_buf member_data = DLK_BUF_INIT;
	unsigned long long total = 0;
	int r, ret = -1, first = 1;

	sh.name = name;
	sh.want = shape;
	sh.twant = tshape;
	sh.s.max_label = -1;
	sh.local = local;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *path = archive_entry_pathname(e), *base, *dot;
		enum payload pay;
		size_t keylen;
		int target = 0, m;

		if (first && archive_format(a) == ARCHIVE_FORMAT_RAW) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a tar archive", name);
			goto out;
		}
		/* by member: the archive's own bytes, a tar's members at their offsets */
		if (first && local &&
		    (archive_filter_count(a) != 1 || (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) != ARCHIVE_FORMAT_TAR)) {
			ret = 1;
			goto out;
		}
		first = 0;
		if (archive_entry_filetype(e) != AE_IFREG || !path)
			continue;
		base = strrchr(path, '/');
		base = base ? base + 1 : path;
		dot = strchr(base, '.');
		/* Hidden files (macOS "._x" resource forks) and names without an extension carry no
		 * sample; other extensions (.json, .txt metadata) are allowed and ignored. */
		if (base[0] == '.' || !dot)
			continue;
		if (tshape && !strncmp(dot, ".target.", 8) && dlk_image_is_image_name(dot + 7)) {
			pay = PAY_IMG;
			target = 1;
		} else if (tshape && !strcmp(dot, ".cls"))
			continue; /* a label means nothing to an image-to-image sample */
		else if (!strcmp(dot, ".cls"))
			pay = PAY_NONE;
		else if (!strcmp(dot, ".u8"))
			pay = PAY_U8;
		else if (!strcmp(dot, ".f32"))
			pay = PAY_F32;
		else if (!strcmp(dot, ".pgm"))
			pay = PAY_PGM;
		else if (dlk_image_is_image_name(dot))
			pay = PAY_IMG;
		else
			continue;
		keylen = (size_t)(dot - path);
		if (!sh.key || strlen(sh.key) != keylen || strncmp(sh.key, path, keylen)) {
			if (finish_sample(&sh, err) < 0)
				goto out;
			sh.key = xstrndup(path, keylen);
		}
		dlk_buf_reset(&member_data);
		if (tshape && pay != PAY_IMG) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s': paired images are PNG or JPEG files", name, path);
			dlk_err_hint(err, "a sample of paired shards is KEY.png (or .jpg), its input, and KEY.target.png (or "
			             ".jpg), its target");
			goto out;
		}
		if (target) {
			if (sh.tgt_member) {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s': sample '%s' has two targets: '%s' and '%s'", name, sh.key,
				         sh.tgt_member, path);
				goto out;
			}
			sh.tgt_member = xstrdup(path);
			if ((m = take_member(a, e, name, path, max_bytes, &total, local, 1, &sh.tgt_off, &sh.tgt_len,
			                     &sh.tdata, err))) {
				ret = m > 0 ? 1 : -1;
				goto out;
			}
			continue;
		}
		if (pay == PAY_NONE) {
			if (sh.have_label) {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s': sample '%s' has two '%s' members", name, sh.key, path);
				goto out;
			}
			if (archive_entry_size_is_set(e) && archive_entry_size(e) > 64) {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s' is %lld bytes; a label is a short integer",
				         name, path, (long long)archive_entry_size(e));
				goto out;
			}
			if (dlk_archive_read_entry(a, name, path, max_bytes, &total, NULL, NULL, &member_data, err) < 0 ||
			    parse_label(&sh, path, &member_data, err) < 0)
				goto out;
			continue;
		}
		if (sh.pay != PAY_NONE) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': sample '%s' has two payloads: '%s' and '%s'", name,
			         sh.key, sh.pay_member, path);
			if (strstr(path, ".target.") || strstr(sh.pay_member, ".target."))
				dlk_err_hint(err, "KEY.target.png is the target of paired images, for model.task: image");
			else
				dlk_err_hint(err, "a sample holds exactly one of .u8, .f32, .pgm, .png or .jpg");
			goto out;
		}
		sh.pay = pay;
		sh.pay_member = xstrdup(path);
		if ((m = take_member(a, e, name, path, max_bytes, &total, local, pay == PAY_IMG, &sh.pay_off, &sh.pay_len,
		                     &sh.data, err))) {
			ret = m > 0 ? 1 : -1;
			goto out;
		}
	}
	if (r != ARCHIVE_EOF) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s", name, archive_error_string(a));
		goto out;
	}
	if (finish_sample(&sh, err) < 0)
		goto out;
	if (sh.s.n == 0) {
		if (tshape)
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the shard holds no samples (KEY.png with KEY.target.png, or .jpg)",
			         name);
		else
			dlk_errf(err, DLK_EXIT_CONFIG,
			         "'%s': the shard holds no samples (KEY.cls with KEY.u8, KEY.f32, KEY.pgm, KEY.png or KEY.jpg)",
			         name);
		goto out;
	}
	*out = sh.s;
	memset(&sh.s, 0, sizeof(sh.s));
	if (index) {
		*index = sh.index;
		sh.index = NULL;
	}
	ret = 0;
out:
	dlk_image_files_free(sh.index);
	dlk_samples_release(&sh.s);
	dlk_buf_release(&sh.data);
	dlk_buf_release(&sh.tdata);
	dlk_buf_release(&member_data);
	free(sh.key);
	free(sh.pay_member);
	free(sh.tgt_member);
	free(sh.first_key);
	return ret;
}

int dlk_tar_decode_archive(struct archive *a, const char *name, const int shape[3], const int tshape[3],
                           unsigned long long max_bytes, struct dlk_samples *out, struct dlk_err *err)
{
	return tar_walk(a, name, shape, tshape, max_bytes, NULL, out, NULL, err);
}

int dlk_tar_index_archive(struct archive *a, const char *name, const char *local, const int shape[3],
                          const int tshape[3], struct dlk_samples *labels, struct dlk_image_files **index,
                          struct dlk_err *err)
{
	*index = NULL;
	return tar_walk(a, name, shape, tshape, 0, local, labels, index, err);
}

int dlk_tar_decode(const void *buf, size_t len, const char *name, const int shape[3],
                   unsigned long long max_bytes, struct dlk_samples *out, struct dlk_err *err)
{
	struct archive *a;
	int ret;

	if (len == 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': empty file, expected a tar archive", name);
	a = dlk_archive_open_mem(buf, len, name, err);
	if (!a)
		return -1;
	ret = dlk_tar_decode_archive(a, name, shape, NULL, max_bytes, out, err);
	dlk_archive_close(a);
	return ret;
}
