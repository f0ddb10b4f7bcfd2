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

#endif
