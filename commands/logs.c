/* dlk logs: every rank's log in one stream, each line prefixed "[rank N]". Without -f the
 * lines of all ranks are fetched with their timestamps and merged in time order; with -f one
 * stream per pod runs in its own thread, and a new pod for a rank (a restart) gets a stream as
 * soon as it runs. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ui.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/jobwatch.h"
#include "lib/jobs/logfollow.h"
#include "lib/kube/api.h"
#include "lib/util/mem.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOGS_MAX_BYTES (256u << 20) /* what a merged non-follow read may hold in memory */

/* ---- one read, merged by time ---- */

struct logline {
	char *ts;    /* RFC 3339 with nanoseconds as the kubelet writes it, "" when absent */
	char *text;
	int rank;
	size_t seq;
};

struct collect {
	struct logline *v;
	size_t n, cap, bytes;
	int rank;
	int full;
};

static int collect_line(const char *line, size_t len, void *ud)
{
	struct collect *c = ud;
	const char *sp = memchr(line, ' ', len);
	struct logline l;

	if (c->bytes + len > LOGS_MAX_BYTES) {
		c->full = 1;
		return 1;
	}
	/* asked for with timestamps=true: "2026-01-01T00:00:00.123456789Z text" */
	if (sp && sp - line >= 20 && sp - line < 40 && line[4] == '-' && line[10] == 'T') {
		l.ts = xstrndup(line, (size_t)(sp - line));
		l.text = xstrndup(sp + 1, len - (size_t)(sp - line) - 1);
	} else {
		l.ts = xstrdup("");
		l.text = xstrndup(line, len);
	}
	l.rank = c->rank;
	l.seq = c->n;
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		c->v = xrealloc(c->v, c->cap * sizeof(*c->v));
	}
	c->v[c->n++] = l;
	c->bytes += len + 64;
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	const struct logline *x = a, *y = b;
	int c = strcmp(x->ts, y->ts);

	if (c)
		return c;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The pods that speak for each rank now (the newest), in rank order. */
static int current_pods(const cJSON *job, const cJSON *pods, struct dlk_job_summary *s)
{
	dlk_job_summarize(job, pods, NULL, s);
	return s->total;
}

static int logs_once(struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const cJSON *job, const cJSON *pods,
		     const struct dlk_log_opts *o, struct dlk_err *err)
{
	struct dlk_job_summary s;
	struct collect col = { 0 };
	struct dlk_err first = DLK_ERR_INIT;
	int rc = -1, shown = 0;

	current_pods(job, pods, &s);
	for (int i = 0; i < s.total; i++) {
		struct kube_log_opts ko = KUBE_LOG_OPTS_INIT;
		struct dlk_err perr = DLK_ERR_INIT;
		const char *pn = kube_meta(s.ranks[i].pod, "name");

		if (o->rank >= 0 && i != o->rank)
			continue;
		if (!pn) {
			dlk_info(ctx, "rank %d: no pod yet", i);
			continue;
		}
		if (!o->previous && !strcmp(s.ranks[i].phase, "Pending")) {
			dlk_info(ctx, "rank %d: pod '%s' has not started%s%s", i, pn, s.ranks[i].reason[0] ? ": " : "",
				 s.ranks[i].reason);
			continue;
		}
		ko.timestamps = 1; /* to merge; stripped again unless --timestamps */
		ko.tail_lines = o->tail;
		ko.since_seconds = o->since_s;
		ko.previous = o->previous;
		col.rank = i;
		if (kube_logs(c, ns, pn, &ko, collect_line, &col, &perr) < 0) {
			if (perr.code == DLK_EXIT_CONNECT || perr.code == DLK_EXIT_AUTH) {
				*err = perr;
				goto out;
			}
			if (!first.code) {
				first = perr;
				dlk_err_prefix(&first, "rank %d", i);
			}
			dlk_warn(ctx, "rank %d: %s", i, perr.msg);
			continue;
		}
		shown++;
		if (col.full) {
			dlk_warn(ctx, "stopping at %u MiB of logs; use --tail or --since", LOGS_MAX_BYTES >> 20);
			break;
		}
	}
	if (col.n)
		qsort(col.v, col.n, sizeof(*col.v), cmp_line);
	for (size_t i = 0; i < col.n; i++) {
		if (o->timestamps && col.v[i].ts[0]) {
			char *t = xasprintf("%s %s", col.v[i].ts, col.v[i].text);
			dlk_print_log_line(ctx, col.v[i].rank, t, strlen(t));
			free(t);
		} else {
			dlk_print_log_line(ctx, col.v[i].rank, col.v[i].text, strlen(col.v[i].text));
		}
	}
	if (!shown && first.code) {
		/* nothing could be read, and not for want of started pods: say why once more */
		*err = first;
		goto out;
	}
	rc = 0;
out:
	for (size_t i = 0; i < col.n; i++) {
		free(col.v[i].ts);
		free(col.v[i].text);
	}
	free(col.v);
	dlk_job_summary_release(&s);
	return rc;
}

/* -f: follow until the job has ended and every stream has drained, or Ctrl-C. */
static int logs_follow(struct dlk_ctx *ctx, const char *ns, const char *name, const struct dlk_log_opts *o,
		       struct dlk_err *err)
{
	struct dlk_jobwatch w;
	struct dlk_logfollow *lf = NULL;
	unsigned seen = 0;
	int rc = -1, ended = 0;

	if (dlk_watch_jobs(ctx, &w, ns, name, err) < 0)
		goto out;
	lf = dlk_logfollow_new(&w.open, ns, o, dlk_print_log_line, dlk_print_note, ctx);
	for (;;) {
		dlk_jobwatch_wait(&w, &seen, 0.5);
		if (dlk_interrupted()) {
			rc = DLK_EXIT_INTERRUPTED;
			goto out;
		}
		dlk_jobwatch_lock(&w);
		if (w.failed) {
			*err = w.err;
			dlk_jobwatch_unlock(&w);
			goto out;
		}
		if (w.synced_jobs && w.synced_pods) {
			const cJSON *job = cJSON_GetObjectItemCaseSensitive(w.jobs, name);
			cJSON *pods = dlk_jobwatch_pods_of(&w, name);
			if (!job) {
				ended = 1;
			} else {
				struct dlk_job_summary s;
				dlk_job_summarize(job, pods, NULL, &s);
				ended = s.state == JOB_SUCCEEDED || s.state == JOB_FAILED || s.state == JOB_TERMINATING;
				dlk_job_summary_release(&s);
			}
			dlk_logfollow_update(lf, pods);
			cJSON_Delete(pods);
		}
		dlk_jobwatch_unlock(&w);
		if (ended && !dlk_logfollow_active(lf))
			break;
	}
	rc = 0;
out:
	dlk_logfollow_free(lf, rc != 0);
	dlk_jobwatch_release(&w);
	return rc;
}

static struct {
	int follow, rank, tail, timestamps, previous;
	double since_s;
} opt;

static int run_logs(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	struct dlk_log_opts o = { opt.rank, opt.tail, (long)(opt.since_s + 0.999), opt.timestamps, opt.previous };
	cJSON *job = NULL, *pods = NULL;
	const char *name = args->pos[0], *ns;
	int rc = 0;

	c = dlk_kube_client(ctx, &err);
	if (!c)
		return dlk_report(ctx, &err);
	ns = kube_client_namespace(c);
	if (dlk_read_job(ctx, c, ns, name, &job, &err) < 0) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (o.rank >= 0) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "spec"), "completions");
		if (cJSON_IsNumber(n) && o.rank >= n->valueint) {
			dlk_errf(&err, DLK_EXIT_USAGE, "job '%s' has ranks 0 to %d, not %d", name, n->valueint - 1, o.rank);
			rc = dlk_report(ctx, &err);
			goto out;
		}
	}
	if (opt.follow) {
		/* the streams and watches have clients of their own */
		char *nsd = xstrdup(ns);
		dlk_kube_close(ctx, c);
		c = NULL;
		rc = logs_follow(ctx, nsd, name, &o, &err);
		free(nsd);
		if (rc == DLK_EXIT_INTERRUPTED)
			dlk_info(ctx, "stopped following; the job keeps running");
		else if (rc)
			rc = dlk_report(ctx, &err);
		goto out;
	}
	if (dlk_job_list_pods(c, ns, name, &pods, &err) < 0 ||
	    logs_once(ctx, c, ns, job, cJSON_GetObjectItemCaseSensitive(pods, "items"), &o, &err) < 0)
		rc = dlk_report(ctx, &err);
out:
	dlk_kube_close(ctx, c);
	cJSON_Delete(job);
	cJSON_Delete(pods);
	return rc;
}

static const struct dlk_option logs_options[] = {
	OPT_BOOL('f', "follow", &opt.follow, "keep streaming new lines until the job ends; picks up restarted pods", .excl = 1),
	OPT_INT(0, "rank", &opt.rank, "N", -1, "only this rank's log", .min = 0, .max = INT_MAX, .flags = OPT_HIDE_DEFAULT),
	OPT_DURATION(0, "since", &opt.since_s, "DURATION", "only lines newer than this, e.g. 10m, 1h"),
	OPT_INT(0, "tail", &opt.tail, "N", -1, "only the last N lines of each rank (-1: all)", .min = -1, .max = INT_MAX),
	OPT_BOOL(0, "timestamps", &opt.timestamps, "show the time the kubelet received each line"),
	OPT_BOOL('p', "previous", &opt.previous, "the log of each rank's previous container (before it restarted)", .excl = 1),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_logs = {
	.usage = "NAME",
	.description = "Print the logs of every worker of job NAME, merged in time order, each line prefixed\n"
	               "[rank N]. With -f keep following until the job ends, picking up restarted pods.",
	.options = logs_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_JOB,
	.run = run_logs,
	.examples = "  $ dlk logs mnist\n"
	            "  $ dlk logs -f mnist\n"
	            "  $ dlk logs --rank 0 --tail 20 mnist\n",
};
