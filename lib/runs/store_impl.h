/* Inside lib/runs: what a store is made of. Each kind reads all its records at once and writes
 * one; listing, finding and bounding are common (store.c). */
#ifndef DLK_RUNS_STORE_IMPL_H
#define DLK_RUNS_STORE_IMPL_H

#include "lib/runs/runs.h"

struct dlk_run_store_ops {
	const char *kind; /* "local", "cluster" */
	/* Every record as it is stored: an array of new trees, unchecked; *dropped as stored. */
	int (*load)(struct dlk_run_store *s, cJSON **records, long *dropped, struct dlk_err *err);
	/* Writes rec and deletes the records named in drop (ids; may be empty), adding n_drop to the
	 * dropped count, as one change where the store allows it. */
	int (*save)(struct dlk_run_store *s, const cJSON *rec, const char *const *drop, size_t n_drop,
		    struct dlk_err *err);
	void (*close)(struct dlk_run_store *s);
};

struct dlk_run_store {
	const struct dlk_run_store_ops *ops;
	char *project;
	/* a directory */
	char *dir;
	/* a ConfigMap */
	struct kube_client *kc;
	char *ns, *cm;
};

/* Orders records newest first (started_at, then id, both descending). */
int dlk_runs_cmp_newest(const void *a, const void *b);

#endif
