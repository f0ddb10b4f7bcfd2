#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

char dlk_buf_empty[1];

void dlk_buf_grow(struct dlk_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;

	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap * 2;
	/* the first allocation: dlk_buf_empty (or a zeroed struct's NULL) is not ours to realloc */
	b->data = xrealloc(b->cap ? b->data : NULL, cap);
	if (!b->cap)
		b->data[0] = '\0';
	b->cap = cap;
}

void dlk_buf_add(struct dlk_buf *b, const void *data, size_t len)
{
	dlk_buf_grow(b, len);
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void dlk_buf_adds(struct dlk_buf *b, const char *s)
{
	dlk_buf_add(b, s, strlen(s));
}

void dlk_buf_addc(struct dlk_buf *b, char c)
{
	dlk_buf_add(b, &c, 1);
}

void dlk_buf_add_base64(struct dlk_buf *b, const void *data, size_t len)
{
	static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	char *o;

	dlk_buf_grow(b, (len + 2) / 3 * 4);
	o = b->data + b->len;
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) |
		             (i + 2 < len ? p[i + 2] : 0);
		*o++ = tbl[v >> 18 & 63];
		*o++ = tbl[v >> 12 & 63];
		*o++ = i + 1 < len ? tbl[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? tbl[v & 63] : '=';
	}
	b->len = (size_t)(o - b->data);
	*o = '\0';
}

void dlk_buf_vaddf(struct dlk_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	dlk_buf_grow(b, 64);
	va_copy(cp, ap);
	n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, cp);
	va_end(cp);
	if (n < 0)
		return;
	if ((size_t)n >= b->cap - b->len) {
		dlk_buf_grow(b, (size_t)n);
		vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

void dlk_buf_addf(struct dlk_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dlk_buf_vaddf(b, fmt, ap);
	va_end(ap);
}

void dlk_buf_reset(struct dlk_buf *b)
{
	b->len = 0;
	if (b->cap)
		b->data[0] = '\0';
}

char *dlk_buf_detach(struct dlk_buf *b, size_t *len)
{
	char *d;

	dlk_buf_grow(b, 0);
	b->data[b->len] = '\0';
	d = b->data;
	if (len)
		*len = b->len;
	*b = (struct dlk_buf)DLK_BUF_INIT;
	return d;
}

void dlk_buf_release(struct dlk_buf *b)
{
	if (b->cap)
		free(b->data);
	*b = (struct dlk_buf)DLK_BUF_INIT;
}

int dlk_buf_read_file(struct dlk_buf *b, const char *path, size_t max_bytes, char *errmsg, size_t errmsg_len)
{
	/* a FIFO or a device named as a file is refused, never waited on */
	FILE *f = dlk_fopen_regular(path, errmsg, errmsg_len);
	char chunk[65536];
	size_t n, total = 0;

	if (!f)
		return -1;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		total += n;
		if (max_bytes && total > max_bytes) {
			snprintf(errmsg, errmsg_len, "'%s' is larger than the limit of %zu bytes", path, max_bytes);
			fclose(f);
			return -1;
		}
		dlk_buf_add(b, chunk, n);
	}
	if (ferror(f)) {
		snprintf(errmsg, errmsg_len, "cannot read '%s': %s", path, strerror(errno));
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}
