/* Reading a dataset's provenance.json (see provenance.h). */
#include "lib/store/provenance.h"
#include "lib/util/buf.h"
#include "lib/util/hash.h"

#include <stdio.h>
#include <string.h>

int dlk_dataset_provenance(struct dlk_store *s, const struct dlk_manifest *m, cJSON **out, struct dlk_err *err)
{
	const struct dlk_manifest_entry *e = dlk_manifest_find(m, DLK_PROVENANCE_FILE);
	struct dlk_buf b = DLK_BUF_INIT;
	char key[80], hex[65];

	*out = NULL;
	if (!e)
		return 0;
	if (e->size > DLK_PROVENANCE_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "dataset sha256:%.12s: %s is %llu bytes, over the %u allowed", m->id,
		                DLK_PROVENANCE_FILE, e->size, DLK_PROVENANCE_MAX);
	snprintf(key, sizeof(key), "sha256/%s", e->sha256);
	if (dlk_store_get_mem(s, key, DLK_PROVENANCE_MAX, &b, err))
		return -1;
	dlk_sha256_hex(b.data, b.len, hex);
	if (strcmp(hex, e->sha256) || b.len != e->size) {
		dlk_buf_release(&b);
		return dlk_errf(err, DLK_EXIT_CONFIG, "dataset sha256:%.12s: %s in the store does not match its digest "
		                "(the object sha256:%.12s is corrupted)", m->id, DLK_PROVENANCE_FILE, e->sha256);
	}
	*out = cJSON_ParseWithLength(b.data, b.len);
	dlk_buf_release(&b);
	if (!cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return dlk_errf(err, DLK_EXIT_CONFIG, "dataset sha256:%.12s: %s is not a JSON object", m->id,
		                DLK_PROVENANCE_FILE);
	}
	return 0;
}
