/* UTF-8, decoded once for everyone who checks or rewrites text: well-formed sequences only
 * (no overlong forms, no surrogates, nothing beyond U+10FFFF). */
#ifndef DLK_UTIL_UTF8_H
#define DLK_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the sequence at s (n > 0 bytes left): returns its length with the code point in *cp,
 * or 0 when it is not well-formed or cut short. */
size_t dlk_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* 1 when s[0..len) is well-formed UTF-8 without a NUL byte. */
int dlk_utf8_valid(const char *s, size_t len);
/* The length of the longest prefix of s[0..len) that is at most max bytes and does not end
 * inside a multi-byte sequence (a cut that keeps text well-formed). */
size_t dlk_utf8_cut(const char *s, size_t len, size_t max);

/* Drops an incomplete multi-byte sequence at the end of s, where a fixed buffer cut it: the
 * rest of s is left as it is. */
void dlk_utf8_drop_cut(char *s);

struct dlk_buf;
/* Appends s[0..len) to b as text safe to show on a terminal, as git and kubectl show names
 * from outside: printable UTF-8 is kept, a control character (C0, DEL, C1), a bidirectional
 * override, a line or paragraph separator and any byte that is not well-formed UTF-8 become
 * visible escapes (\e, \r, \x1b, \u202e...); a backslash stays itself. keep_newlines keeps
 * '\n' and '\t' (a multi-line message), else they are escaped too. */
void dlk_buf_add_visible(struct dlk_buf *b, const char *s, size_t len, int keep_newlines);
/* s (NULL: "") made visible as above, newlines included, for one printf argument: the text
 * lives in a per-thread ring of 8 buffers, valid until the eighth later call on the thread. */
const char *dlk_visible(const char *s);

#endif
