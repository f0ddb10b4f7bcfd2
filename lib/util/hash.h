/* SHA-256 (OpenSSL libcrypto), streaming and one-shot, with lowercase hex output. */
#ifndef DLK_UTIL_HASH_H
#define DLK_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define DLK_SHA256_HEX_LEN 64

struct dlk_sha256 {
	void *ctx; /* EVP_MD_CTX, owned */
};
#define DLK_SHA256_INIT { NULL }

void dlk_sha256_begin(struct dlk_sha256 *h);
void dlk_sha256_update(struct dlk_sha256 *h, const void *data, size_t len);
/* Writes 65 bytes (64 hex digits + NUL) to hex and releases the context. */
void dlk_sha256_end(struct dlk_sha256 *h, char hex[DLK_SHA256_HEX_LEN + 1]);
void dlk_sha256_hex(const void *data, size_t len, char hex[DLK_SHA256_HEX_LEN + 1]);
/* Hashes a whole regular file (a FIFO or a device is refused, not waited on: EINVAL); returns 0,
 * or -1 with errno set. */
int dlk_sha256_file(const char *path, char hex[DLK_SHA256_HEX_LEN + 1]);
/* 1 when s is 64 hex digits (either case). */
int dlk_sha256_is_hex(const char *s);

#endif
