/* A growable byte buffer, always NUL-terminated (so text can be used as a C string).
 *
 * data is never NULL: until the first append it points at a shared empty string (git's
 * strbuf_slopbuf), so `b.data` is a valid C string from DLK_BUF_INIT on and callers need no
 * `data ? data : ""` guard. cap == 0 means no memory is owned yet. */
#ifndef DLK_UTIL_BUF_H
#define DLK_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct dlk_buf {
	char *data;   /* owned when cap > 0; dlk_buf_empty (never written) before */
	size_t len;   /* bytes used, not counting the terminating NUL */
	size_t cap;
};
extern char dlk_buf_empty[1];
#define DLK_BUF_INIT { dlk_buf_empty, 0, 0 }

/* All appends abort() on allocation failure: dlk treats OOM as fatal (like git's xmalloc). */
void dlk_buf_grow(struct dlk_buf *b, size_t extra);
void dlk_buf_add(struct dlk_buf *b, const void *data, size_t len);
void dlk_buf_adds(struct dlk_buf *b, const char *s);
void dlk_buf_addc(struct dlk_buf *b, char c);
void dlk_buf_addf(struct dlk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlk_buf_vaddf(struct dlk_buf *b, const char *fmt, va_list ap);
/* Appends data[0..len) in base64 (RFC 4648, with padding). */
void dlk_buf_add_base64(struct dlk_buf *b, const void *data, size_t len);
void dlk_buf_reset(struct dlk_buf *b);             /* len = 0, keeps memory */
/* Hands the contents to the caller (who frees them) and resets b; never NULL, even for an empty
 * buffer. */
char *dlk_buf_detach(struct dlk_buf *b, size_t *len);
/* Frees what b owns and leaves it as DLK_BUF_INIT. */
void dlk_buf_release(struct dlk_buf *b);

/* Reads a whole file into b (appending). Fails with a message naming the file when it cannot be
 * read or is larger than max_bytes (0 = no limit). Returns 0 or -1 with errno-based message in
 * errmsg (errmsg_len bytes). */
int dlk_buf_read_file(struct dlk_buf *b, const char *path, size_t max_bytes, char *errmsg, size_t errmsg_len);

#endif
