/* dlk status: the dlk jobs of a namespace as a table, or one job in detail (per-rank pods,
 * why it is pending, progress published by the workers). -w keeps the picture current from
 * watches of the Jobs and their pods. The state itself is decided in lib/jobs/jobstate.c. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/status_history.h"
#include "commands/sweep_show.h"
#include "commands/ui.h"
#include "lib/jobs/cronjob.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/jobwatch.h"
#include "lib/jobs/servestate.h"
#include "lib/kube/api.h"
#include "lib/train/progress.h"
#include "lib/util/duration.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const cJSON *jget2(const cJSON *o, const char *a, const char *b)
{
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
}

static const char *meta_name(const cJSON *o)
{
	const char *n = kube_meta(o, "name");
	return n ? n : "";
}

static int list_kind(struct kube_client *c, const char *kind, const char *ns, int all_ns, const char *selector,
		     cJSON **out, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;

	lo.label_selector = selector;
	lo.limit = 500;
	lo.all_namespaces = all_ns;
	return kube_list(c, kind, ns, &lo, out, err);
}

/* ---- the table ---- */

static void cell_num(const cJSON *p, const char *k, const char *fmt, char *out, size_t n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, k);
	if (cJSON_IsNumber(v))
		snprintf(out, n, fmt, v->valuedouble);
	else
		snprintf(out, n, "-");
}

/* A row of the table: the job's, or with as (a CronJob's name) a scheduled project's, its latest
 * run's state (state, when not NULL: "Scheduled" before any run) */
static void summary_row(const struct dlk_job_summary *s, const char *as, const char *state, int all_ns, int wide,
			struct dlk_table_row *r, int *ncols)
{
	int c = 0;

	if (all_ns)
		snprintf(r->c[c++], DLK_TABLE_CELL, "%s", s->ns);
	snprintf(r->c[c++], DLK_TABLE_CELL, "%.150s", as ? as : s->name);
	snprintf(r->c[c++], DLK_TABLE_CELL, "%s", state ? state : dlk_job_state_name(s->state));
	snprintf(r->c[c++], DLK_TABLE_CELL, "%d/%d", s->ready, s->total);
	snprintf(r->c[c++], DLK_TABLE_CELL, "%d", s->gpus);
	dlk_job_progress_text(s, r->c[c], DLK_TABLE_CELL);
	if (!r->c[c][0])
		snprintf(r->c[c], DLK_TABLE_CELL, "-");
	c++;
	if (s->age_s >= 0)
		dlk_duration_text(s->age_s, r->c[c++], DLK_TABLE_CELL);
	else
		snprintf(r->c[c++], DLK_TABLE_CELL, "-");
	if (wide) {
		const cJSON *tm = cJSON_GetObjectItemCaseSensitive(s->progress, DLK_PROGRESS_TEST_METRIC);
		if (cJSON_IsString(tm)) /* another task's headline metric, by name */
			snprintf(r->c[c++], DLK_TABLE_CELL, "%.60s", dlk_visible(tm->valuestring));
		else
			cell_num(s->progress, DLK_PROGRESS_ACCURACY, "%.4f", r->c[c++], DLK_TABLE_CELL);
		cell_num(s->progress, DLK_PROGRESS_SAMPLES_PER_SEC, "%.0f", r->c[c++], DLK_TABLE_CELL);
		snprintf(r->c[c++], DLK_TABLE_CELL, "%.150s", s->reason[0] ? s->reason : "-");
	}
	*ncols = c;
}

static void header_row(int all_ns, int wide, struct dlk_table_row *r)
{
	static const char *const h[] = { "NAME", "STATE", "WORKERS", "GPUS", "PROGRESS", "AGE", "ACCURACY", "SAMPLES/S", "REASON" };
	int c = 0;

	if (all_ns)
		snprintf(r->c[c++], DLK_TABLE_CELL, "NAMESPACE");
	for (int i = 0; i < (wide ? 9 : 6); i++)
		snprintf(r->c[c++], DLK_TABLE_CELL, "%s", h[i]);
}

static int emit_structured(const struct dlk_ctx *ctx, cJSON *v, struct dlk_buf *b, struct dlk_err *err)
{
	char *s = dlk_doc_text(v, ctx->output == DLK_OUTPUT_JSON, err);

	if (!s)
		return -1;
	dlk_buf_adds(b, s);
	free(s);
	return 0;
}

/* How a CronJob shows in the list: its latest run's state, or this before its first run. */
static const char *cron_idle_state(const cJSON *cronjob)
{
	return cJSON_IsTrue(jget2(cronjob, "spec", "suspend")) ? "Suspended" : "Scheduled";
}

/* A Job that stands for a CronJob that has no run yet: its job template, with the CronJob's
 * name, namespace and age (so that the row has its workers and GPUs). The caller owns it. */
static cJSON *cron_as_job(const cJSON *cronjob)
{
	cJSON *j = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(j, "metadata");
	const char *ns = kube_meta(cronjob, "namespace"), *ts = kube_meta(cronjob, "creationTimestamp");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(jget2(cronjob, "spec", "jobTemplate"), "spec");

	cJSON_AddStringToObject(m, "name", meta_name(cronjob));
	if (ns)
		cJSON_AddStringToObject(m, "namespace", ns);
	if (ts)
		cJSON_AddStringToObject(m, "creationTimestamp", ts);
	if (spec)
		cJSON_AddItemToObject(j, "spec", cJSON_Duplicate(spec, 1));
	return j;
}

/* A row of the list: a Job, or a CronJob (as) shown by its newest run j, or before its first
 * run (idle: its state) by a stand-in made from its job template. */
struct entry {
	const cJSON *j, *as;
	const char *idle;
};

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	const char *nx = kube_meta(x->j, "namespace"), *ny = kube_meta(y->j, "namespace");
	int c = strcmp(nx ? nx : "", ny ? ny : "");

	if (!c)
		c = strcmp(meta_name(x->as ? x->as : x->j), meta_name(y->as ? y->as : y->j));
	return c ? c : strcmp(meta_name(x->j), meta_name(y->j));
}

/* Renders the list of jobs (jobs: an array or an object of Jobs) into b. With pods (an array:
 * a watch keeps them), each job is summarized from its pods. Without, from the Job alone, so
 * that listing a thousand jobs reads a thousand objects, not every pod of every job: then, with
 * a client, the pods and events of a few jobs that are pending or failed are read to say why.
 * With crons (an array of CronJobs), a scheduled project is one row, its CronJob's name with its
 * latest run's state (its other runs are not listed), or "Scheduled" before its first run. */
static int render_list(const struct dlk_ctx *ctx, struct kube_client *c, const cJSON *jobs, const cJSON *crons,
		       const cJSON *pods, int all_ns, const cJSON *served, struct dlk_buf *b, struct dlk_err *err)
{
	int structured = ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML;
	int wide = ctx->output == DLK_OUTPUT_WIDE, nrows = 0, ncols = 0, explained = 0;
	int n = cJSON_GetArraySize(jobs) + cJSON_GetArraySize(crons);
	struct dlk_table_row *rows = xcalloc((size_t)n + 1, sizeof(*rows));
	cJSON *items = cJSON_CreateArray();
	const cJSON *j, *cj;
	int rc = 0;

	/* each CronJob: its newest run stands for it under the CronJob's name, the older ones are
	 * left out; a CronJob with no run yet gets a row of its own */
	struct entry *e = xcalloc((size_t)n + 1, sizeof(*e));
	const cJSON **hidden = xcalloc((size_t)n + 1, sizeof(*hidden));
	cJSON *standins = cJSON_CreateArray();
	int nh = 0, ne = 0;
	cJSON_ArrayForEach(j, jobs)
		e[ne++].j = j;
	cJSON_ArrayForEach(cj, crons) {
		cJSON *runs = dlk_cron_runs(jobs, cj);
		const cJSON *r;
		int first = 1;
		/* a reference shares its object's members: they tell which Job it is */
		cJSON_ArrayForEach(r, runs) {
			if (!first)
				hidden[nh++] = r->child;
			else
				for (int i = 0; i < ne; i++)
					if (r->child && e[i].j->child == r->child)
						e[i].as = cj;
			first = 0;
		}
		if (first) {
			cJSON *sj = cron_as_job(cj);
			cJSON_AddItemToArray(standins, sj);
			e[ne].j = sj;
			e[ne].as = cj;
			e[ne++].idle = cron_idle_state(cj);
		}
		cJSON_Delete(runs);
	}
	/* by namespace and the name shown, whatever order the jobs came in (a watch keeps them as
	 * they change) */
	qsort(e, (size_t)ne, sizeof(*e), cmp_entry);
	header_row(all_ns, wide, &rows[nrows++]);
	for (int k = 0; k < ne; k++) {
		const char *cron, *idle = e[k].idle, *pods_of;
		const cJSON *as = e[k].as;
		int skip = 0;
		j = e[k].j;
		for (int h = 0; h < nh; h++)
			skip |= hidden[h] && hidden[h] == j->child;
		if (skip)
			continue;
		cron = dlk_job_cronjob(j);
		/* a CronJob's run's pods carry the CronJob's name (and the run's in job-name) */
		pods_of = cron ? cron : meta_name(j);
		cJSON *mine = pods ? dlk_job_pods(pods, kube_meta(j, "namespace"), meta_name(j)) : NULL;
		cJSON *mine_list = NULL;
		struct dlk_job_summary s;
		cJSON *ev = NULL;
		if (mine)
			dlk_job_summarize(j, mine, NULL, &s);
		else
			dlk_job_summarize_job(j, &s);
		if (c && explained < 10 && !idle &&
		    (s.state == JOB_PENDING || s.state == JOB_SUSPENDED || (!mine && s.state == JOB_FAILED))) {
			const char *jobns = s.ns[0] ? s.ns : kube_client_namespace(c);
			struct dlk_err perr = DLK_ERR_INIT;
			if (!mine) {
				/* a job worth explaining: read its own pods (the list read none) */
				if (!idle && dlk_job_list_pods(c, jobns, pods_of, &mine_list, &perr) == 0) {
					mine = cJSON_GetObjectItemCaseSensitive(mine_list, "items");
					dlk_job_summary_release(&s);
					dlk_job_summarize(j, mine, NULL, &s);
				}
			}
			if (mine && s.state != JOB_FAILED)
				ev = dlk_job_events(c, jobns, s.name, &s);
			if (mine) {
				dlk_job_summary_release(&s);
				dlk_job_summarize(j, mine, ev, &s);
			}
			explained++;
		}
		if (structured) {
			cJSON *o = dlk_job_summary_json(&s);
			if (as) {
				struct dlk_cron_summary cs;
				dlk_cron_summarize(as, &cs);
				cJSON_ReplaceItemInObjectCaseSensitive(o, "name", cJSON_CreateString(cs.name));
				if (idle) {
					cJSON_ReplaceItemInObjectCaseSensitive(o, "state", cJSON_CreateString(idle));
					cJSON_AddNullToObject(o, "run");
				} else {
					cJSON_AddStringToObject(o, "run", s.name);
				}
				cJSON_AddItemToObject(o, "cronJob", dlk_cron_summary_json(&cs));
			}
			cJSON_AddItemToArray(items, o);
		} else {
			summary_row(&s, as ? meta_name(as) : NULL, idle, all_ns, wide, &rows[nrows++], &ncols);
		}
		dlk_job_summary_release(&s);
		cJSON_Delete(ev);
		if (mine_list)
			cJSON_Delete(mine_list);
		else
			cJSON_Delete(mine);
	}
	if (structured) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "jobs", items);
		items = NULL;
		if (served)
			cJSON_AddItemReferenceToObject(o, "served", (cJSON *)served);
		rc = emit_structured(ctx, o, b, err);
		cJSON_Delete(o);
	} else if (nrows > 1) {
		header_row(all_ns, wide, &rows[0]);
		dlk_table_print(ctx, b, rows, nrows, ncols);
	}
	cJSON_Delete(items);
	cJSON_Delete(standins);
	free(rows);
	free(e);
	free(hidden);
	return rc;
}

/* ---- served models ---- */

static cJSON *track_json(const struct dlk_serve_track *t)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "deployment", t->deployment);
	cJSON_AddNumberToObject(o, "ready", t->ready);
	cJSON_AddNumberToObject(o, "desired", t->desired);
	cJSON_AddStringToObject(o, "modelSha256", t->sha256);
	if (t->accuracy[0])
		cJSON_AddNumberToObject(o, "accuracy", atof(t->accuracy));
	else
		cJSON_AddNullToObject(o, "accuracy");
	cJSON_AddStringToObject(o, "source", t->source);
	cJSON_AddStringToObject(o, "rollout", t->rollout == ROLLOUT_DONE ? "Complete" : t->rollout == ROLLOUT_FAILED ? "Failed" : "Progressing");
	if (t->reason[0])
		cJSON_AddStringToObject(o, "reason", t->reason);
	return o;
}

/* The served models of ns (their Deployments labelled dlk.dev/serve, and their pods): *json is
 * {"name", "namespace", "ready", "desired", "modelSha256", "accuracy", "source", "rollout",
 * "canary": null | {"percent", ...the same of the canary track}} per model; the table goes to b. */
static int served_list(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, int all_ns, cJSON **json,
                       struct dlk_buf *b, struct dlk_err *err)
{
	cJSON *deps = NULL, *pods = NULL;
	const cJSON *d;
	int nrows = 1, ncols = 0, n;
	struct dlk_table_row *rows;

	*json = cJSON_CreateArray();
	if (list_kind(c, "Deployment", ns, all_ns, DLK_LABEL_SERVE, &deps, err) < 0)
		return -1;
	n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(deps, "items"));
	if (!n) {
		cJSON_Delete(deps);
		return 0;
	}
	if (list_kind(c, "Pod", ns, all_ns, DLK_LABEL_SERVE, &pods, err) < 0) {
		cJSON_Delete(deps);
		return -1;
	}
	rows = xcalloc((size_t)n + 1, sizeof(*rows));
	/* stable tracks first: each makes a row, and its canary joins it */
	for (int pass = 0; pass < 2; pass++) {
		cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(deps, "items")) {
			struct dlk_serve_track t;
			const char *dns = kube_meta(d, "namespace") ? kube_meta(d, "namespace") : ns;
			/* only this namespace's pods of this model */
			cJSON *mine = cJSON_CreateArray();
			const cJSON *p;
			dlk_serve_track_summarize(d, NULL, &t);
			cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(pods, "items")) {
				const cJSON *l = jget2(p, "metadata", "labels");
				const cJSON *sv = cJSON_GetObjectItemCaseSensitive(l, DLK_LABEL_SERVE);
				const char *pns = kube_meta(p, "namespace");
				if (cJSON_IsString(sv) && !strcmp(sv->valuestring, t.name) && (!pns || !strcmp(pns, dns)))
					cJSON_AddItemReferenceToArray(mine, (cJSON *)p);
			}
			dlk_serve_track_summarize(d, mine, &t);
			cJSON_Delete(mine);
			int canary = !strcmp(t.track, "canary");
			if (canary != pass)
				continue;
			cJSON *o = NULL, *it;
			int row = -1;
			cJSON_ArrayForEach(it, *json) {
				row++;
				if (!strcmp(cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring, t.name) &&
				    !strcmp(cJSON_GetObjectItemCaseSensitive(it, "namespace")->valuestring, dns)) {
					o = it;
					break;
				}
			}
			if (!canary || !o) {
				o = track_json(&t);
				cJSON_AddStringToObject(o, "name", t.name);
				cJSON_AddStringToObject(o, "namespace", dns);
				cJSON_AddNullToObject(o, "canary");
				cJSON_AddItemToArray(*json, o);
				row = cJSON_GetArraySize(*json) - 1;
				struct dlk_table_row *r = &rows[nrows++];
				int k = 0;
				if (all_ns)
					snprintf(r->c[k++], DLK_TABLE_CELL, "%s", dns);
				snprintf(r->c[k++], DLK_TABLE_CELL, "%s", t.name);
				snprintf(r->c[k++], DLK_TABLE_CELL, "%d/%d", t.ready, t.desired);
				snprintf(r->c[k++], DLK_TABLE_CELL, "%.12s", t.sha256[0] ? t.sha256 : "-");
				if (t.accuracy[0])
					snprintf(r->c[k++], DLK_TABLE_CELL, "%.2f%%", 100 * atof(t.accuracy));
				else
					snprintf(r->c[k++], DLK_TABLE_CELL, "-");
				snprintf(r->c[k++], DLK_TABLE_CELL, "-");
				snprintf(r->c[k++], DLK_TABLE_CELL, "%.150s", t.rollout == ROLLOUT_FAILED ? t.reason : t.rollout == ROLLOUT_DONE ? "" :
				         "rolling out");
				ncols = k;
			}
			if (canary) {
				cJSON *cj = track_json(&t);
				cJSON_AddNumberToObject(cj, "percent", t.canary_percent);
				cJSON_ReplaceItemInObject(o, "canary", cj);
				struct dlk_table_row *r = &rows[row + 1];
				int k = all_ns ? 5 : 4;
				snprintf(r->c[k], DLK_TABLE_CELL, "%d%% %d/%d %.12s", t.canary_percent, t.ready, t.desired,
				         t.sha256[0] ? t.sha256 : "-");
			}
		}
	}
	if (ctx->output != DLK_OUTPUT_JSON && ctx->output != DLK_OUTPUT_YAML && nrows > 1) {
		static const char *const h[] = { "SERVED", "READY", "MODEL", "ACCURACY", "CANARY", "STATUS" };
		int k = 0;
		if (all_ns)
			snprintf(rows[0].c[k++], DLK_TABLE_CELL, "NAMESPACE");
		for (int i = 0; i < 6; i++)
			snprintf(rows[0].c[k++], DLK_TABLE_CELL, "%s", h[i]);
		if (b->len)
			dlk_buf_addc(b, '\n');
		dlk_table_print(ctx, b, rows, nrows, ncols);
	}
	free(rows);
	cJSON_Delete(deps);
	cJSON_Delete(pods);
	return 0;
}

/* One served model in detail: each track (ready/desired, model, source, accuracy, split,
 * rollout) and each pod (track, phase, readiness, restarts, node, what holds it up). *found: 0
 * when nothing is served under that name. */
static int served_one(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, int *found,
                      struct dlk_buf *b, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	char *sel = dlk_serve_selector(name, NULL);
	cJSON *deps = NULL, *pods = NULL, *json = NULL;
	const cJSON *d, *p;
	int rc = -1;

	*found = 0;
	lo.label_selector = sel;
	if (kube_list(c, "Deployment", ns, &lo, &deps, err) < 0 || kube_list(c, "Pod", ns, &lo, &pods, err) < 0)
		goto out;
	if (!cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(deps, "items"))) {
		rc = 0;
		goto out;
	}
	*found = 1;
	json = cJSON_CreateObject();
	cJSON_AddStringToObject(json, "name", name);
	cJSON_AddStringToObject(json, "namespace", ns);
	cJSON *tracks = cJSON_AddArrayToObject(json, "tracks");
	if (ctx->output != DLK_OUTPUT_JSON && ctx->output != DLK_OUTPUT_YAML) {
		if (b->len)
			dlk_buf_addc(b, '\n');
		dlk_buf_addf(b, "served:     %s (namespace %s), Service %s-serving\n", name, ns, name);
	}
	for (int pass = 0; pass < 2; pass++) {
		cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(deps, "items")) {
			struct dlk_serve_track t;
			dlk_serve_track_summarize(d, cJSON_GetObjectItemCaseSensitive(pods, "items"), &t);
			if ((!strcmp(t.track, "canary")) != pass)
				continue;
			cJSON *o = track_json(&t);
			cJSON_AddStringToObject(o, "track", t.track);
			cJSON_AddNumberToObject(o, "percent", t.canary_percent);
			cJSON_AddItemToArray(tracks, o);
			if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML)
				continue;
			char acc[32] = "-";
			if (t.accuracy[0])
				snprintf(acc, sizeof(acc), "%.2f%%", 100 * atof(t.accuracy));
			dlk_buf_addf(b, "%-11s %d/%d ready, model %.12s from %s, test accuracy %s", pass ? "canary:" : "stable:", t.ready,
			             t.desired, t.sha256[0] ? t.sha256 : "-", t.source[0] ? t.source : "-", acc);
			if (pass)
				dlk_buf_addf(b, ", %d%% of the traffic", t.canary_percent);
			dlk_buf_addf(b, "\n%-11s %s%s%s%s%s\n", "rollout:",
			             t.rollout == ROLLOUT_DONE ? "complete" : t.rollout == ROLLOUT_FAILED ? "failed" : "in progress",
			             t.pod[0] ? ", pod " : "", t.pod, t.reason[0] ? ": " : "", t.reason);
		}
	}
	cJSON *pj = cJSON_AddArrayToObject(json, "pods");
	int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pods, "items"));
	struct dlk_table_row *rows = xcalloc((size_t)n + 1, sizeof(*rows));
	int nrows = 0;
	static const char *const h[] = { "POD", "TRACK", "PHASE", "READY", "RESTARTS", "NODE", "REASON" };
	for (int i = 0; i < 7; i++)
		snprintf(rows[0].c[i], DLK_TABLE_CELL, "%s", h[i]);
	nrows = 1;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(pods, "items")) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "status");
		const cJSON *cs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "containerStatuses"), 0);
		const cJSON *l = jget2(p, "metadata", "labels");
		const cJSON *tr = cJSON_GetObjectItemCaseSensitive(l, DLK_LABEL_TRACK);
		const cJSON *ph = cJSON_GetObjectItemCaseSensitive(st, "phase");
		const cJSON *node = jget2(p, "spec", "nodeName");
		const cJSON *rs = cJSON_GetObjectItemCaseSensitive(cs, "restartCount");
		const cJSON *wr = jget2(cJSON_GetObjectItemCaseSensitive(cs, "state"), "waiting", "reason");
		struct dlk_table_row *r = &rows[nrows++];
		snprintf(r->c[0], DLK_TABLE_CELL, "%s", meta_name(p));
		snprintf(r->c[1], DLK_TABLE_CELL, "%s", cJSON_IsString(tr) ? tr->valuestring : "-");
		snprintf(r->c[2], DLK_TABLE_CELL, "%s", cJSON_IsString(ph) ? ph->valuestring : "-");
		snprintf(r->c[3], DLK_TABLE_CELL, "%s", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "ready")) ? "yes" : "no");
		snprintf(r->c[4], DLK_TABLE_CELL, "%d", cJSON_IsNumber(rs) ? rs->valueint : 0);
		snprintf(r->c[5], DLK_TABLE_CELL, "%s", cJSON_IsString(node) ? node->valuestring : "-");
		snprintf(r->c[6], DLK_TABLE_CELL, "%s", cJSON_IsString(wr) ? wr->valuestring : "");
		cJSON *po = cJSON_CreateObject();
		cJSON_AddStringToObject(po, "name", r->c[0]);
		cJSON_AddStringToObject(po, "track", r->c[1]);
		cJSON_AddStringToObject(po, "phase", r->c[2]);
		cJSON_AddBoolToObject(po, "ready", !strcmp(r->c[3], "yes"));
		cJSON_AddNumberToObject(po, "restarts", cJSON_IsNumber(rs) ? rs->valueint : 0);
		cJSON_AddItemToArray(pj, po);
	}
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		rc = emit_structured(ctx, json, b, err);
	} else {
		if (nrows > 1) {
			dlk_buf_addc(b, '\n');
			dlk_table_print(ctx, b, rows, nrows, 7);
		}
		rc = 0;
	}
	free(rows);
out:
	free(sel);
	cJSON_Delete(json);
	cJSON_Delete(deps);
	cJSON_Delete(pods);
	return rc;
}

/* ---- one job ---- */

static void detail_text(const struct dlk_ctx *ctx, const struct dlk_job_summary *s, struct dlk_buf *b)
{
	char age[32] = "-", prog[160];

	if (s->age_s >= 0)
		dlk_duration_text(s->age_s, age, sizeof(age));
	dlk_buf_addf(b, "job:       %s (namespace %s)\n", s->name, s->ns);
	dlk_buf_addf(b, "state:     %s\n", dlk_job_state_name(s->state));
	if (s->reason[0])
		dlk_buf_addf(b, "%-10s %s\n", s->state == JOB_FAILED ? "failure:" : "reason:", s->reason);
	dlk_buf_addf(b, "workers:   %d/%d ready", s->ready, s->total);
	if (s->succeeded || s->failed)
		dlk_buf_addf(b, ", %d succeeded, %d failed", s->succeeded, s->failed);
	dlk_buf_addc(b, '\n');
	if (s->gpus)
		dlk_buf_addf(b, "gpus:      %d (%d per worker)\n", s->gpus, s->gpus_per_worker);
	dlk_job_progress_text(s, prog, sizeof(prog));
	if (prog[0])
		dlk_buf_addf(b, "progress:  %s\n", prog);
	if (s->progress) {
		const cJSON *acc = cJSON_GetObjectItemCaseSensitive(s->progress, DLK_PROGRESS_ACCURACY);
		const cJSON *sps = cJSON_GetObjectItemCaseSensitive(s->progress, DLK_PROGRESS_SAMPLES_PER_SEC);
		const cJSON *upd = cJSON_GetObjectItemCaseSensitive(s->progress, DLK_PROGRESS_UPDATED);
		if (cJSON_IsNumber(acc) || cJSON_IsNumber(sps)) {
			dlk_buf_adds(b, "metrics:  ");
			if (cJSON_IsNumber(acc))
				dlk_buf_addf(b, " accuracy %.4f", acc->valuedouble);
			const cJSON *tm = cJSON_GetObjectItemCaseSensitive(s->progress, DLK_PROGRESS_TEST_METRIC);
			if (cJSON_IsString(tm))
				dlk_buf_addf(b, " %.60s", dlk_visible(tm->valuestring));
			if (cJSON_IsNumber(sps))
				dlk_buf_addf(b, " samples/s %.0f", sps->valuedouble);
			const cJSON *mfu = cJSON_GetObjectItemCaseSensitive(s->progress, DLK_PROGRESS_MFU);
			const cJSON *fl = cJSON_GetObjectItemCaseSensitive(s->progress, DLK_PROGRESS_FLOPS);
			if (cJSON_IsNumber(mfu) && cJSON_IsNumber(fl)) {
				char f[32];
				dlk_fmt_flops(f, sizeof(f), fl->valuedouble);
				dlk_buf_addf(b, " MFU %.2f%% (%s)", 100 * mfu->valuedouble, f);
			}
			dlk_buf_addc(b, '\n');
		}
		if (cJSON_IsString(upd))
			dlk_buf_addf(b, "updated:   %s\n", upd->valuestring);
	}
	dlk_buf_addf(b, "age:       %s\n\n", age);

	struct dlk_table_row *rows = xcalloc((size_t)s->total + 1, sizeof(*rows));
	static const char *const h[] = { "RANK", "POD", "NODE", "PHASE", "RESTARTS", "LAST EXIT" };
	for (int c = 0; c < 6; c++)
		snprintf(rows[0].c[c], DLK_TABLE_CELL, "%s", h[c]);
	for (int i = 0; i < s->total; i++) {
		const struct dlk_rank *r = &s->ranks[i];
		struct dlk_table_row *w = &rows[i + 1];
		const cJSON *node = jget2(r->pod, "spec", "nodeName");
		snprintf(w->c[0], DLK_TABLE_CELL, "%d", i);
		snprintf(w->c[1], DLK_TABLE_CELL, "%s", r->pod ? meta_name(r->pod) : "-");
		snprintf(w->c[2], DLK_TABLE_CELL, "%s", cJSON_IsString(node) ? node->valuestring : "-");
		snprintf(w->c[3], DLK_TABLE_CELL, "%s", r->pod ? r->phase : "NotCreated");
		snprintf(w->c[4], DLK_TABLE_CELL, "%d", r->restarts);
		if (r->terminated || r->exit_code)
			snprintf(w->c[5], DLK_TABLE_CELL, "%d %s", r->exit_code, r->reason);
		else if (r->reason[0])
			snprintf(w->c[5], DLK_TABLE_CELL, "%s", r->reason);
		else
			snprintf(w->c[5], DLK_TABLE_CELL, "-");
	}
	dlk_table_print(ctx, b, rows, s->total + 1, 6);
	free(rows);
}

static int render_one(const struct dlk_ctx *ctx, struct kube_client *c, const cJSON *job, const cJSON *pods,
		      struct dlk_buf *b, enum dlk_job_state *state, struct dlk_err *err)
{
	struct dlk_job_summary pre, s;
	cJSON *ev = NULL;
	int rc = 0;

	dlk_job_summarize(job, pods, NULL, &pre);
	/* events explain a pending job; a running or finished one does not need the extra calls */
	if (c && (pre.state == JOB_PENDING || pre.state == JOB_SUSPENDED))
		ev = dlk_job_events(c, pre.ns[0] ? pre.ns : kube_client_namespace(c), pre.name, &pre);
	dlk_job_summarize(job, pods, ev, &s);
	*state = s.state;
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *o = dlk_job_summary_json(&s);
		rc = emit_structured(ctx, o, b, err);
		cJSON_Delete(o);
	} else {
		detail_text(ctx, &s, b);
	}
	dlk_job_summary_release(&s);
	dlk_job_summary_release(&pre);
	cJSON_Delete(ev);
	return rc;
}

/* A scheduled project NAME: its CronJob (schedule, suspended, last schedule and success, active
 * runs), the table of its runs, newest first, and the newest one in detail as a Job is shown.
 * -o json/yaml: {"cronJob": {...}, "runs": [the runs' summaries, newest first]}. *found: 0 when
 * there is no CronJob of that name. */
static int render_cron(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, int *found,
		       struct dlk_buf *b, struct dlk_err *err)
{
	int structured = ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML;
	cJSON *cj = NULL, *jobs = NULL, *runs = NULL, *pods = NULL, *json = NULL;
	struct dlk_cron_summary cs;
	const cJSON *run, *items;
	int rc = -1, nruns, nrows = 1, ncols = 0;
	struct dlk_table_row *rows = NULL;

	*found = 0;
	if (dlk_read_cronjob(c, ns, name, &cj, &jobs, &runs, err) < 0) {
		/* not allowed to read CronJobs: then the name is no scheduled project of theirs */
		if (err->code != DLK_EXIT_NOTFOUND && err->code != DLK_EXIT_AUTH)
			return -1;
		dlk_err_clear(err);
		return 0;
	}
	*found = 1;
	if (dlk_job_list_pods(c, ns, name, &pods, err) < 0)
		goto out;
	items = cJSON_GetObjectItemCaseSensitive(pods, "items");
	dlk_cron_summarize(cj, &cs);
	nruns = cJSON_GetArraySize(runs);
	json = cJSON_CreateObject();
	cJSON_AddItemToObject(json, "cronJob", dlk_cron_summary_json(&cs));
	cJSON *jruns = cJSON_AddArrayToObject(json, "runs");
	if (!structured) {
		dlk_buf_addf(b, "scheduled: %s (namespace %s), a CronJob\n", cs.name, cs.ns);
		dlk_buf_addf(b, "schedule:  %s%s%s%s\n", cs.schedule, cs.time_zone[0] ? " (" : "", cs.time_zone,
		             cs.time_zone[0] ? ")" : "");
		dlk_buf_addf(b, "suspended: %s\n", cs.suspended ? "yes: no run starts on schedule" : "no");
		dlk_buf_addf(b, "last run:  %s\n", cs.last_schedule[0] ? cs.last_schedule : "never on schedule");
		dlk_buf_addf(b, "succeeded: %s\n", cs.last_success[0] ? cs.last_success : "never");
		dlk_buf_addf(b, "active:    %d run%s\n", cs.active, cs.active == 1 ? "" : "s");
		if (!nruns)
			dlk_buf_addf(b, "runs:      none yet (kubectl create job --from=cronjob/%s NAME starts one now)\n", cs.name);
	}
	rows = xcalloc((size_t)nruns + 1, sizeof(*rows));
	cJSON_ArrayForEach(run, runs) {
		struct dlk_job_summary s;
		dlk_job_summarize(run, items, NULL, &s);
		cJSON_AddItemToArray(jruns, dlk_job_summary_json(&s));
		summary_row(&s, NULL, NULL, 0, 0, &rows[nrows++], &ncols);
		dlk_job_summary_release(&s);
	}
	if (structured) {
		rc = emit_structured(ctx, json, b, err);
		goto out;
	}
	if (nruns) {
		header_row(0, 0, &rows[0]);
		snprintf(rows[0].c[0], DLK_TABLE_CELL, "RUN");
		dlk_buf_addc(b, '\n');
		dlk_table_print(ctx, b, rows, nrows, ncols);
		/* the newest run as a Job is shown */
		enum dlk_job_state st;
		run = cJSON_GetArrayItem(runs, 0);
		dlk_buf_addf(b, "\nlatest run:\n");
		if (render_one(ctx, c, run, items, b, &st, err) < 0)
			goto out;
		dlk_job_run_lines(ctx, c, run, b);
	}
	rc = 0;
out:
	free(rows);
	cJSON_Delete(json);
	cJSON_Delete(cj);
	cJSON_Delete(jobs);
	cJSON_Delete(runs);
	cJSON_Delete(pods);
	return rc;
}

/* For -w, which watches Jobs only: the dlk CronJobs of ns in *crons (a CronJobList), read at
 * the start and again when a Job names a CronJob owner (by uid) not read before, so that a
 * scheduled project is listed once as it is without -w. *tried keeps the uids looked for. */
static void owners_refresh(struct kube_client *c, const char *ns, const cJSON *jobs, cJSON **crons,
			   struct dlk_buf *tried)
{
	const cJSON *j, *ref, *cj;
	int stale = !*crons;

	cJSON_ArrayForEach(j, jobs) {
		cJSON_ArrayForEach(ref, jget2(j, "metadata", "ownerReferences")) {
			const cJSON *k = cJSON_GetObjectItemCaseSensitive(ref, "kind"), *u = cJSON_GetObjectItemCaseSensitive(ref, "uid");
			int known = 0;
			if (!cJSON_IsString(k) || strcmp(k->valuestring, "CronJob") || !cJSON_IsString(u))
				continue;
			cJSON_ArrayForEach(cj, cJSON_GetObjectItemCaseSensitive(*crons, "items")) {
				const char *uid = kube_meta(cj, "uid");
				known |= uid && !strcmp(uid, u->valuestring);
			}
			if (known || (tried->len && strstr(tried->data, u->valuestring)))
				continue;
			dlk_buf_addf(tried, "%s ", u->valuestring);
			stale = 1;
		}
	}
	if (stale) {
		cJSON *fresh = NULL;
		struct dlk_err err = DLK_ERR_INIT;
		/* only helps the picture: when it cannot be read, runs are listed each under its name */
		if (list_kind(c, "CronJob", ns, 0, DLK_LABEL_JOB, &fresh, &err) == 0) {
			cJSON_Delete(*crons);
			*crons = fresh;
		} else if (!*crons) {
			*crons = cJSON_CreateObject(); /* not asked again until a new owner shows */
		}
	}
}

static void show(const struct dlk_ctx *ctx, const struct dlk_buf *b, int redraw)
{
	/* on a terminal -w redraws the screen; elsewhere each change is appended */
	if (redraw && ctx->tty_out)
		fputs("\033[H\033[2J", stdout);
	else if (redraw)
		fputs("\n", stdout);
	dlk_put_text(stdout, b->data, b->len);
	fflush(stdout);
}

static int status_watch(struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name)
{
	struct dlk_jobwatch w;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf last = DLK_BUF_INIT, tried = DLK_BUF_INIT;
	cJSON *crons = NULL;
	unsigned seen = 0, drawn_gen = 0;
	int rc = 0, shown = 0;

	if (dlk_watch_jobs(ctx, &w, ns, name, &err) < 0) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	for (;;) {
		struct dlk_buf b = DLK_BUF_INIT;
		enum dlk_job_state st = JOB_PENDING;
		int done = 0;

		dlk_jobwatch_wait(&w, &seen, 1.0);
		if (dlk_interrupted())
			break;
		dlk_jobwatch_lock(&w);
		if (w.failed) {
			err = w.err;
			dlk_jobwatch_unlock(&w);
			rc = dlk_report(ctx, &err);
			break;
		}
		/* redraw on changes only: a clock that ticks (AGE) is not news */
		if (!w.synced_jobs || !w.synced_pods || (shown && seen == drawn_gen)) {
			dlk_jobwatch_unlock(&w);
			continue;
		}
		drawn_gen = seen;
		if (name) {
			const cJSON *job = cJSON_GetObjectItemCaseSensitive(w.jobs, name);
			if (!job) {
				dlk_jobwatch_unlock(&w);
				if (shown) {
					dlk_info(ctx, "job '%s' was deleted", name);
					break;
				}
				dlk_job_not_found(ctx, c, ns, name, &err);
				cJSON *cj = NULL;
				struct dlk_err cerr = DLK_ERR_INIT;
				if (kube_get(c, "CronJob", ns, name, &cj, &cerr) == 0) {
					dlk_errf(&err, DLK_EXIT_USAGE, "'%s' is a scheduled training (a CronJob): -w follows one Job", name);
					dlk_err_hint(&err, "'dlk status %s' shows its runs; 'dlk logs -f %s' follows the active one", name,
					             name);
				}
				cJSON_Delete(cj);
				rc = dlk_report(ctx, &err);
				break;
			}
			cJSON *pods = dlk_jobwatch_pods_of(&w, name);
			cJSON *jc = cJSON_Duplicate(job, 1), *pc = cJSON_Duplicate(pods, 1);
			cJSON_Delete(pods);
			dlk_jobwatch_unlock(&w);
			/* events are fetched outside the lock: the watches go on meanwhile */
			if (render_one(ctx, c, jc, pc, &b, &st, &err) < 0)
				rc = dlk_report(ctx, &err), done = 1;
			done |= st == JOB_SUCCEEDED || st == JOB_FAILED;
			cJSON_Delete(jc);
			cJSON_Delete(pc);
		} else {
			/* the CronJobs are read outside the lock, from a copy of the jobs */
			cJSON *jobs = cJSON_Duplicate(w.jobs, 1), *pods = cJSON_Duplicate(w.pods, 1);
			dlk_jobwatch_unlock(&w);
			owners_refresh(c, ns, jobs, &crons, &tried);
			if (render_list(ctx, NULL, jobs, cJSON_GetObjectItemCaseSensitive(crons, "items"), pods, 0, NULL, &b, &err) < 0)
				rc = dlk_report(ctx, &err), done = 1;
			cJSON_Delete(jobs);
			cJSON_Delete(pods);
			if (!b.len)
				dlk_buf_addf(&b, "no dlk jobs in namespace '%s'\n", ns);
		}
		/* the age column changes every second; only real changes are shown again */
		if (!shown || strcmp(last.data, b.data)) {
			show(ctx, &b, shown);
			shown = 1;
			dlk_buf_reset(&last);
			dlk_buf_adds(&last, b.data);
		}
		dlk_buf_release(&b);
		if (done)
			break;
	}
out:
	dlk_buf_release(&last);
	dlk_buf_release(&tried);
	cJSON_Delete(crons);
	dlk_jobwatch_release(&w);
	return rc;
}

static struct {
	int all_ns, watch, history, local;
	const char *run, *compare, *by;
} opt;

static int run_status(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	struct dlk_buf b = DLK_BUF_INIT;
	cJSON *jobs = NULL, *pods = NULL, *job = NULL, *served = NULL, *crons = NULL;
	int all_ns = opt.all_ns, watch = opt.watch;
	const char *name = args->n_pos ? args->pos[0] : NULL, *ns;
	char *own = NULL; /* the project's name, when none was given */
	int rc = 0;

	if (all_ns && name) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--all-namespaces lists jobs; it takes no NAME and no --watch");
		return dlk_report(ctx, &err);
	}
	if (opt.compare && !opt.run) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--compare goes with --run: dlk status NAME --run ID --compare OTHER-ID");
		return dlk_report(ctx, &err);
	}
	if ((opt.history || opt.run || opt.local) && (all_ns || watch)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "%s shows the runs of one project: give its NAME (and no -A or -w)",
		         opt.history ? "--history" : opt.run ? "--run" : "--local");
		return dlk_report(ctx, &err);
	}
	if (opt.by && !opt.history) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--by goes with --history: dlk status NAME --history --by dataset");
		return dlk_report(ctx, &err);
	}
	if (opt.by && strcmp(opt.by, "dataset")) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--by: '%s' is not a grouping; the runs' usage is summed --by dataset "
		         "(per project: --history -o wide; per sweep: dlk status SWEEP)", dlk_visible(opt.by));
		return dlk_report(ctx, &err);
	}
	if (opt.local && !opt.history && !opt.run) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--local goes with --history or --run (jobs are in the cluster)");
		return dlk_report(ctx, &err);
	}
	/* a sweep run here (dlk sweep --local): its trials from the run history */
	if (name && !all_ns && !watch && dlk_is_local_sweep(ctx, name))
		return dlk_show_sweep(ctx, name);
	if (opt.history || opt.run) {
		/* the runs of "the project": within its directory it needs no name */
		if (!name && !(name = own = dlk_ctx_project_name(ctx, "project NAME", &err)))
			return dlk_report(ctx, &err);
		rc = opt.history ? dlk_show_run_history(ctx, name, opt.local, opt.by)
		     : opt.compare ? dlk_compare_runs(ctx, name, opt.run, opt.compare, opt.local)
		                   : dlk_show_run(ctx, name, opt.run, opt.local);
		free(own);
		return rc;
	}
	c = dlk_kube_client(ctx, &err);
	if (!c)
		return dlk_report(ctx, &err);
	ns = kube_client_namespace(c);
	if (watch) {
		rc = status_watch(ctx, c, ns, name);
		goto out;
	}
	if (name) {
		enum dlk_job_state st;
		int served = 0, have_job = dlk_read_job(ctx, c, ns, name, &job, &err) == 0;
		if (!have_job && err.code != DLK_EXIT_NOTFOUND) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		if (!have_job) {
			/* a scheduled project: its CronJob and its runs */
			struct dlk_err cerr = DLK_ERR_INIT;
			int found = 0;
			if (render_cron(ctx, c, ns, name, &found, &b, &cerr) < 0) {
				rc = dlk_report(ctx, &cerr);
				goto out;
			}
			if (found) {
				dlk_put_text(stdout, b.data, b.len);
				goto out;
			}
		}
		if (have_job && (dlk_job_list_pods(c, ns, name, &pods, &err) < 0 ||
		                 render_one(ctx, c, job, cJSON_GetObjectItemCaseSensitive(pods, "items"), &b, &st, &err) < 0)) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		/* -o json/yaml: one document, the job's when there is one */
		struct dlk_err serr = DLK_ERR_INIT;
		if ((!have_job || (ctx->output != DLK_OUTPUT_JSON && ctx->output != DLK_OUTPUT_YAML)) &&
		    served_one(ctx, c, ns, name, &served, &b, &serr) < 0) {
			rc = dlk_report(ctx, &serr);
			goto out;
		}
		if (!have_job && !served) {
			dlk_err_hint(&err, "list the jobs and served models with 'dlk status%s'", dlk_ns_flag(ctx, c, ns));
			rc = dlk_report(ctx, &err);
			goto out;
		}
		/* which run the job is, and why it failed, from the run history */
		if (ctx->output != DLK_OUTPUT_JSON && ctx->output != DLK_OUTPUT_YAML)
			dlk_job_run_lines(ctx, c, job, &b);
	} else {
		struct dlk_buf sb = DLK_BUF_INIT;
		struct dlk_err cerr = DLK_ERR_INIT;
		/* CronJobs (scheduled projects) the user may not read: then runs are listed each under its name */
		if (list_kind(c, "CronJob", ns, all_ns, DLK_LABEL_JOB, &crons, &cerr) < 0 && cerr.code != DLK_EXIT_AUTH) {
			rc = dlk_report(ctx, &cerr);
			goto out;
		}
		if (list_kind(c, "Job", ns, all_ns, DLK_LABEL_JOB, &jobs, &err) < 0 ||
		    served_list(ctx, c, ns, all_ns, &served, &sb, &err) < 0 ||
		    render_list(ctx, c, cJSON_GetObjectItemCaseSensitive(jobs, "items"),
		                cJSON_GetObjectItemCaseSensitive(crons, "items"), NULL, all_ns, served, &b, &err) < 0) {
			dlk_buf_release(&sb);
			rc = dlk_report(ctx, &err);
			goto out;
		}
		if (sb.len) {
			if (b.len)
				dlk_buf_addc(&b, '\n');
			dlk_buf_add(&b, sb.data, sb.len);
		}
		dlk_buf_release(&sb);
		if (!b.len) {
			if (all_ns)
				dlk_info(ctx, "no dlk jobs or served models in any namespace");
			else
				dlk_info(ctx, "no dlk jobs or served models in namespace '%s'", ns);
		}
	}
	dlk_put_text(stdout, b.data, b.len);
out:
	dlk_kube_close(ctx, c);
	dlk_buf_release(&b);
	cJSON_Delete(jobs);
	cJSON_Delete(pods);
	cJSON_Delete(job);
	cJSON_Delete(served);
	cJSON_Delete(crons);
	return rc;
}

static const struct dlk_option status_options[] = {
	OPT_BOOL('A', "all-namespaces", &opt.all_ns, "list the dlk jobs of every namespace", .excl = 1),
	OPT_BOOL('w', "watch", &opt.watch, "keep watching and show every change (a job: until it ends)", .excl = 1),
	OPT_BOOL(0, "history", &opt.history, "list the runs of project NAME (default: the project of -f), newest first (-o json: their full records)",
	         .excl = 2),
	OPT_STRING(0, "run", &opt.run, "ID", NULL, "show one run of project NAME: its outcome, metrics and provenance",
	           .excl = 2),
	OPT_STRING(0, "compare", &opt.compare, "ID", NULL, "with --run: set another run beside it, the differences marked"),
	OPT_STRING(0, "by", &opt.by, "dataset", NULL, "with --history: the GPU time, CPU time and cost of the runs summed per dataset they trained on"),
	OPT_BOOL(0, "local", &opt.local, "with --history or --run: the runs trained here (.dlk/runs next to -f)"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_status = {
	.usage = "[NAME]",
	.description = "Without NAME, list the dlk jobs of the namespace (-A: of all namespaces) and the models it\n"
	               "serves (ready and desired replicas, model digest, accuracy, canary split). With NAME, show\n"
	               "that job: each rank's pod, why it is pending, and the progress its workers publish; and\n"
	               "the model served as NAME: each track's rollout and model, and each of its pods. A\n"
	               "scheduled project (schedule:, a CronJob) is listed once with its newest run's state;\n"
	               "with NAME, its schedule, its runs (the Jobs it owns) and the newest run in detail.\n"
	               "--history lists the runs of project NAME (every training is a run with an id: its\n"
	               "outcome, worker counts, metrics, and the digests of its data, spec, code and image),\n"
	               "kept in the ConfigMap NAME-runs, or with --local the runs trained here; --run ID\n"
	               "shows one, --compare another beside it. With these, NAME defaults to the project of\n"
	               "-f (./dlk.yaml): within a project's directory none is needed.",
	.options = status_options,
	.min_pos = 0,
	.max_pos = 1,
	.complete_pos = COMPLETE_JOB,
	.run = run_status,
	.examples = "  $ dlk status\n"
	            "  $ dlk status mnist\n"
	            "  $ dlk status -w mnist\n"
	            "  $ dlk status mnist --history --local\n"
	            "  $ dlk status --history --local       # in a project's directory\n"
	            "  $ dlk status mnist --history --by dataset -o wide\n"
	            "  $ dlk status mnist --run 3f2a9c1e -o json\n"
	            "  $ dlk status mnist --run 3f2a9c1e --compare 9b04d7aa --local\n"
	            "  $ dlk status -A -o wide\n",
};
