/* Inside lib/store: what a store is made of. Each kind (dir.c, s3.c, pvc.c) fills one ops table;
 * the front (store.c) is the only caller of these, and the dataset operations (dataset.c) go
 * through the front. */
#ifndef DLK_STORE_STORE_IMPL_H
#define DLK_STORE_STORE_IMPL_H

#include "lib/store/store.h"

struct dlk_store_ops {
	/* 1 present (size set), 0 absent, -1 error */
	int (*stat)(struct dlk_store *s, const char *key, unsigned long long *size, struct dlk_err *err);
	/* writes the object atomically: readers see the old one or the whole new one. Resumes an
	 * interrupted upload of the same key and content where the store can. The bytes sent are
	 * hashed as they are sent (or by the store as it receives them) and a put whose bytes are not
	 * src->size bytes hashing to src->sha256 leaves nothing under key (dlk_store_put_changed). */
	int (*put)(struct dlk_store *s, const char *key, const struct dlk_put_src *src, struct dlk_err *err);
	/* the object's bytes from offset on, in order, to sink; DLK_EXIT_NOTFOUND when absent */
	int (*get)(struct dlk_store *s, const char *key, unsigned long long offset, dlk_store_sink_fn sink,
	           void *sink_ctx, struct dlk_err *err);
	/* the names under prefix ("sha256/", "datasets/", "tags/"), without it, in no set order */
	int (*list)(struct dlk_store *s, const char *prefix, dlk_store_list_fn fn, void *ctx, struct dlk_err *err);
	/* a local file holding the object, when the store is a directory here; NULL otherwise
	 * (the caller frees) */
	char *(*local_path)(struct dlk_store *s, const char *key);
	/* 1 when key holds size bytes that hash to hex, 0 when absent or not (or not known to: a push
	 * then sends it again), -1 with err. NULL: the front fetches the object and hashes it. The
	 * directory store hashes its file, S3 reads the sha256 dlk stored with the object
	 * (x-amz-meta-dlk-sha256), the store pod hashes its file. */
	int (*verify)(struct dlk_store *s, const char *key, const char *hex, unsigned long long size, struct dlk_err *err);
	void (*close)(struct dlk_store *s);
};

struct dlk_store {
	const struct dlk_store_ops *ops;
	char *url;                     /* as given, for messages */
	struct dlk_store_opts opts;    /* a copy (its pointers borrowed) */
	void *impl;
};

/* The error of a put whose bytes, as they were sent, were not what src says (the file changed
 * after it was hashed; where names the object in the store): got is what they hashed to, n how
 * many there were. Returns -1. */
int dlk_store_put_changed(const char *where, const struct dlk_put_src *src, const char *got, unsigned long long n,
                          struct dlk_err *err);

/* The store kinds (each in its own file). */
struct dlk_store *dlk_store_open_dir(const char *url, const char *dir, const struct dlk_store_opts *opts,
                                     struct dlk_err *err);
struct dlk_store *dlk_store_open_s3(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err);
struct dlk_store *dlk_store_open_pvc(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err);

#endif
