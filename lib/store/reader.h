/* Reading a dataset's files for training: each path the project's sources name becomes a local,
 * verified file, straight from a directory store (a mounted volume is read in place) or through
 * the node cache, and the reader counts where the bytes came from. */
#ifndef DLK_STORE_READER_H
#define DLK_STORE_READER_H

#include "lib/store/cache.h"
#include "lib/store/manifest.h"
#include "lib/store/dataset.h"

struct dlk_dataset_reader {
	struct dlk_store *store;       /* borrowed */
	struct dlk_cache *cache;       /* borrowed; NULL: objects are read in place (a directory store) */
	struct dlk_manifest m;
	char id[65];
	dlk_store_progress_fn progress;
	void *progress_ctx;
	/* what the resolved files came to */
	size_t files, from_cache, fetched, in_place;
	unsigned long long bytes, cache_bytes, fetched_bytes, in_place_bytes;
	char **used;                   /* the sha256 of each file resolved (for dlk_cache_trim) */
	size_t n_used;
};

/* Reads and verifies the manifest of id. */
int dlk_dataset_reader_open(struct dlk_dataset_reader *r, struct dlk_store *s, const char *id, struct dlk_cache *cache,
                            struct dlk_err *err);
void dlk_dataset_reader_release(struct dlk_dataset_reader *r);

/* The struct dlk_data_opts resolve hook (ctx is the reader): path inside the dataset -> a local
 * file and the sha256 the manifest lists for it. A path the dataset does not have is
 * DLK_EXIT_CONFIG, listing a few it has. */
int dlk_dataset_reader_resolve(void *ctx, const char *path, char **local, char sha256[65], struct dlk_err *err);
/* The struct dlk_data_opts digest hook: the sha256 the (verified) manifest lists for path, without
 * fetching the file. Errors as dlk_dataset_reader_resolve(). */
int dlk_dataset_reader_digest(void *ctx, const char *path, char sha256[65], struct dlk_err *err);
/* The struct dlk_data_opts list hook: the manifest's paths below folder dir ("." for all of
 * them), nothing fetched. */
int dlk_dataset_reader_list(void *ctx, const char *dir, char ***paths, size_t *n, struct dlk_err *err);

#endif
