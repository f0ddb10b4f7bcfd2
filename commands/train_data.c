/* train's side of data.dataset: a tag resolved to its id once, when a run starts, and a worker's
 * view of the dataset (the store's files through the node cache, or in place on a mounted
 * claim), with the line that says where the bytes came from. */
#include "commands/cluster.h"
#include "commands/train_data.h"
#include "commands/ui.h"
#include "lib/data/dataset.h"
#include "lib/data/fetch.h"
#include "lib/jobs/podenv.h"
#include "lib/project/project.h"
#include "lib/store/cache.h"
#include "lib/store/reader.h"
#include "lib/store/dataset.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Where a worker finds the claims its pod mounts (templates mount pvc:// claims there). */

struct dlk_train_data {
	struct dlk_data_store ds;
	struct dlk_store *store;       /* ds.store, or one opened here for a worker */
	int own_store;
	struct dlk_cache cache;
	int have_cache;
	struct dlk_dataset_reader r;
	char *base_dir;
};

int dlk_train_pin_dataset(const struct dlk_ctx *ctx, struct dlk_project *spec, int cluster, struct dlk_err *err)
{
	struct dlk_data_store ds;
	const char *store = spec->data.store;
	char id[65];
	int rc;

	if (cluster && (spec->data.dataset.tag || spec->data.dataset.id) && store && strncmp(store, "s3://", 5) &&
	    strncmp(store, "pvc://", 6)) {
		/* a directory of this machine: no worker of the cluster can read it */
		dlk_errf(err, DLK_EXIT_CONFIG, "data.store '%s' is a directory of this machine: the job's workers cannot read it",
		         store);
		return dlk_err_hint(err, "push the dataset to s3://BUCKET/PREFIX or pvc://CLAIM/PATH and name that store");
	}
	if (!spec->data.dataset.tag || spec->data.dataset.id)
		return 0;
	if (dlk_data_store_open(ctx, NULL, spec, &ds, err))
		return dlk_err_prefix(err, "cannot resolve data.dataset '%s'", spec->data.dataset.tag);
	rc = dlk_dataset_resolve(ds.store, spec->data.dataset.tag, 0, id, err);
	dlk_data_store_release(&ds);
	if (rc)
		return -1;
	spec->data.dataset.id = xasprintf("sha256:%s", id);
	if (ctx->verbose)
		dlk_info(ctx, "data.dataset %s is sha256:%s", spec->data.dataset.tag, id);
	return 0;
}

static long long env_bytes(const char *name, long long def)
{
	const char *v = getenv(name);
	char *end;
	long long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoll(v, &end, 10);
	return errno || *end || x < 0 ? def : x;
}

int dlk_train_data_open(const struct dlk_ctx *ctx, const struct dlk_project *spec, int worker, const char *project_dir,
                        struct dlk_data_opts *dopts, struct dlk_train_data **out, struct dlk_err *err)
{
	const struct dlk_data *d = &spec->data;
	struct dlk_train_data *td;
	char id[65];

	*out = NULL;
	if (!d->dataset.id && !d->dataset.tag)
		return 0;
	td = xcalloc(1, sizeof(*td));
	td->base_dir = xstrdup(project_dir);
	if (worker && d->store && !strncmp(d->store, "pvc://", 6)) {
		/* the pod mounts the claim: read it as a directory */
		struct dlk_store_opts o = { 0 };
		o.pvc_root = getenv(DLK_ENV_PVC_ROOT) && *getenv(DLK_ENV_PVC_ROOT) ? getenv(DLK_ENV_PVC_ROOT) : DLK_PVC_ROOT;
		td->store = dlk_store_open(d->store, &o, err);
		td->own_store = 1;
	} else if (!dlk_data_store_open(ctx, NULL, spec, &td->ds, err)) {
		td->store = td->ds.store;
	}
	if (!td->store)
		goto fail;
	if (d->dataset.id) {
		snprintf(id, sizeof(id), "%s", d->dataset.id + 7);
	} else {
		/* a run that was not submitted by dlk train (dlk train --worker by hand) */
		if (dlk_dataset_resolve(td->store, d->dataset.tag, 0, id, err))
			goto fail;
		dlk_warn(ctx, "data.dataset %s was resolved now, to sha256:%s: submit with 'dlk train' to resolve it once "
		              "for every worker", d->dataset.tag, id);
	}
	if (!dlk_store_is_local(td->store)) {
		/* fetched objects go to the node cache: the volume the template mounts in a pod, else
		 * data.cache_dir next to the project */
		const char *dir = getenv(DLK_ENV_DATA_CACHE);
		char *cdir = dir && *dir ? xstrdup(dir)
		             : d->cache_dir[0] == '/' || !strcmp(project_dir, ".") ? xstrdup(d->cache_dir)
		                                                                 : xasprintf("%s/%s", project_dir, d->cache_dir);
		int rc = dlk_cache_open(cdir, (unsigned long long)env_bytes(DLK_ENV_DATA_CACHE_MAX_BYTES, d->node_cache.max_bytes),
		                        &td->cache, err);
		free(cdir);
		if (rc)
			goto fail;
		td->have_cache = 1;
	}
	if (dlk_dataset_reader_open(&td->r, td->store, id, td->have_cache ? &td->cache : NULL, err))
		goto fail;
	td->r.progress = dopts->progress;
	td->r.progress_ctx = dopts->progress_ctx;
	dopts->resolve = dlk_dataset_reader_resolve;
	dopts->digest = dlk_dataset_reader_digest;
	dopts->list = dlk_dataset_reader_list;
	dopts->resolve_ctx = &td->r;
	*out = td;
	return 0;
fail:
	dlk_err_prefix(err, "data.dataset");
	dlk_train_data_free(td);
	return -1;
}

void dlk_train_data_done(const struct dlk_ctx *ctx, struct dlk_train_data *td, int rank)
{
	char total[32], a[32], b[32];
	const struct dlk_dataset_reader *r;

	if (!td)
		return;
	r = &td->r;
	dlk_fmt_bytes(total, sizeof(total), r->bytes);
	if (!td->have_cache) {
		if (rank == 0)
			dlk_info(ctx, "dataset sha256:%.12s: %zu file%s, %s, read in place from %s", r->id, r->files,
			         r->files == 1 ? "" : "s", total, dlk_store_url(td->store));
	} else {
		unsigned long long freed = 0;
		int over = 0;
		struct dlk_err e = DLK_ERR_INIT;
		dlk_fmt_bytes(a, sizeof(a), r->cache_bytes);
		dlk_fmt_bytes(b, sizeof(b), r->fetched_bytes);
		/* every rank says it: each may be on another node, with its own cache */
		dlk_info(ctx, "dataset sha256:%.12s: %zu file%s, %s: %s from the node cache, %s fetched from %s", r->id, r->files,
		         r->files == 1 ? "" : "s", total, a, b, dlk_store_url(td->store));
		if (dlk_cache_trim(&td->cache, (const char *const *)r->used, r->n_used, &freed, &over, &e))
			dlk_warn(ctx, "the data cache was not trimmed: %s", e.msg);
		else if (over)
			dlk_warn(ctx, "the data this run uses is more than the cache's bound (data.node_cache.max_bytes)");
		else if (freed && ctx->verbose) {
			dlk_fmt_bytes(a, sizeof(a), freed);
			dlk_info(ctx, "data cache: %s of least recently used objects evicted", a);
		}
	}
}

void dlk_train_data_free(struct dlk_train_data *td)
{
	if (!td)
		return;
	dlk_dataset_reader_release(&td->r);
	if (td->have_cache)
		dlk_cache_release(&td->cache);
	if (td->own_store)
		dlk_store_close(td->store);
	dlk_data_store_release(&td->ds);
	free(td->base_dir);
	free(td);
}

int dlk_train_program_data(const struct dlk_ctx *ctx, const struct dlk_project *spec, int worker,
                           const char *project_dir, char **dir, char **id, struct dlk_err *err)
{
	struct dlk_data_opts dopts;
	struct dlk_train_data *td = NULL;
	struct dlk_get_stats st;
	const char *cache = getenv(DLK_ENV_DATA_CACHE);
	char *d;
	int rc;

	*dir = NULL;
	*id = NULL;
	memset(&dopts, 0, sizeof(dopts));
	if (dlk_train_data_open(ctx, spec, worker, project_dir, &dopts, &td, err))
		return -1;
	if (!td)
		return 0;
	if (!worker) {
		/* absolute: the program runs in its code's directory, not where dlk was started */
		char *abs = realpath(project_dir, NULL);
		d = xasprintf("%s/.dlk/data/%s", abs ? abs : project_dir, td->r.id);
		free(abs);
	} else
		d = cache && *cache ? xasprintf("%s/datasets/%s", cache, td->r.id)
	                      : xasprintf("/tmp/dlk-data/%s", td->r.id);
	memset(&st, 0, sizeof(st));
	rc = dlk_dataset_get(td->store, &td->r.m, d, td->have_cache ? &td->cache : NULL, NULL, NULL, &st, err);
	if (rc) {
		dlk_err_prefix(err, "data.dataset sha256:%.12s", td->r.id);
		free(d);
	} else {
		char total[32];
		dlk_fmt_bytes(total, sizeof(total), st.bytes);
		dlk_info(ctx, "dataset sha256:%.12s: %zu file%s, %s, in %s (DLK_DATA_DIR)", td->r.id, st.files,
		         st.files == 1 ? "" : "s", total, dlk_visible(d));
		*dir = d;
		*id = xstrdup(td->r.id);
	}
	dlk_train_data_free(td);
	return rc;
}
