/* A stage's log after its pods are gone: what its worker archived (lib/jobs/logarchive) on the
 * pipeline's log_claim, read with the archive's own parser and merged as `dlk logs` merges. */
#include "lib/pipeline/cluster.h"
#include "lib/jobs/logarchive.h"
#include "lib/jobs/logmerge.h"
#include "lib/store/store.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct afile {
	char *name;   /* under logs/ */
	char run[96];
	int rank;
};

struct listing {
	struct afile *v;
	size_t n;
};

static int list_one(void *ud, const char *name, unsigned long long size)
{
	struct listing *l = ud;
	char run[96], pod[96];
	int rank;

	(void)size;
	if (dlk_log_archive_parse_name(name, run, sizeof(run), &rank, pod, sizeof(pod)))
		return 0; /* not an archive */
	l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	l->v[l->n].name = xstrdup(name);
	memcpy(l->v[l->n].run, run, sizeof(run));
	l->v[l->n++].rank = rank;
	return 0;
}

int dlk_pipeline_archived_log(struct dlk_store *s, int (*fn)(const char *line, size_t len, void *ud), void *ud,
                              char run[96], struct dlk_err *err)
{
	struct listing l = { 0 };
	struct dlk_log_merge *per = NULL, all = { 0 };
	struct dlk_buf b = DLK_BUF_INIT;
	const char *newest_run = NULL, *newest_ts = "";
	int rc = -1;

	if (dlk_store_list(s, "logs/", list_one, &l, err))
		goto out;
	if (!l.n) {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "%s holds no archived log", dlk_store_url(s));
		goto out;
	}
	/* every file's lines; the run whose last line is the latest is the newest */
	per = xcalloc(l.n, sizeof(*per));
	for (size_t i = 0; i < l.n; i++) {
		char *key = xasprintf("logs/%s", l.v[i].name);
		int truncated = 0;
		dlk_buf_release(&b);
		per[i].rank = l.v[i].rank;
		if (dlk_store_get_mem(s, key, DLK_LOG_ARCHIVE_READ_MAX, &b, err) ||
		    dlk_log_archive_read(b.data, b.len, dlk_log_merge_add, &per[i], &truncated, err)) {
			dlk_err_prefix(err, "%s", key);
			free(key);
			goto out;
		}
		free(key);
		for (size_t k = 0; k < per[i].n; k++)
			if (strcmp(per[i].v[k].ts, newest_ts) > 0 || !newest_run) {
				newest_ts = per[i].v[k].ts;
				newest_run = l.v[i].run;
			}
	}
	if (!newest_run) {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "the archived logs in %s are empty", dlk_store_url(s));
		goto out;
	}
	snprintf(run, 96, "%s", newest_run);
	for (size_t i = 0; i < l.n; i++) {
		if (strcmp(l.v[i].run, run))
			continue;
		for (size_t k = 0; k < per[i].n; k++) {
			if (all.n == all.cap) {
				all.cap = all.cap ? 2 * all.cap : 256;
				all.v = xrealloc(all.v, all.cap * sizeof(*all.v));
			}
			all.v[all.n++] = per[i].v[k]; /* borrowed: per[] frees them */
		}
	}
	dlk_log_merge_sort(&all);
	for (size_t k = 0; k < all.n; k++)
		if (fn(all.v[k].text, strlen(all.v[k].text), ud))
			break;
	rc = 0;
out:
	for (size_t i = 0; per && i < l.n; i++)
		dlk_log_merge_release(&per[i]);
	free(per);
	free(all.v); /* its lines were per[]'s */
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].name);
	free(l.v);
	dlk_buf_release(&b);
	return rc;
}
