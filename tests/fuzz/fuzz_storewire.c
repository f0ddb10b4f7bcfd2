/* libFuzzer target: the store pod's protocol (lib/store/wire.c, lib/store/serve.c): the JSON
 * answers the client reads (sizes, hashed stats, listings), the Range header and the keys the pod reads.
 * Corpus: tests/fuzz/storewire/. */
#include "lib/store/serve.h"
#include "lib/store/wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int count(void *ctx, const char *name, unsigned long long size)
{
	(void)size;
	if (strchr(name, '/'))
		abort(); /* a listing must never hand out a path */
	return ++*(int *)ctx > 100000;
}

/* two segments, neither empty, "." nor "..": a file in one of the store's folders */
static int key_is_inside(const char *k)
{
	const char *slash = strchr(k, '/');

	if (!slash || slash == k || !slash[1] || strchr(slash + 1, '/'))
		return 0;
	return strcmp(slash + 1, ".") && strcmp(slash + 1, "..") && strncmp(k, "./", 2) && strncmp(k, "../", 3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	unsigned long long n, from;
	char *s, hex[65];
	int k = 0;

	dlk_store_wire_size((const char *)data, size, &n);
	if (!dlk_store_wire_stat((const char *)data, size, &n, hex) && hex[0] &&
	    (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64))
		abort(); /* a digest handed out is 64 hex digits */
	dlk_store_wire_list((const char *)data, size, "fuzz", count, &k, &err);
	s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	if (!dlk_store_wire_range(s, 1000, &from) && from > 1000)
		abort();
	if (!dlk_store_key_check(s) && !key_is_inside(s))
		abort(); /* a key reaches nothing outside the store */
	free(s);
	return 0;
}
