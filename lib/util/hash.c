#include "lib/util/hash.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <unistd.h>

#include "lib/util/fsutil.h"

void dlk_sha256_begin(struct dlk_sha256 *h)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		fprintf(stderr, "fatal: cannot initialise sha256\n");
		abort();
	}
	h->ctx = ctx;
}

void dlk_sha256_update(struct dlk_sha256 *h, const void *data, size_t len)
{
	EVP_DigestUpdate(h->ctx, data, len);
}

void dlk_sha256_end(struct dlk_sha256 *h, char hex[DLK_SHA256_HEX_LEN + 1])
{
	unsigned char md[32];
	unsigned int n = 0;

	EVP_DigestFinal_ex(h->ctx, md, &n);
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

void dlk_sha256_hex(const void *data, size_t len, char hex[DLK_SHA256_HEX_LEN + 1])
{
	struct dlk_sha256 h = DLK_SHA256_INIT;

	dlk_sha256_begin(&h);
	dlk_sha256_update(&h, data, len);
	dlk_sha256_end(&h, hex);
}

int dlk_sha256_file(const char *path, char hex[DLK_SHA256_HEX_LEN + 1])
{
	struct dlk_sha256 h = DLK_SHA256_INIT;
	unsigned char chunk[1 << 16];
	ssize_t n;
	/* a FIFO put where a file was would block the hash forever: regular files only */
	int fd = dlk_open_regular(path, 0), e;

	if (fd < 0)
		return -1;
	dlk_sha256_begin(&h);
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		dlk_sha256_update(&h, chunk, (size_t)n);
	}
	e = errno;
	close(fd);
	dlk_sha256_end(&h, hex);
	errno = e;
	return n < 0 ? -1 : 0;
}

int dlk_sha256_is_hex(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return i == DLK_SHA256_HEX_LEN;
}
