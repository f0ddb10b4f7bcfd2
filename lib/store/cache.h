/* The node cache: objects fetched from a store, kept by sha256 on a volume of the node (an
 * emptyDir, a hostPath, the checkpoint volume: the job template chooses) or under .dlk/cache
 * here, so that a restarted or rescheduled worker does not download them again.
 *
 *	<dir>/sha256/<hex>        a verified object
 *	<dir>/sha256/<hex>.part   one being fetched (locked by the fetching process; continued by
 *	                          the next one when that process died)
 *
 * Several workers may share one cache directory: an object is fetched by one of them while the
 * others wait for it. The cache is bounded: dlk_cache_trim evicts the least recently used
 * objects (an object's mtime is when it was last used). */
#ifndef DLK_STORE_CACHE_H
#define DLK_STORE_CACHE_H

#include "lib/store/store.h"
#include "lib/util/err.h"

struct dlk_cache {
	char *dir;
	unsigned long long max_bytes;  /* 0 = unbounded */
};
#define DLK_CACHE_INIT { NULL, 0 }

/* Creates dir/sha256 when missing. */
int dlk_cache_open(const char *dir, unsigned long long max_bytes, struct dlk_cache *c, struct dlk_err *err);
void dlk_cache_release(struct dlk_cache *c);

/* "<dir>/sha256/<hex>"; caller frees. */
char *dlk_cache_object(const struct dlk_cache *c, const char *hex);

/* Makes sha256/<hex> (of `size` bytes) a verified file in the cache: a hit when it is there and
 * hashes right (it is then marked used now), else it is fetched from s and verified (a copy in
 * the cache that does not hash right is replaced). *path is the file (caller frees); *hit says
 * whether it came from the cache. */
int dlk_cache_fetch(struct dlk_cache *c, struct dlk_store *s, const char *hex, unsigned long long size,
                    dlk_store_progress_fn progress, void *progress_ctx, const char *what, char **path, int *hit,
                    struct dlk_err *err);

/* Evicts least recently used objects until the cache holds at most max_bytes, never one of
 * keep[] (the objects the current run uses). *kept_over is set when keep[] alone is larger than
 * the bound. Returns the bytes evicted in *freed. */
int dlk_cache_trim(struct dlk_cache *c, const char *const *keep, size_t n_keep, unsigned long long *freed,
                   int *kept_over, struct dlk_err *err);

/* Bytes and objects in the cache now. */
int dlk_cache_usage(const struct dlk_cache *c, unsigned long long *bytes, size_t *objects, struct dlk_err *err);

#endif
