/* The run history shown: the table of runs, one run in detail, a run as a report's source. */
#include "commands/status_history.h"
#include "commands/cluster.h"
#include "lib/trainer/run.h"
#include "commands/ui.h"
#include "lib/project/project.h"
#include "lib/report/report.h"
#include "lib/runs/usage.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/clock.h"
#include "lib/util/jsonprint.h"
#include "lib/util/duration.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str_of(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

struct dlk_run_store *dlk_open_run_history(const struct dlk_ctx *ctx, const char *name, int local,
                                           struct kube_client **kc, struct dlk_err *err)
{
	*kc = NULL;
	if (local) {
		char *dir = dlk_runs_local_dir(ctx->file, name);
		struct dlk_run_store *s = dlk_runs_open_dir(dir, name);
		free(dir);
		return s;
	}
	*kc = dlk_kube_client(ctx, err);
	if (!*kc) {
		if (err->code == DLK_EXIT_CONFIG)
			dlk_err_hint(err, "the runs trained on this machine need no cluster: add --local");
		return NULL;
	}
	return dlk_runs_open_configmap(*kc, NULL, name);
}

/* where the history is, for messages */
static void where(const struct dlk_ctx *ctx, struct kube_client *kc, const char *name, char *out, size_t n)
{
	if (!kc) {
		char *dir = dlk_runs_local_dir(ctx->file, name);
		snprintf(out, n, "the local history (%s)", dir);
		free(dir);
	} else {
		snprintf(out, n, "ConfigMap '%s%s' of namespace '%s'", name, DLK_RUNS_CONFIGMAP_SUFFIX,
		         kube_client_namespace(kc));
	}
}

/* seconds since the epoch, -1 when s is not a time */
static double parse_time(const char *s)
{
	double t;

	return dlk_rfc3339_parse(s, &t) ? -1 : t;
}

/* The run's wall time: from its start to its end (or now), pauses between an interruption and
 * its resume included. */
static void run_duration(const cJSON *info, char *out, size_t n)
{
	double a = parse_time(str_of(info, "started_at")), b = parse_time(str_of(info, "finished_at"));

	if (a < 0)
		snprintf(out, n, "-");
	else if (b < 0)
		dlk_duration_span((double)time(NULL) - a, out, n);
	else
		dlk_duration_span(b - a, out, n);
}

/* The run's training time: the clock at the end of its last epoch, resumes included, as the run
 * recorded it (what the terminal said at its end and its report page says) */
static void training_time(const cJSON *rec, char *out, size_t n)
{
	const cJSON *e = get(get(rec, "history"), "epochs");
	const cJSON *v = get(cJSON_GetArrayItem(e, cJSON_GetArraySize(e) - 1), "elapsed_sec");

	/* dlk_history_training_sec() of the history the record holds */
	if (cJSON_IsNumber(v))
		dlk_duration_span(v->valuedouble, out, n);
	else
		snprintf(out, n, "-");
}

/* "2024-05-01 12:00:00" of a record's time */
static void short_time(const char *t, char *out, size_t n)
{
	if (t && strlen(t) >= 19)
		snprintf(out, n, "%.10s %.8s", t, t + 11);
	else
		snprintf(out, n, "%s", t ? t : "-");
}

static void worlds(const cJSON *info, char *out, size_t n)
{
	const cJSON *w;
	size_t len = 0;

	out[0] = '\0';
	cJSON_ArrayForEach(w, get(info, "worlds")) {
		if (cJSON_IsNumber(w) && len + 12 < n)
			len += (size_t)snprintf(out + len, n - len, "%s%d", len ? "," : "", w->valueint);
	}
	if (!len)
		snprintf(out, n, "-");
}

/* a classifier's accuracy, another task's headline metric by name */
static void accuracy(const cJSON *rec, char *out, size_t n)
{
	report_metric_headline(get(rec, "metrics"), out, n);
}

static void hours_text(double s, char *out, size_t n);
static void cost_text(double c, const struct dlk_prices *p, char *out, size_t n);

static void history_row(const cJSON *rec, int wide, const struct dlk_prices *pr, struct dlk_table_row *r)
{
	const cJSON *info = dlk_run_info(rec), *f = get(info, "failure"), *rs = get(info, "restarts");
	char fp[65];
	int c = 0;

	snprintf(r->c[c++], 200, "%.8s", dlk_run_id(rec));
	short_time(dlk_run_started_at(rec), r->c[c++], 200);
	run_duration(info, r->c[c++], 200);
	snprintf(r->c[c++], 200, "%s", dlk_run_outcome_name(dlk_run_outcome(rec)));
	worlds(info, r->c[c++], 200);
	snprintf(r->c[c++], 200, "%d", cJSON_IsNumber(rs) ? rs->valueint : 0);
	accuracy(rec, r->c[c++], 200);
	dlk_run_data_fingerprint(rec, fp);
	snprintf(r->c[c++], 200, "%.12s", fp[0] ? fp : "-");
	snprintf(r->c[c++], 200, "%s", str_of(info, "trigger") ? str_of(info, "trigger") : "-");
	if (wide) {
		const char *commit = str_of(info, "git_commit");
		snprintf(r->c[c++], 200, "%.12s", str_of(info, "spec_sha256") ? str_of(info, "spec_sha256") : "-");
		snprintf(r->c[c++], 200, "%.12s%s", commit ? commit : "-", cJSON_IsTrue(get(info, "git_dirty")) ? "+dirty" : "");
		snprintf(r->c[c++], 200, "%s", str_of(info, "image") ? str_of(info, "image") : "-");
		{
			const cJSON *u = get(info, "usage");
			double cost = dlk_usage_cost(u, pr);
			if (cJSON_IsObject(u)) {
				hours_text(cJSON_GetNumberValue(get(u, "gpu_seconds")), r->c[c++], 200);
				hours_text(cJSON_GetNumberValue(get(u, "cpu_seconds")), r->c[c++], 200);
			} else {
				snprintf(r->c[c++], 200, "-");
				snprintf(r->c[c++], 200, "-");
			}
			if (isfinite(cost))
				cost_text(cost, pr, r->c[c++], 200);
			else
				snprintf(r->c[c++], 200, "-");
		}
	}
	/* why a run failed or was skipped, last: it is the one long column */
	if (f) {
		const cJSON *rank = get(f, "rank");
		const char *msg = str_of(f, "message");
		if (cJSON_IsNumber(rank) && rank->valueint >= 0)
			snprintf(r->c[c++], 200, "rank %d: %.160s", rank->valueint, msg ? msg : "");
		else
			snprintf(r->c[c++], 200, "%.180s", msg ? msg : "");
	} else {
		snprintf(r->c[c++], 200, "%.180s", str_of(info, "reason") ? str_of(info, "reason") : "");
	}
}

/* the usage of the runs recs summed per dataset: JSON/YAML, or a table with a total note */
static int show_usage_by(struct dlk_ctx *ctx, const char *name, const char *by, struct dlk_run_store *s,
                         const cJSON *recs, const struct dlk_prices *pr, struct dlk_err *err)
{
	cJSON *groups = dlk_usage_by_dataset(recs, pr), *g;
	struct dlk_table_row *rows;
	struct dlk_buf b = DLK_BUF_INIT;
	int n = 1, cost = dlk_prices_set(pr), rc = 0;

	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *doc = cJSON_CreateObject();
		cJSON_AddStringToObject(doc, "project", name);
		cJSON_AddStringToObject(doc, "store", dlk_runs_store_kind(s));
		cJSON_AddStringToObject(doc, "by", by);
		cJSON_AddItemToObject(doc, "usage", dlk_usage_sum(recs, pr));
		cJSON_AddItemToObject(doc, "groups", groups);
		rc = dlk_doc_print(stdout, doc, ctx->output == DLK_OUTPUT_JSON, err);
		cJSON_Delete(doc);
		return rc;
	}
	rows = xcalloc((size_t)cJSON_GetArraySize(groups) + 1, sizeof(*rows));
	{
		static const char *const h[] = { "DATASET", "RUNS", "WALL", "GPU TIME", "CPU TIME", "RESERVED", "COST" };
		for (int i = 0; i < 6 + cost; i++)
			snprintf(rows[0].c[i], 200, "%s", h[i]);
	}
	cJSON_ArrayForEach(g, groups) {
		const cJSON *u = get(g, "usage");
		int c = 0;
		snprintf(rows[n].c[c++], 200, "%s", str_of(g, "name"));
		snprintf(rows[n].c[c++], 200, "%d", get(u, "runs")->valueint);
		hours_text(get(u, "wall_seconds")->valuedouble, rows[n].c[c++], 200);
		hours_text(get(u, "gpu_seconds")->valuedouble, rows[n].c[c++], 200);
		hours_text(get(u, "cpu_seconds")->valuedouble, rows[n].c[c++], 200);
		if (get(u, "cpu_reserved_seconds")->valuedouble > 0)
			hours_text(get(u, "cpu_reserved_seconds")->valuedouble, rows[n].c[c++], 200);
		else
			snprintf(rows[n].c[c++], 200, "-");
		if (cost)
			cost_text(get(u, "cost")->valuedouble, pr, rows[n].c[c++], 200);
		n++;
	}
	dlk_table_print(ctx, &b, rows, n, 6 + cost);
	fwrite(b.data, 1, b.len, stdout);
	free(rows);
	dlk_buf_release(&b);
	cJSON_Delete(groups);
	return 0;
}

int dlk_show_run_history(struct dlk_ctx *ctx, const char *name, int local, const char *by)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *kc = NULL;
	struct dlk_run_store *s;
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_table_row *rows = NULL;
	cJSON *recs = NULL, *rec;
	long dropped = 0;
	int bad = 0, rc = 0, n = 0, wide = ctx->output == DLK_OUTPUT_WIDE;
	struct dlk_prices pr;
	char at[512], line_[256] = "";

	if (dlk_prices_from_env(&pr, &err))
		return dlk_report(ctx, &err);
	s = dlk_open_run_history(ctx, name, local, &kc, &err);
	if (!s) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	where(ctx, kc, name, at, sizeof(at));
	if (dlk_runs_list(s, &recs, &dropped, &bad, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (bad)
		dlk_warn(ctx, "%d record%s in %s could not be read and %s left out", bad, bad == 1 ? "" : "s", at,
		         bad == 1 ? "is" : "are");
	if (by && (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML || cJSON_GetArraySize(recs))) {
		if (show_usage_by(ctx, name, by, s, recs, &pr, &err))
			rc = dlk_report(ctx, &err);
		goto out;
	}
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *doc = cJSON_CreateObject();
		cJSON_AddStringToObject(doc, "project", name);
		cJSON_AddStringToObject(doc, "store", dlk_runs_store_kind(s));
		cJSON_AddNumberToObject(doc, "dropped", (double)dropped);
		cJSON_AddItemToObject(doc, "usage", dlk_usage_sum(recs, &pr));
		cJSON_AddItemToObject(doc, "runs", recs);
		recs = NULL;
		if (dlk_doc_print(stdout, doc, ctx->output == DLK_OUTPUT_JSON, &err))
			rc = dlk_report(ctx, &err);
		cJSON_Delete(doc);
		goto out;
	}
	if (!cJSON_GetArraySize(recs)) {
		dlk_info(ctx, "no runs of '%s' in %s%s", name, at,
		         local ? "" : " (runs here are in the local history: --local)");
		goto out;
	}
	rows = xcalloc((size_t)cJSON_GetArraySize(recs) + 1, sizeof(*rows));
	{
		static const char *const h[] = { "RUN", "STARTED (UTC)", "WALL", "OUTCOME", "WORKERS", "RESTARTS",
			                         "ACCURACY", "DATA", "TRIGGER" };
		static const char *const hw[] = { "SPEC", "COMMIT", "IMAGE", "GPU TIME", "CPU TIME", "COST" };
		int c = 0;
		for (int i = 0; i < 9; i++)
			snprintf(rows[0].c[c++], 200, "%s", h[i]);
		for (int i = 0; wide && i < 6; i++)
			snprintf(rows[0].c[c++], 200, "%s", hw[i]);
		snprintf(rows[0].c[c++], 200, "REASON");
	}
	n = 1;
	cJSON_ArrayForEach(rec, recs)
		history_row(rec, wide, &pr, &rows[n++]);
	dlk_table_print(ctx, &b, rows, n, wide ? 16 : 10);
	if (wide) {
		/* what the runs listed held, in all: the project's bill (with the usage columns) */
		cJSON *sum = dlk_usage_sum(recs, &pr);
		dlk_usage_total_text(sum, &pr, line_, sizeof(line_));
		cJSON_Delete(sum);
	}
	fwrite(b.data, 1, b.len, stdout);
	/* a note after the table, not a row of it: scripts read the rows */
	if (line_[0]) {
		fflush(stdout);
		dlk_info(ctx, "%s", line_);
	}
	if (dropped > 0)
		dlk_info(ctx, "%ld older run%s dropped from the history (it keeps the newest %d)", dropped,
		         dropped == 1 ? " was" : "s were", DLK_RUNS_KEEP);
out:
	free(rows);
	dlk_buf_release(&b);
	cJSON_Delete(recs);
	dlk_runs_close(s);
	dlk_kube_close(ctx, kc);
	return rc;
}

/* ---- one run ---- */

static void line(struct dlk_buf *b, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(struct dlk_buf *b, const char *key, const char *fmt, ...)
{
	va_list ap;

	dlk_buf_addf(b, "%-13s ", key);
	va_start(ap, fmt);
	dlk_buf_vaddf(b, fmt, ap);
	va_end(ap);
	dlk_buf_addc(b, '\n');
}

static void hours_text(double s, char *out, size_t n) { dlk_usage_seconds_text(s, out, n); }

static void cost_text(double c, const struct dlk_prices *p, char *out, size_t n) { dlk_usage_cost_text(c, p, out, n); }

/* run.usage as lines: GPU time held, CPU time used (per rank) and reserved, and with a price
 * the cost */
static void usage_text(const cJSON *info, const struct dlk_prices *pr, struct dlk_buf *b)
{
	const cJSON *u = get(info, "usage"), *v;
	char g[32], c[32], r[32];
	double cost;

	if (!cJSON_IsObject(u))
		return;
	hours_text(cJSON_GetNumberValue(get(u, "gpu_seconds")), g, sizeof(g));
	hours_text(cJSON_GetNumberValue(get(u, "cpu_seconds")), c, sizeof(c));
	line(b, "GPU time", "%s (%g GPU%s x %d worker%s x wall %.1f s)", g, cJSON_GetNumberValue(get(u, "gpus_per_worker")),
	     cJSON_GetNumberValue(get(u, "gpus_per_worker")) == 1 ? "" : "s", (int)cJSON_GetNumberValue(get(u, "workers")),
	     cJSON_GetNumberValue(get(u, "workers")) == 1 ? "" : "s", cJSON_GetNumberValue(get(u, "wall_seconds")));
	{
		struct dlk_buf p = DLK_BUF_INIT;
		int i = 0;
		cJSON_ArrayForEach(v, get(u, "cpu_seconds_per_rank")) {
			dlk_buf_addf(&p, "%srank %d %.1f s", i ? ", " : "", i, cJSON_GetNumberValue(v));
			i++;
		}
		if ((v = get(u, "cpu_reserved_seconds")))
			hours_text(v->valuedouble, r, sizeof(r));
		line(b, "CPU time", "%s used%s%s%s%s%s", c, p.data ? " (" : "", p.data ? p.data : "", p.data ? ")" : "",
		     v ? ", reserved " : "", v ? r : "");
		dlk_buf_release(&p);
	}
	cost = dlk_usage_cost(u, pr);
	if (isfinite(cost)) {
		cost_text(cost, pr, c, sizeof(c));
		line(b, "cost", "%s (%s %g, %s %g per hour)", c, DLK_ENV_PRICE_GPU_HOUR, pr->gpu_hour < 0 ? 0 : pr->gpu_hour,
		     DLK_ENV_PRICE_CPU_HOUR, pr->cpu_hour < 0 ? 0 : pr->cpu_hour);
	}
}

/* run.mfu as a line: the model FLOP utilisation, the FLOP/s it is made of, and the peak's source */
static void mfu_text(const cJSON *info, struct dlk_buf *b)
{
	const cJSON *m = get(info, "mfu"), *peak;
	char f[32], p[32];

	if (!cJSON_IsObject(m) || !cJSON_IsNumber(get(m, "flops_per_second")))
		return;
	dlk_fmt_flops(f, sizeof(f), get(m, "flops_per_second")->valuedouble);
	peak = get(m, "peak_flops_per_second");
	if (cJSON_IsNumber(get(m, "mfu")) && cJSON_IsNumber(peak)) {
		dlk_fmt_flops(p, sizeof(p), peak->valuedouble);
		line(b, "MFU", "%.2f%% (%s of a peak of %s; %s)", 100 * get(m, "mfu")->valuedouble, f, p,
		     cJSON_IsString(get(m, "peak")) ? dlk_visible(get(m, "peak")->valuestring) : "-");
	} else {
		line(b, "MFU", "- (%s; the device's peak is not known)", f);
	}
}

static void run_text(const cJSON *rec, const char *store_kind, const struct dlk_prices *pr, struct dlk_buf *b)
{
	const cJSON *info = dlk_run_info(rec), *m = get(rec, "metrics"), *f = get(info, "failure"), *v, *d;
	const cJSON *job = get(info, "job"), *bundle = get(info, "bundle"), *peaks = get(info, "peak_memory_bytes");
	char t1[64], t2[64], dur[32], w[128], fp[65];

	line(b, "run", "%s", dlk_run_id(rec));
	line(b, "project", "%s", dlk_run_project(rec));
	line(b, "outcome", "%s", dlk_run_outcome_name(dlk_run_outcome(rec)));
	if (str_of(info, "reason"))
		line(b, "reason", "%s", str_of(info, "reason"));
	if (f) {
		const cJSON *rank = get(f, "rank"), *code = get(f, "exit_code");
		char who[32] = "";
		if (cJSON_IsNumber(rank) && rank->valueint >= 0)
			snprintf(who, sizeof(who), "rank %d, ", rank->valueint);
		line(b, "failure", "%sexit %d (%s): %s", who, cJSON_IsNumber(code) ? code->valueint : -1,
		     str_of(f, "class") ? str_of(f, "class") : "?", str_of(f, "message") ? str_of(f, "message") : "");
	}
	short_time(dlk_run_started_at(rec), t1, sizeof(t1));
	short_time(str_of(info, "finished_at"), t2, sizeof(t2));
	run_duration(info, dur, sizeof(dur));
	if (str_of(info, "finished_at"))
		line(b, "time", "%s to %s UTC (wall %s)", t1, t2 + (strncmp(t1, t2, 11) ? 0 : 11), dur);
	else
		line(b, "time", "started %s UTC (%s ago)", t1, dur);
	training_time(rec, dur, sizeof(dur));
	if (strcmp(dur, "-"))
		line(b, "training", "%s (the training loop, resumes included)", dur);
	worlds(info, w, sizeof(w));
	v = get(info, "restarts");
	line(b, "workers", "%s%s (%d restart%s)", w, strchr(w, ',') ? " (resized)" : "", cJSON_IsNumber(v) ? v->valueint : 0,
	     cJSON_IsNumber(v) && v->valueint == 1 ? "" : "s");
	if (cJSON_IsArray(peaks) && cJSON_GetArraySize(peaks)) {
		struct dlk_buf p = DLK_BUF_INIT;
		int r = 0;
		cJSON_ArrayForEach(v, peaks) {
			if (cJSON_IsNumber(v))
				dlk_buf_addf(&p, "%srank %d %.0f MiB", r ? ", " : "", r, v->valuedouble / 1048576.0);
			r++;
		}
		line(b, "peak memory", "%s", p.data ? p.data : "");
		dlk_buf_release(&p);
	}
	usage_text(info, pr, b);
	mfu_text(info, b);
	if (job)
		line(b, "where", "cluster: job %s in namespace %s", str_of(job, "name") ? str_of(job, "name") : "?",
		     str_of(job, "namespace") ? str_of(job, "namespace") : "?");
	else
		line(b, "where", "%s%s%s (pid %d)", str_of(info, "where") ? str_of(info, "where") : store_kind,
		     str_of(info, "host") ? ": " : "", str_of(info, "host") ? str_of(info, "host") : "",
		     cJSON_IsNumber(get(info, "pid")) ? get(info, "pid")->valueint : 0);
	line(b, "trigger", "%s", str_of(info, "trigger") ? str_of(info, "trigger") : "-");
	if (m) {
		const cJSON *a = get(m, "test_accuracy"), *tl = get(m, "test_loss"), *tr = get(m, "train_loss");
		char acc[256] = "-", tls[32] = "-", trs[32] = "-";
		if (cJSON_IsNumber(a))
			snprintf(acc, sizeof(acc), "%.2f%%", a->valuedouble * 100);
		else if (get(m, "test"))
			report_metrics_line(m, acc, sizeof(acc));
		if (cJSON_IsNumber(tl))
			snprintf(tls, sizeof(tls), "%.4f", tl->valuedouble);
		if (cJSON_IsNumber(tr))
			snprintf(trs, sizeof(trs), "%.4f", tr->valuedouble);
		line(b, "metrics", "test %s%s, test loss %s, train loss %s", cJSON_IsNumber(a) || !get(m, "test") ?
		     "accuracy " : "", acc, tls, trs);
	} else {
		line(b, "metrics", "none (the run did not finish an evaluation)");
	}
	dlk_run_data_fingerprint(rec, fp);
	line(b, "data", "%.12s%s", fp[0] ? fp : "not recorded", fp[0] ? " (the fingerprint of the sources below)" : "");
	d = get(info, "data");
	if (!cJSON_IsArray(d))
		d = get(get(rec, "provenance"), "data");
	cJSON_ArrayForEach(v, d)
		line(b, "", "%-5s %s  sha256:%s", str_of(v, "split") ? str_of(v, "split") : "?",
		     str_of(v, "url") ? str_of(v, "url") : "?", str_of(v, "sha256") ? str_of(v, "sha256") : "?");
	line(b, "spec", "sha256:%s", str_of(info, "spec_sha256") ? str_of(info, "spec_sha256") : "not recorded");
	if (str_of(info, "git_commit"))
		line(b, "commit", "%s%s", str_of(info, "git_commit"), cJSON_IsTrue(get(info, "git_dirty")) ? " (dirty tree)" : "");
	else
		line(b, "commit", "not recorded (the project is not in a git repository)");
	/* a run here ran in no container: it names none, as its bundle does */
	line(b, "dlk", "%s, image %s", str_of(info, "dlk_version") ? str_of(info, "dlk_version") : "?",
	     str_of(info, "image")                                                ? str_of(info, "image")
	     : str_of(info, "where") && !strcmp(str_of(info, "where"), "local") ? "none (trained here)"
	                                                                         : "not recorded");
	if (str_of(info, "checkpoint_dir"))
		line(b, "checkpoints", "%s", str_of(info, "checkpoint_dir"));
	if (bundle)
		line(b, "bundle", "%s%s%s", str_of(bundle, "path") ? str_of(bundle, "path") : "?",
		     str_of(bundle, "sha256") ? "  sha256:" : "", str_of(bundle, "sha256") ? str_of(bundle, "sha256") : "");
}

int dlk_show_run(struct dlk_ctx *ctx, const char *name, const char *id, int local)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *kc = NULL;
	struct dlk_run_store *s;
	struct dlk_buf b = DLK_BUF_INIT;
	cJSON *rec = NULL;
	struct dlk_prices pr;
	int rc = 0;

	if (dlk_prices_from_env(&pr, &err))
		return dlk_report(ctx, &err);
	s = dlk_open_run_history(ctx, name, local, &kc, &err);
	if (!s || dlk_runs_get(s, id, &rec, &err)) {
		if (s && err.code == DLK_EXIT_NOTFOUND && !err.hint[0])
			dlk_err_hint(&err, "list the runs with 'dlk status %s --history%s'", name, local ? " --local" : "");
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		if (dlk_doc_print(stdout, rec, ctx->output == DLK_OUTPUT_JSON, &err))
			rc = dlk_report(ctx, &err);
		goto out;
	}
	run_text(rec, dlk_runs_store_kind(s), &pr, &b);
	dlk_buf_addf(&b, "\nits page: dlk report %.8s%s\n", dlk_run_id(rec), local ? "" : "");
	dlk_put_text(stdout, b.data, b.len);
out:
	dlk_buf_release(&b);
	cJSON_Delete(rec);
	dlk_runs_close(s);
	dlk_kube_close(ctx, kc);
	return rc;
}

/* ---- two runs side by side ---- */

struct facts {
	char v[24][160];
};

static const char *const fact_names[] = {
	"outcome", "started (UTC)", "wall time", "training time", "workers", "restarts", "trigger", "test accuracy", "test loss",
	"train loss", "epochs", "batch size", "optimizer", "learning rate", "parameters", "data", "train data",
	"test data", "spec", "commit", "image", "dlk", NULL,
};

static void num_fact(const cJSON *o, const char *k, const char *fmt, double scale, char *out)
{
	const cJSON *v = get(o, k);
	if (cJSON_IsNumber(v))
		snprintf(out, 160, fmt, v->valuedouble * scale);
	else if (cJSON_IsString(v))
		snprintf(out, 160, "%.150s", v->valuestring);
	else
		snprintf(out, 160, "-");
}

/* a split's data: the fingerprint of all its sources (images and labels alike), not one file's */
static void split_data(const cJSON *rec, const char *split, char *out)
{
	char fp[65];
	int n;

	dlk_run_split_fingerprint(rec, split, fp, &n);
	if (!n)
		snprintf(out, 160, "-");
	else if (n == 1)
		snprintf(out, 160, "%.12s", fp);
	else
		snprintf(out, 160, "%.12s (%d files)", fp, n);
}

static void facts_of(const cJSON *rec, struct facts *f)
{
	const cJSON *info = dlk_run_info(rec), *m = get(rec, "metrics"), *t = get(rec, "training");
	const char *commit = str_of(info, "git_commit");
	char fp[65];
	int i = 0;

	snprintf(f->v[i++], 160, "%s", dlk_run_outcome_name(dlk_run_outcome(rec)));
	short_time(dlk_run_started_at(rec), f->v[i++], 160);
	run_duration(info, f->v[i++], 160);
	training_time(rec, f->v[i++], 160);
	worlds(info, f->v[i++], 160);
	num_fact(info, "restarts", "%.0f", 1, f->v[i++]);
	snprintf(f->v[i++], 160, "%s", str_of(info, "trigger") ? str_of(info, "trigger") : "-");
	report_metric_headline(m, f->v[i++], 160);
	num_fact(m, "test_loss", "%.4f", 1, f->v[i++]);
	num_fact(m, "train_loss", "%.4f", 1, f->v[i++]);
	num_fact(t, "epochs", "%.0f", 1, f->v[i++]);
	num_fact(t, "batch_size", "%.0f", 1, f->v[i++]);
	num_fact(t, "optimizer", "%.0f", 1, f->v[i++]);
	num_fact(t, "lr", "%g", 1, f->v[i++]);
	num_fact(get(rec, "architecture"), "parameters", "%.0f", 1, f->v[i++]);
	dlk_run_data_fingerprint(rec, fp);
	snprintf(f->v[i++], 160, "%.12s", fp[0] ? fp : "-");
	split_data(rec, "train", f->v[i++]);
	split_data(rec, "test", f->v[i++]);
	snprintf(f->v[i++], 160, "%.12s", str_of(info, "spec_sha256") ? str_of(info, "spec_sha256") : "-");
	snprintf(f->v[i++], 160, "%.12s%s", commit ? commit : "-", cJSON_IsTrue(get(info, "git_dirty")) ? "+dirty" : "");
	snprintf(f->v[i++], 160, "%.150s", str_of(info, "image") ? str_of(info, "image") : "-");
	snprintf(f->v[i++], 160, "%.150s", str_of(info, "dlk_version") ? str_of(info, "dlk_version") : "-");
}

int dlk_compare_runs(struct dlk_ctx *ctx, const char *name, const char *id_a, const char *id_b, int local)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *kc = NULL;
	struct dlk_run_store *s;
	cJSON *a = NULL, *b = NULL;
	struct facts fa, fb;
	size_t wa = 0;
	int rc = 0, differ = 0;

	s = dlk_open_run_history(ctx, name, local, &kc, &err);
	if (!s || dlk_runs_get(s, id_a, &a, &err) || dlk_runs_get(s, id_b, &b, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *doc = cJSON_CreateObject(), *runs = cJSON_AddArrayToObject(doc, "runs"), *diff;
		cJSON_AddItemToArray(runs, a);
		cJSON_AddItemToArray(runs, b);
		a = b = NULL;
		facts_of(cJSON_GetArrayItem(runs, 0), &fa);
		facts_of(cJSON_GetArrayItem(runs, 1), &fb);
		diff = cJSON_AddArrayToObject(doc, "differ");
		for (int i = 0; fact_names[i]; i++)
			if (strcmp(fa.v[i], fb.v[i]) && i != 1 && i != 2)
				cJSON_AddItemToArray(diff, cJSON_CreateString(fact_names[i]));
		if (dlk_doc_print(stdout, doc, ctx->output == DLK_OUTPUT_JSON, &err))
			rc = dlk_report(ctx, &err);
		cJSON_Delete(doc);
		goto out;
	}
	facts_of(a, &fa);
	facts_of(b, &fb);
	for (int i = 0; fact_names[i]; i++)
		if (strlen(fa.v[i]) > wa)
			wa = strlen(fa.v[i]);
	printf("  %-15s %-*.8s   %.8s\n", "", (int)(wa > 8 ? wa : 8), dlk_visible(dlk_run_id(a)), dlk_visible(dlk_run_id(b)));
	for (int i = 0; fact_names[i]; i++) {
		/* the start and the duration of two runs always differ: not marked */
		int d = strcmp(fa.v[i], fb.v[i]) && i != 1 && i != 2;
		differ += d;
		/* the facts come from run records: shown, not obeyed */
		printf("%s %-15s %-*s   %s\n", d ? "*" : " ", fact_names[i], (int)(wa > 8 ? wa : 8), dlk_visible(fa.v[i]),
		       dlk_visible(fb.v[i]));
	}
	dlk_info(ctx, "%d of the facts differ (*); the curves side by side: dlk report %.8s --compare %.8s", differ,
	         dlk_run_id(a), dlk_run_id(b));
out:
	cJSON_Delete(a);
	cJSON_Delete(b);
	dlk_runs_close(s);
	dlk_kube_close(ctx, kc);
	return rc;
}

/* ---- the run a Job is ---- */

void dlk_job_run_lines(const struct dlk_ctx *ctx, struct kube_client *c, const cJSON *job, struct dlk_buf *b)
{
	struct dlk_err err = DLK_ERR_INIT;
	const cJSON *meta = get(job, "metadata");
	const char *uid = str_of(meta, "uid"), *ns = str_of(meta, "namespace"), *project = str_of(get(meta, "labels"), "dlk.dev/job");
	struct dlk_run_store *s;
	cJSON *rec = NULL;

	(void)ctx;
	if (!uid || !project)
		return;
	s = dlk_runs_open_configmap(c, ns, project);
	if (dlk_runs_get(s, uid, &rec, &err) == 0) {
		const cJSON *f = get(dlk_run_info(rec), "failure"), *rank = get(f, "rank"), *code = get(f, "exit_code");
		dlk_buf_addf(b, "\nrun:       %.8s %s (dlk status %s --run %.8s)\n", uid,
		             dlk_run_outcome_name(dlk_run_outcome(rec)), project, uid);
		if (f) {
			char who[32] = "";
			if (cJSON_IsNumber(rank) && rank->valueint >= 0)
				snprintf(who, sizeof(who), "rank %d, ", rank->valueint);
			dlk_buf_addf(b, "cause:     %sexit %d (%s): %s\n", who, cJSON_IsNumber(code) ? code->valueint : -1,
			             str_of(f, "class") ? str_of(f, "class") : "?", str_of(f, "message") ? str_of(f, "message") : "");
		}
		if (dlk_run_str(rec, "reason"))
			dlk_buf_addf(b, "why:       %s\n", dlk_run_str(rec, "reason"));
	}
	cJSON_Delete(rec);
	dlk_runs_close(s);
}
