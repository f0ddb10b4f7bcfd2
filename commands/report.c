/* dlk report: one self-contained HTML page about a run, from a bundle, a run document or a job
 * in the cluster, optionally beside another run (--compare). The page itself is lib/report; this
 * file finds the runs and decides where the page goes. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/report_source.h"
#include "commands/run_history.h"
#include "commands/ui.h"
#include "lib/jobs/jobstate.h"
#include "lib/kube/api.h"
#include "lib/report/report.h"
#include "lib/train/bundle.h"
#include "lib/train/progress.h"
#include "lib/util/buf.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/yamljson.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DOC_BYTES (64u << 20) /* a run or report document read from a file */

/* a file that is JSON: a run document, a report document (its first run), or a model.json */
static cJSON *from_json_file(const char *path, struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256], who[600];
	cJSON *j = NULL, *run = NULL;

	snprintf(who, sizeof(who), "'%.500s'", path);
	if (dlk_buf_read_file(&b, path, MAX_DOC_BYTES, msg, sizeof(msg))) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s", msg);
		goto out;
	}
	j = cJSON_ParseWithLength(b.data, b.len);
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "format");
	const char *fs = cJSON_IsString(f) ? f->valuestring : "";
	if (!strcmp(fs, "dlk-model")) {
		run = report_run_from_meta(j, "file", path, err);
	} else if (!strcmp(fs, REPORT_FORMAT)) {
		/* what `dlk report -o json` printed: its first run is the one it was about */
		const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "runs"), 0);
		char *s = r0 ? cJSON_PrintUnformatted(r0) : NULL;
		if (!s)
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: a report document without runs", who);
		else
			run = report_run_parse(s, strlen(s), who, err);
		free(s);
	} else {
		run = report_run_parse(b.data, b.len, who, err);
	}
out:
	cJSON_Delete(j);
	dlk_buf_release(&b);
	return run;
}

cJSON *dlk_report_from_bundle(const char *path, struct dlk_err *err)
{
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	cJSON *run;

	if (dlk_bundle_read(path, &b, err))
		return NULL;
	run = report_run_from_meta(b.meta, "bundle", path, err);
	dlk_bundle_release(&b);
	return run;
}

cJSON *dlk_report_from_job(const struct dlk_ctx *ctx, const char *ns, const char *name, struct dlk_err *err)
{
	struct kube_client *c = dlk_kube_client(ctx, err);
	struct dlk_job_summary s;
	cJSON *job = NULL, *pods = NULL, *run = NULL, *src;
	char who[400];
	const cJSON *ann;
	int have_summary = 0, restarts = 0;

	if (!c)
		return NULL;
	if (!ns)
		ns = kube_client_namespace(c);
	if (kube_get(c, "Job", ns, name, &job, err) < 0) {
		if (err->code == DLK_EXIT_NOTFOUND) {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "no file and no job named '%s' (namespace '%s')", name, ns);
			dlk_err_hint(err, "name a bundle (NAME.dlk), a run document (.json) or a job of 'dlk status%s'",
			             dlk_ns_flag(ctx, c, ns));
		}
		goto out;
	}
	if (dlk_job_list_pods(c, ns, name, &pods, err) < 0)
		goto out;
	ann = cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations"),
	        DLK_METRICS_ANNOTATION);
	snprintf(who, sizeof(who), "job '%.200s': annotation %s", name, DLK_METRICS_ANNOTATION);
	if (!cJSON_IsString(ann)) {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "job '%s' has published no metrics yet", name);
		dlk_err_hint(err, "its rank 0 publishes them after every epoch; see 'dlk status %s%s'", name,
		             dlk_ns_flag(ctx, c, ns));
		goto out;
	}
	run = report_run_parse(ann->valuestring, strlen(ann->valuestring), who, err);
	if (!run)
		goto out;
	dlk_job_summarize(job, cJSON_GetObjectItemCaseSensitive(pods, "items"), NULL, &s);
	have_summary = 1;
	for (int i = 0; i < s.total; i++)
		restarts += s.ranks[i].restarts;
	src = cJSON_CreateObject();
	cJSON_AddStringToObject(src, "kind", "job");
	cJSON_AddStringToObject(src, "name", name);
	cJSON_AddStringToObject(src, "namespace", ns);
	cJSON_AddStringToObject(src, "state", dlk_job_state_name(s.state));
	cJSON_AddNumberToObject(src, "workers", s.total);
	cJSON_AddNumberToObject(src, "pod_restarts", restarts);
	report_run_set_source(run, src);
out:
	if (have_summary)
		dlk_job_summary_release(&s);
	dlk_kube_close(ctx, c);
	cJSON_Delete(job);
	cJSON_Delete(pods);
	return run;
}

/* SOURCE: a file (a bundle, or JSON) when one of that name exists, else a job in the cluster.
 * A run of the run history (dlk status NAME --history) is one more kind of source when the
 * history exists: its record is a run document already. */
cJSON *dlk_report_source(const struct dlk_ctx *ctx, const char *arg, struct dlk_err *err)
{
	struct stat st;
	cJSON *run;
	FILE *f;
	int c;

	if (!stat(arg, &st)) {
		if (S_ISDIR(st.st_mode))
			return dlk_errf(err, DLK_EXIT_USAGE, "'%s' is a directory, not a bundle or a run document", arg), NULL;
		f = fopen(arg, "rb");
		if (!f)
			return dlk_errf(err, DLK_EXIT_CONFIG, "cannot open '%s': %s", arg, strerror(errno)), NULL;
		/* JSON starts with '{' (after blanks); a bundle is a tar archive */
		while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t')
			;
		fclose(f);
		return c == '{' ? from_json_file(arg, err) : dlk_report_from_bundle(arg, err);
	}
	if (errno != ENOENT || strchr(arg, '/') || strchr(arg, '.'))
		/* job names have no dots or slashes: this was meant to be a file */
		return dlk_errf(err, errno == ENOENT ? DLK_EXIT_NOTFOUND : DLK_EXIT_CONFIG, "cannot open '%s': %s", arg,
		                strerror(errno)), NULL;
	/* a run of the local history (no cluster needed), then a job, then a run of the cluster's
	 * history of the project */
	run = dlk_report_from_run(ctx, arg, 0, err);
	if (run || err->code != DLK_EXIT_NOTFOUND)
		return run;
	dlk_err_clear(err);
	run = dlk_report_from_job(ctx, NULL, arg, err);
	if (run)
		return run;
	if (err->code != DLK_EXIT_NOTFOUND) {
		dlk_err_prefix(err, "no file or local run '%s' here, and asking the cluster for a job of that name failed",
		               arg);
		return NULL;
	}
	if (access(ctx->file, F_OK) == 0) {
		struct dlk_err e = DLK_ERR_INIT;
		run = dlk_report_from_run(ctx, arg, 1, &e);
		if (run || e.code != DLK_EXIT_NOTFOUND) {
			if (!run)
				*err = e;
			else
				dlk_err_clear(err);
			return run;
		}
	}
	/* the job's "no file and no job named", and where else a run could have been */
	dlk_err_hint(err, "name a bundle (NAME.dlk), a run document (.json), a run id of 'dlk status NAME --history "
	                  "[--local]' or a job of 'dlk status'");
	return NULL;
}

/* the page's default name: the source's file name without its extension, or the job's name */
static char *default_page(const char *arg)
{
	const char *base = strrchr(arg, '/'), *dot;

	base = base ? base + 1 : arg;
	dot = strrchr(base, '.');
	return xasprintf("%.*s.html", (int)(dot && dot != base ? (size_t)(dot - base) : strlen(base)), base);
}

/* -o after the command name: a file for the page, or json / yaml (the global -o, given before the
 * command name, still says json or yaml) */
static const char *out_opt, *compare_opt;

static int run_report(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *run = NULL, *other = NULL, *doc = NULL;
	char *page = NULL, *text = NULL;
	int rc = 0, json = 0, yaml = 0;

	if (out_opt) {
		json = !strcmp(out_opt, "json");
		yaml = !strcmp(out_opt, "yaml");
	} else {
		json = ctx->output == DLK_OUTPUT_JSON;
		yaml = ctx->output == DLK_OUTPUT_YAML;
		if (ctx->output == DLK_OUTPUT_WIDE) {
			dlk_errf(&err, DLK_EXIT_USAGE, "-o wide is not a format of 'dlk report'");
			dlk_err_hint(&err, "-o FILE.html writes the page, -o json or -o yaml prints its data");
			return dlk_report(ctx, &err);
		}
	}
	if (out_opt && (!strcmp(out_opt, "wide") || !strcmp(out_opt, "text"))) {
		dlk_errf(&err, DLK_EXIT_USAGE, "-o %s is not a format of 'dlk report'", out_opt);
		dlk_err_hint(&err, "-o FILE.html writes the page (./%s for a file of that name), -o json or -o yaml prints "
		             "its data", out_opt);
		return dlk_report(ctx, &err);
	}
	run = dlk_report_source(ctx, args->pos[0], &err);
	if (!run || (compare_opt && !(other = dlk_report_source(ctx, compare_opt, &err))))
		goto fail;
	if (json || yaml) {
		doc = report_document(run, other, &err);
		if (!doc)
			goto fail;
		text = json ? dlk_json_print(doc) : yamljson_emit(doc, &err);
		if (!text)
			goto fail;
		fputs(text, stdout);
		if (json)
			fputc('\n', stdout);
		goto done;
	}
	if (out_opt && !strcmp(out_opt, "-")) {
		struct dlk_buf b = DLK_BUF_INIT;
		if (report_html(run, other, &b, &err)) {
			dlk_buf_release(&b);
			goto fail;
		}
		fwrite(b.data, 1, b.len, stdout);
		dlk_buf_release(&b);
		goto done;
	}
	page = out_opt ? xstrdup(out_opt) : default_page(args->pos[0]);
	if (report_write_html(page, run, other, &err))
		goto fail;
	if (!ctx->quiet)
		fprintf(stderr, "report: %s\n", page);
	goto done;
fail:
	rc = dlk_report(ctx, &err);
done:
	free(text);
	free(page);
	cJSON_Delete(doc);
	cJSON_Delete(run);
	cJSON_Delete(other);
	return rc;
}

static const struct dlk_option report_options[] = {
	OPT_STRING(0, "compare", &compare_opt, "OTHER", NULL, "set another run beside it: a bundle, a run document or a job",
	           .complete = COMPLETE_RUN),
	OPT_STRING('o', "output", &out_opt, "FILE|FORMAT", NULL,
	           "write the page to FILE (- for stdout), or print its data as json or yaml", .def_doc = "NAME.html",
	           .complete = COMPLETE_FILE),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_report = {
	.usage = "BUNDLE.dlk|RUN.json|JOB",
	.description = "Write one self-contained HTML page about a run: its loss, accuracy and throughput\n"
	               "per epoch, resumes and worker counts, the confusion matrix, per-class precision and\n"
	               "recall, and its provenance. The run is a model bundle, a run document (.json) or a\n"
	               "training job in the cluster. --compare sets a second run beside it.",
	.options = report_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_RUN,
	.run = run_report,
	.examples = "  $ dlk report fashion.dlk\n"
	            "  $ dlk report fashion.dlk --compare baseline.dlk -o compare.html\n"
	            "  $ dlk report fashion -o fashion.html\n"
	            "  $ dlk report fashion.dlk -o json | jq .runs[0].metrics.test_accuracy\n",
};
