/* dlk logs: every rank's log in one stream, each line prefixed "[rank N]". Without -f the
 * lines of all ranks are fetched with their timestamps and merged in time order; with -f one
 * stream per pod runs in its own thread, and a new pod for a rank (a restart) gets a stream as
 * soon as it runs. With --run ID the run's archived logs (lib/jobs/logarchive.h) are read from the
 * checkpoint volume instead, also after the job and its pods are gone. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ui.h"
#include "lib/jobs/cronjob.h"
#include "lib/jobs/logarchive.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/jobwatch.h"
#include "lib/jobs/logfollow.h"
#include "lib/jobs/logmerge.h"
#include "lib/jobs/servestate.h"
#include "lib/kube/api.h"
#include "lib/project/project.h"
#include "lib/store/store.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOGS_MAX_BYTES (256u << 20) /* what a merged non-follow read may hold in memory */

/* ---- one read, merged by time (lib/jobs/logmerge.h) ---- */

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
	struct dlk_log_merge col = { .max_bytes = LOGS_MAX_BYTES };
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
		if (kube_logs(c, ns, pn, &ko, dlk_log_merge_add, &col, &perr) < 0) {
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
	dlk_log_merge_sort(&col);
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
	dlk_log_merge_release(&col);
	dlk_job_summary_release(&s);
	return rc;
}

/* -f: follow until the job has ended and every stream has drained, or Ctrl-C. */
static int logs_follow(struct dlk_ctx *ctx, const char *ns, const char *name, const char *project,
		       const struct dlk_log_opts *o, struct dlk_err *err)
{
	struct dlk_jobwatch w;
	struct dlk_logfollow *lf = NULL;
	unsigned seen = 0;
	int rc = -1, ended = 0;

	if ((project ? dlk_watch_run(ctx, &w, ns, name, project, err) : dlk_watch_jobs(ctx, &w, ns, name, err)) < 0)
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

/* ---- a run's archived logs (lib/jobs/logarchive.h), after its pods are gone ---- */

struct archived {
	char **keys, **runs;
	int *ranks;
	size_t n, n_runs;
	const char *want;   /* the run id or its prefix */
	int rank;           /* -1: all */
};

static int collect_archive(void *ud, const char *name, unsigned long long size)
{
	struct archived *a = ud;
	char run[96], pod[96];
	int rank, seen = 0;

	(void)size;
	if (dlk_log_archive_parse_name(name, run, sizeof(run), &rank, pod, sizeof(pod)))
		return 0;
	for (size_t i = 0; i < a->n_runs; i++)
		seen |= !strcmp(a->runs[i], run);
	if (!seen) {
		a->runs = xrealloc(a->runs, (a->n_runs + 1) * sizeof(*a->runs));
		a->runs[a->n_runs++] = xstrdup(run);
	}
	if (strncmp(run, a->want, strlen(a->want)) || (a->rank >= 0 && rank != a->rank))
		return 0;
	a->keys = xrealloc(a->keys, (a->n + 1) * sizeof(*a->keys));
	a->ranks = xrealloc(a->ranks, (a->n + 1) * sizeof(*a->ranks));
	a->keys[a->n] = xasprintf("logs/%s", name);
	a->ranks[a->n++] = rank;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Where job name's workers archived their logs: --from, else the project's checkpoint volume. */
static char *archive_url(const struct dlk_ctx *ctx, const char *name, const char *from, struct dlk_project **spec,
                         struct dlk_err *err)
{
	const char *claim;

	if (from)
		return xstrdup(from);
	*spec = dlk_ctx_load_spec(ctx, err);
	if (!*spec) {
		dlk_err_hint(err, "the project file names the checkpoint volume the logs are archived on; or give --from STORE");
		return NULL;
	}
	claim = (*spec)->storage.claim;
	if (!claim && !(*spec)->storage.size) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s has no checkpoint volume (storage.claim or storage.size): the workers' "
		         "logs were not archived", ctx->file);
		return NULL;
	}
	if (!claim)
		return xasprintf("pvc://%s-checkpoints/%s/%s", (*spec)->name, DLK_LOG_ARCHIVE_DIR, name);
	return xasprintf("pvc://%s/%s/%s", claim, DLK_LOG_ARCHIVE_DIR, name);
}

static int logs_archived(struct dlk_ctx *ctx, const char *name, const char *run, const char *from,
                         const struct dlk_log_opts *o, struct dlk_err *err)
{
	struct dlk_project *spec = NULL;
	struct dlk_data_store ds = { 0 };
	struct archived a = { 0 };
	struct dlk_log_merge col = { .max_bytes = LOGS_MAX_BYTES };
	struct dlk_buf b = DLK_BUF_INIT;
	char *url = archive_url(ctx, name, from, &spec, err), cutoff[40] = "";
	int rc = -1, one_run = 1;

	a.want = run;
	a.rank = o->rank;
	if (!url || dlk_data_store_open(ctx, url, spec, &ds, err))
		goto out;
	if (dlk_store_list(ds.store, "logs/", collect_archive, &a, err))
		goto out;
	for (size_t i = 1; i < a.n; i++)
		one_run &= !strncmp(a.keys[i], a.keys[0], strlen("logs/") + strcspn(a.keys[0] + 5, "_"));
	if (!a.n) {
		struct dlk_buf runs = DLK_BUF_INIT;
		qsort(a.runs, a.n_runs, sizeof(*a.runs), cmp_str);
		for (size_t i = 0; i < a.n_runs && i < DLK_LOG_ARCHIVE_KEEP_RUNS; i++)
			dlk_buf_addf(&runs, "%s%s", i ? ", " : "", a.runs[i]);
		dlk_errf(err, DLK_EXIT_NOTFOUND, "%s: no archived log of run '%s'%s", url, run,
		         o->rank >= 0 ? " for that rank" : "");
		if (a.n_runs)
			dlk_err_hint(err, "the runs archived there: %s%s", runs.data, a.n_runs > DLK_LOG_ARCHIVE_KEEP_RUNS ? ", ..." : "");
		else
			dlk_err_hint(err, "a worker archives its log when its job has a checkpoint volume");
		dlk_buf_release(&runs);
		goto out;
	}
	if (!one_run) {
		dlk_errf(err, DLK_EXIT_USAGE, "'%s' is the start of more than one run's id: give more of it", run);
		goto out;
	}
	if (o->since_s > 0) {
		time_t t = time(NULL) - o->since_s;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(cutoff, sizeof(cutoff), "%Y-%m-%dT%H:%M:%S", &tm);
	}
	for (size_t i = 0; i < a.n; i++) {
		int truncated = 0;
		dlk_buf_release(&b);
		if (dlk_store_get_mem(ds.store, a.keys[i], DLK_LOG_ARCHIVE_READ_MAX, &b, err))
			goto out;
		col.rank = a.ranks[i];
		if (dlk_log_archive_read(b.data, b.len, dlk_log_merge_add, &col, &truncated, err)) {
			dlk_err_prefix(err, "%s", a.keys[i]);
			goto out;
		}
		if (truncated)
			dlk_info(ctx, "rank %d: %s ends mid-write (the worker was stopped)", a.ranks[i], a.keys[i] + 5);
		if (col.full) {
			dlk_warn(ctx, "stopping at %u MiB of logs; use --tail or --since", LOGS_MAX_BYTES >> 20);
			break;
		}
	}
	dlk_log_merge_sort(&col);
	{
		/* --tail counts each rank's last lines, over all of its attempts */
		int max_rank = 0;
		long *left;
		for (size_t i = 0; i < col.n; i++)
			if (col.v[i].rank > max_rank)
				max_rank = col.v[i].rank;
		left = xcalloc((size_t)max_rank + 1, sizeof(*left));
		for (int r = 0; r <= max_rank; r++)
			left[r] = o->tail;
		for (size_t i = col.n; i-- > 0;) {
			int keep = (o->tail < 0 || left[col.v[i].rank]-- > 0) && strcmp(col.v[i].ts, cutoff) >= 0;
			if (!keep)
				col.v[i].rank = -1 - col.v[i].rank; /* dropped */
		}
		free(left);
	}
	for (size_t i = 0; i < col.n; i++) {
		if (col.v[i].rank < 0)
			continue;
		if (o->timestamps && col.v[i].ts[0]) {
			char *t = xasprintf("%s %s", col.v[i].ts, col.v[i].text);
			dlk_print_log_line(ctx, col.v[i].rank, t, strlen(t));
			free(t);
		} else {
			dlk_print_log_line(ctx, col.v[i].rank, col.v[i].text, strlen(col.v[i].text));
		}
	}
	rc = 0;
out:
	dlk_log_merge_release(&col);
	for (size_t i = 0; i < a.n; i++)
		free(a.keys[i]);
	for (size_t i = 0; i < a.n_runs; i++)
		free(a.runs[i]);
	free(a.keys);
	free(a.ranks);
	free(a.runs);
	dlk_buf_release(&b);
	dlk_data_store_release(&ds);
	project_free(spec);
	free(url);
	return rc;
}

static struct {
	int follow, rank, tail, timestamps, previous, what;
	double since_s;
	const char *run, *from;
} opt;

enum { LOGS_ANY, LOGS_JOB, LOGS_SERVED };

/* ---- a served model ---- */

static int print_pod_line(const char *line, size_t len, void *ud)
{
	struct dlk_buf v = DLK_BUF_INIT;
	dlk_buf_add_visible(&v, line, len, 1);
	printf("[%s] %s\n", dlk_visible(ud), v.data);
	dlk_buf_release(&v);
	fflush(stdout);
	return 0;
}

/* The logs of a served model's pods (both tracks), each line tagged "[POD]": merged in time
 * order, or with -f one pod's stream (kubectl's rule for a Deployment: one of its pods). */
static int served_logs(struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const cJSON *pods,
                       const struct dlk_log_opts *o, struct dlk_err *err)
{
	struct dlk_log_merge col = { .max_bytes = LOGS_MAX_BYTES };
	const cJSON *p;
	const char **names = xcalloc((size_t)cJSON_GetArraySize(pods) + 1, sizeof(*names));
	int n = 0, rc = -1;

	if (opt.follow) {
		const char *pick = NULL;
		cJSON_ArrayForEach(p, pods) {
			const cJSON *ph = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "status"), "phase");
			if (!pick || (cJSON_IsString(ph) && !strcmp(ph->valuestring, "Running")))
				pick = kube_meta(p, "name");
		}
		struct kube_log_opts ko = KUBE_LOG_OPTS_INIT;
		ko.follow = 1;
		ko.timestamps = o->timestamps;
		ko.tail_lines = o->tail;
		ko.since_seconds = o->since_s;
		if (cJSON_GetArraySize(pods) > 1)
			dlk_info(ctx, "following pod '%s' of %d", pick, cJSON_GetArraySize(pods));
		dlk_interrupt_catch();
		rc = kube_logs(c, ns, pick, &ko, print_pod_line, (void *)pick, err);
		free(names);
		return rc;
	}
	cJSON_ArrayForEach(p, pods) {
		struct kube_log_opts ko = KUBE_LOG_OPTS_INIT;
		struct dlk_err perr = DLK_ERR_INIT;
		const char *pn = kube_meta(p, "name");
		if (!pn)
			continue;
		names[n] = pn;
		ko.timestamps = 1;
		ko.tail_lines = o->tail;
		ko.since_seconds = o->since_s;
		ko.previous = o->previous;
		col.rank = n++;
		if (kube_logs(c, ns, pn, &ko, dlk_log_merge_add, &col, &perr) < 0) {
			if (perr.code == DLK_EXIT_CONNECT || perr.code == DLK_EXIT_AUTH) {
				*err = perr;
				goto out;
			}
			dlk_warn(ctx, "pod '%s': %s", pn, perr.msg);
		}
		if (col.full)
			break;
	}
	dlk_log_merge_sort(&col);
	for (size_t i = 0; i < col.n; i++) {
		/* pods' lines: their control characters are shown, not obeyed */
		if (o->timestamps && col.v[i].ts[0])
			printf("[%s] %s %s\n", dlk_visible(names[col.v[i].rank]), dlk_visible(col.v[i].ts),
			       dlk_visible(col.v[i].text));
		else
			printf("[%s] %s\n", dlk_visible(names[col.v[i].rank]), dlk_visible(col.v[i].text));
	}
	rc = 0;
out:
	dlk_log_merge_release(&col);
	free(names);
	return rc;
}

/* The run of the scheduled project name (a CronJob) whose logs to show: the newest that has not
 * ended, else the newest (into *job, the caller's), said on stderr. 1 when picked, 0 when there is
 * no CronJob of that name, -1 with err (also when it has no run yet). */
static int pick_run(struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, cJSON **job,
                    struct dlk_err *err)
{
	cJSON *cj = NULL, *jobs = NULL, *runs = NULL;
	const cJSON *r, *pick = NULL;
	int rc = -1, live = 0;

	if (dlk_read_cronjob(c, ns, name, &cj, &jobs, &runs, err) < 0) {
		/* not allowed to read CronJobs: then the name is no scheduled project of theirs */
		if (err->code != DLK_EXIT_NOTFOUND && err->code != DLK_EXIT_AUTH)
			return -1;
		dlk_err_clear(err);
		return 0;
	}
	cJSON_ArrayForEach(r, runs) {
		struct dlk_job_summary s;
		dlk_job_summarize_job(r, &s);
		if (s.state != JOB_SUCCEEDED && s.state != JOB_FAILED && !pick)
			pick = r, live = 1;
		dlk_job_summary_release(&s);
	}
	if (!pick)
		pick = cJSON_GetArrayItem(runs, 0);
	if (!pick) {
		const cJSON *sch = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cj, "spec"), "schedule");
		dlk_errf(err, DLK_EXIT_NOTFOUND, "scheduled training '%s' has not started a run yet (schedule '%s')", name,
		         cJSON_IsString(sch) ? sch->valuestring : "?");
		dlk_err_hint(err, "'kubectl create job --from=cronjob/%s NAME' starts one now", name);
		goto out;
	}
	dlk_info(ctx, "run '%s' of scheduled training '%s' (%s)", kube_meta(pick, "name"), name,
	         live ? "the newest that has not ended" : opt.follow ? "the latest; it has ended, and -f does not wait for the next" :
	         "the latest; it has ended");
	*job = cJSON_Duplicate(pick, 1);
	rc = 1;
out:
	cJSON_Delete(cj);
	cJSON_Delete(jobs);
	cJSON_Delete(runs);
	return rc;
}

static int run_logs(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	struct dlk_log_opts o = { opt.rank, opt.tail, (long)(opt.since_s + 0.999), opt.timestamps, opt.previous };
	cJSON *job = NULL, *pods = NULL;
	const char *name = args->pos[0], *ns, *project = NULL;
	int rc = 0;

	if (opt.run) {
		if (opt.follow || opt.previous) {
			dlk_errf(&err, DLK_EXIT_USAGE, "--run reads a run's archived logs: it does not go with %s",
			         opt.follow ? "--follow" : "--previous");
			return dlk_report(ctx, &err);
		}
		return logs_archived(ctx, name, opt.run, opt.from, &o, &err) ? dlk_report(ctx, &err) : 0;
	}
	if (opt.from) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--from names where archived logs are: it goes with --run ID");
		return dlk_report(ctx, &err);
	}
	c = dlk_kube_client(ctx, &err);
	if (!c)
		return dlk_report(ctx, &err);
	ns = kube_client_namespace(c);
	if (opt.what != LOGS_SERVED && dlk_read_job(ctx, c, ns, name, &job, &err) < 0 && err.code == DLK_EXIT_NOTFOUND) {
		/* a scheduled project: the logs of one of its runs */
		struct dlk_err cerr = DLK_ERR_INIT;
		int r = pick_run(ctx, c, ns, name, &job, &cerr);
		if (r < 0) {
			rc = dlk_report(ctx, &cerr);
			goto out;
		}
		if (r > 0) {
			dlk_err_clear(&err);
			project = name;
			name = kube_meta(job, "name");
		}
	}
	if (opt.what == LOGS_SERVED || !job) {
		/* no job of that name: a served model's pods? */
		if (opt.what == LOGS_SERVED)
			dlk_errf(&err, DLK_EXIT_NOTFOUND, "no model is served as '%s' in namespace '%s'", name, ns);
		struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
		char *sel = dlk_serve_selector(name, NULL);
		struct dlk_err lerr = DLK_ERR_INIT;
		lo.label_selector = sel;
		if (err.code == DLK_EXIT_NOTFOUND && opt.what != LOGS_JOB && kube_list(c, "Pod", ns, &lo, &pods, &lerr) == 0 &&
		    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pods, "items")) > 0) {
			free(sel);
			if (o.rank >= 0) {
				dlk_errf(&err, DLK_EXIT_USAGE, "'%s' is a served model: its pods have no ranks", name);
				rc = dlk_report(ctx, &err);
				goto out;
			}
			if (served_logs(ctx, c, ns, cJSON_GetObjectItemCaseSensitive(pods, "items"), &o, &err) < 0)
				rc = dlk_report(ctx, &err);
			goto out;
		}
		free(sel);
		if (err.code == DLK_EXIT_NOTFOUND)
			dlk_err_hint(&err, "list the jobs and served models with 'dlk status%s'; a run's archived logs outlive "
			             "its job: 'dlk logs %s --run ID' (the run id 'dlk lineage' shows)", dlk_ns_flag(ctx, c, ns), name);
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
		rc = logs_follow(ctx, nsd, name, project, &o, &err);
		free(nsd);
		if (rc == DLK_EXIT_INTERRUPTED)
			dlk_info(ctx, "stopped following; the job keeps running");
		else if (rc)
			rc = dlk_report(ctx, &err);
		goto out;
	}
	if (dlk_job_list_pods(c, ns, project ? project : name, &pods, &err) < 0 ||
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
	OPT_MODE("job", &opt.what, LOGS_JOB, "the training job NAME's workers (the default when that job exists)"),
	OPT_MODE("served", &opt.what, LOGS_SERVED, "the pods of the model served as NAME (dlk serve)"),
	OPT_STRING(0, "run", &opt.run, "ID", NULL, "the archived logs of run ID (or the start of it), also after its pods are gone"),
	OPT_STRING(0, "from", &opt.from, "STORE", NULL, "with --run: where the logs are archived [default: the project's checkpoint volume]"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_logs = {
	.usage = "NAME",
	.description = "Print the logs of every worker of job NAME, merged in time order, each line prefixed\n"
	               "[rank N]. With -f keep following until the job ends, picking up restarted pods.\n"
	               "For a scheduled project (a CronJob), those of its newest run that has not ended, else\n"
	               "of its latest run (-f does not wait for the next run).\n"
	               "For a served model NAME (dlk serve), the logs of its pods, each line prefixed [POD];\n"
	               "with -f, one of its pods.\n"
	               "With --run ID, the logs its workers archived on the checkpoint volume (every attempt of\n"
	               "each rank), readable after Kubernetes has removed the pods.",
	.options = logs_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_JOB,
	.run = run_logs,
	.examples = "  $ dlk logs mnist\n"
	            "  $ dlk logs -f mnist\n"
	            "  $ dlk logs --rank 0 --tail 20 mnist\n"
	            "  $ dlk logs --served fashion\n"
	            "  $ dlk logs mnist --run 5f0c2a\n",
};
