/* A stage's log after its pods are gone: what its worker archived (lib/jobs/logarchive) on the
 * pipeline's log_claim, read with the archive's own parser. */
#include "lib/pipeline/cluster.h"
#include "lib/jobs/logarchive.h"
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

struct line {
	char *ts, *text;
	int rank;
	size_t seq;
};

struct listing {
	struct afile *v;
	size_t n;
};

struct lines {
	struct line *v;
	size_t n, cap;
	int rank;
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

/* "2026-01-01T00:00:00.123456789Z text": the time and the text */
static int add_line(const char *s, size_t len, void *ud)
{
	struct lines *c = ud;
	const char *sp = memchr(s, ' ', len);
	struct line l;

	if (sp && sp - s >= 20 && sp - s < 40 && s[4] == '-' && s[10] == 'T') {
		l.ts = xstrndup(s, (size_t)(sp - s));
		l.text = xstrndup(sp + 1, len - (size_t)(sp - s) - 1);
	} else {
		l.ts = xstrdup("");
		l.text = xstrndup(s, len);
	}
	l.rank = c->rank;
	l.seq = c->n;
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		c->v = xrealloc(c->v, c->cap * sizeof(*c->v));
	}
	c->v[c->n++] = l;
	return 0;
}

static int by_time(const void *a, const void *b)
{
	const struct line *x = a, *y = b;
	int c = strcmp(x->ts, y->ts);

	if (c)
		return c;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int dlk_pipeline_archived_log(struct dlk_store *s, int (*fn)(const char *line, size_t len, void *ud), void *ud,
                              char run[96], struct dlk_err *err)
{
	struct listing l = { 0 };
	struct lines *per = NULL, all = { 0 };
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
		    dlk_log_archive_read(b.data, b.len, add_line, &per[i], &truncated, err)) {
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
	if (all.n)
		qsort(all.v, all.n, sizeof(*all.v), by_time);
	for (size_t k = 0; k < all.n; k++)
		if (fn(all.v[k].text, strlen(all.v[k].text), ud))
			break;
	rc = 0;
out:
	for (size_t i = 0; per && i < l.n; i++) {
		for (size_t k = 0; k < per[i].n; k++) {
			free(per[i].v[k].ts);
			free(per[i].v[k].text);
		}
		free(per[i].v);
	}
	free(per);
	free(all.v);
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].name);
	free(l.v);
	dlk_buf_release(&b);
	return rc;
}
