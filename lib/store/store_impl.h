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
	 * interrupted upload of the same key and content where the store can. */
	int (*put)(struct dlk_store *s, const char *key, const struct dlk_put_src *src, struct dlk_err *err);
	/* the object's bytes from offset on, in order, to sink; DLK_EXIT_NOTFOUND when absent */
	int (*get)(struct dlk_store *s, const char *key, unsigned long long offset, dlk_store_sink_fn sink,
	           void *sink_ctx, struct dlk_err *err);
	/* the names under prefix ("sha256/", "datasets/", "tags/"), without it, in no set order */
	int (*list)(struct dlk_store *s, const char *prefix, dlk_store_list_fn fn, void *ctx, struct dlk_err *err);
	/* a local file holding the object, when the store is a directory here; NULL otherwise
	 * (the caller frees) */
	char *(*local_path)(struct dlk_store *s, const char *key);
	void (*close)(struct dlk_store *s);
};

struct dlk_store {
	const struct dlk_store_ops *ops;
	char *url;                     /* as given, for messages */
	struct dlk_store_opts opts;    /* a copy (its pointers borrowed) */
	void *impl;
};

/* The store kinds (each in its own file). */
struct dlk_store *dlk_store_open_dir(const char *url, const char *dir, const struct dlk_store_opts *opts,
                                     struct dlk_err *err);
struct dlk_store *dlk_store_open_s3(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err);
struct dlk_store *dlk_store_open_pvc(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err);

#endif
