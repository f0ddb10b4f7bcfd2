/* libFuzzer target: dataset manifests (lib/store/manifest.c) and dataset references. Whatever
 * the parser accepts must format back to the same bytes (the text is canonical), and its id
 * must be the sha256 of those bytes. Corpus: tests/fuzz/manifest/. */
#include "lib/store/manifest.h"
#include "lib/util/hash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_dataset_ref ref;
	char why[160], *s;

	if (!dlk_manifest_parse((const char *)data, size, "fuzz", &m, &err)) {
		size_t len;
		char *text = dlk_manifest_format(&m, &len), hex[65];
		if (len != size || memcmp(text, data, size))
			abort(); /* accepted a form that is not canonical */
		dlk_sha256_hex(data, size, hex);
		if (strcmp(hex, m.id))
			abort();
		for (size_t i = 0; i < m.n; i++)
			if (dlk_manifest_find(&m, m.e[i].path) != &m.e[i])
				abort();
		free(text);
	}
	dlk_manifest_release(&m);
	/* the same bytes as a reference and as a path */
	s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	dlk_dataset_ref_parse(s, size & 1, &ref, why, sizeof(why));
	dlk_manifest_check_path(s, strlen(s), why, sizeof(why));
	free(s);
	return 0;
}
