/* Datasets in a store: push, resolve, list, tag and get (lib/store/store.h has the layout).
 * Library code: errors come back in struct dlk_err, nothing is printed. */
#ifndef DLK_STORE_DATASET_H
#define DLK_STORE_DATASET_H

#include <stddef.h>

#include "lib/store/manifest.h"
#include "lib/store/store.h"
#include "lib/util/err.h"

struct dlk_push_stats {
	size_t files, uploaded;        /* objects in the manifest, objects sent */
	unsigned long long bytes, uploaded_bytes;
	unsigned long long resumed_bytes; /* of uploaded_bytes, what interrupted uploads had sent */
	int manifest_new;              /* the manifest was not in the store yet */
};

/* Uploads what the store lacks of m's files (m from dlk_manifest_build: entries have local
 * paths), then the manifest, then each tag (NAME@TAG or NAME, which means NAME@latest). */
int dlk_dataset_push(struct dlk_store *s, const struct dlk_manifest *m, const char *const *tags, size_t n_tags,
                     dlk_store_progress_fn progress, void *progress_ctx, struct dlk_push_stats *stats,
                     struct dlk_err *err);

/* Pushes files made in memory as one dataset: names[i] (a bare file name) holding data[i] (lens[i]
 * bytes), written to a new temporary directory (lib/util/fsutil.h dlk_mkdtemp) that is removed
 * again whatever happens, then pushed with tag (NULL: none). push 0: the dataset's id only,
 * nothing sent (a dry run). Its id in id. Errors are not prefixed: the caller names what it pushed. */
int dlk_dataset_push_mem(struct dlk_store *s, const char *const *names, const char *const *data, const size_t *lens,
                         int n, const char *tag, int push, dlk_store_progress_fn progress, void *progress_ctx,
                         char id[65], struct dlk_err *err);

/* Points tag (NAME@TAG, or NAME: NAME@latest) at the dataset id (64 hex), which the store
 * should hold. */
int dlk_dataset_tag(struct dlk_store *s, const char *tag, const char *id, struct dlk_err *err);
/* Resolves a reference (lib/store/manifest.h: sha256:ID, a unique id prefix when allow_prefix,
 * NAME@TAG, NAME) to an id. A tag or an id the store does not have is DLK_EXIT_NOTFOUND with the
 * store named. */
int dlk_dataset_resolve(struct dlk_store *s, const char *ref, int allow_prefix, char id[65], struct dlk_err *err);

/* Reads and verifies datasets/<id> (its bytes must hash to id). */
int dlk_dataset_manifest(struct dlk_store *s, const char *id, struct dlk_manifest *m, struct dlk_err *err);

/* Every dataset id in the store, sorted; and every tag with the id it points at. */
struct dlk_tag {
	char *name;                    /* NAME@TAG */
	char id[65];
};
int dlk_dataset_list(struct dlk_store *s, char ***ids, size_t *n, struct dlk_err *err);
int dlk_dataset_tags(struct dlk_store *s, struct dlk_tag **tags, size_t *n, struct dlk_err *err);
void dlk_tags_free(struct dlk_tag *tags, size_t n);

/* Writes every file of m into dir (created as needed) from the store, each verified; files
 * already in dir with the right sha256 are kept. With cache (lib/store/cache.h) objects come
 * from and go to it. */
struct dlk_cache;
struct dlk_get_stats {
	size_t files, fetched, kept, from_cache;
	unsigned long long bytes, fetched_bytes, cache_bytes;
};
int dlk_dataset_get(struct dlk_store *s, const struct dlk_manifest *m, const char *dir, struct dlk_cache *cache,
                    dlk_store_progress_fn progress, void *progress_ctx, struct dlk_get_stats *stats,
                    struct dlk_err *err);

#endif
