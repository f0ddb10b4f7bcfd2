#include "lib/util/hash.h"
#include "lib/util/fsutil.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

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
	size_t n;
	FILE *f = dlk_fopen_regular(path, NULL, 0);

	if (!f)
		return -1;
	dlk_sha256_begin(&h);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		dlk_sha256_update(&h, chunk, n);
	if (ferror(f)) {
		int e = errno;
		fclose(f);
		dlk_sha256_end(&h, hex);
		errno = e;
		return -1;
	}
	fclose(f);
	dlk_sha256_end(&h, hex);
	return 0;
}

int dlk_sha256_is_hex(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return i == DLK_SHA256_HEX_LEN;
}
