/* dlk report: one self-contained HTML page about a run, from a bundle, a run document or a job
 * in the cluster, optionally beside another run (--compare). The page itself is lib/report; this
 * file finds the runs and decides where the page goes. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/sweep_show.h"
#include "commands/ui.h"
#include "lib/sweep/sweep.h"
#include "lib/jobs/jobrun.h"
#include "lib/kube/api.h"
#include "lib/project/project.h"
#include "lib/report/report.h"
#include "lib/runs/runs.h"
#include "lib/train/progress.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
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

/* the run a job of the namespace of -n (or the kubeconfig's) published on itself */
static cJSON *from_job(const struct dlk_ctx *ctx, const char *name, struct dlk_err *err)
{
	struct kube_client *c = dlk_kube_client(ctx, err);
	cJSON *run;
	const char *ns;

	if (!c)
		return NULL;
	ns = kube_client_namespace(c);
	run = dlk_job_run_doc(c, ns, name, dlk_ns_flag(ctx, c, ns), err);
	dlk_kube_close(ctx, c);
	return run;
}

/* a run id of the runs trained here (every project's local history) */
static cJSON *from_local_run(const struct dlk_ctx *ctx, const char *id, struct dlk_err *err)
{
	cJSON *rec = dlk_runs_local_find(ctx->file, id, err), *doc;

	if (!rec)
		return NULL;
	doc = dlk_run_report_doc(rec, "local");
	cJSON_Delete(rec);
	return doc;
}

/* a run id of the cluster's history of the project -f names */
static cJSON *from_cluster_run(const struct dlk_ctx *ctx, const char *id, struct dlk_err *err)
{
	struct dlk_project *spec = dlk_ctx_load_spec(ctx, err);
	struct kube_client *kc = NULL;
	struct dlk_run_store *s = NULL;
	cJSON *rec = NULL, *doc = NULL;

	if (!spec)
		return dlk_err_prefix(err, "a run id names a run of the project's history, and the project cannot be read"),
		       NULL;
	kc = dlk_kube_client(ctx, err);
	s = kc ? dlk_runs_open_configmap(kc, NULL, spec->name) : NULL;
	if (s && dlk_runs_get(s, id, &rec, err) == 0)
		doc = dlk_run_report_doc(rec, "cluster");
	cJSON_Delete(rec);
	dlk_runs_close(s);
	dlk_kube_close(ctx, kc);
	project_free(spec);
	return doc;
}

/* the newest run of project name in its local history beside -f; DLK_EXIT_NOTFOUND when it has none */
static cJSON *newest_local(const struct dlk_ctx *ctx, const char *name, struct dlk_err *err)
{
	char *dir = dlk_runs_local_dir(ctx->file, name);
	struct dlk_run_store *s = dlk_runs_open_dir(dir, name);
	cJSON *recs = NULL, *doc = NULL;

	if (dlk_runs_list(s, &recs, NULL, NULL, err) == 0) {
		if (cJSON_GetArraySize(recs))
			doc = dlk_run_report_doc(cJSON_GetArrayItem(recs, 0), "local");
		else
			dlk_errf(err, DLK_EXIT_NOTFOUND, "no runs of '%s' in the local history (%s)", name, dir);
	}
	cJSON_Delete(recs);
	dlk_runs_close(s);
	free(dir);
	return doc;
}

/* SOURCE: a file (a bundle, or JSON) when one of that name exists; else, as a NAME, the
 * project's bundle NAME.dlk beside the project file, a run of the local histories, the newest run
 * of project NAME trained here, the job NAME, a run of the cluster's history (a record is a run
 * document already). A new tree the caller owns, or NULL with err. */
static cJSON *report_source(const struct dlk_ctx *ctx, const char *arg, struct dlk_err *err)
{
	struct stat st;
	cJSON *run;
	FILE *f;
	int c;

	if (!stat(arg, &st)) {
		if (S_ISDIR(st.st_mode))
			return dlk_errf(err, DLK_EXIT_USAGE, "'%s' is a directory, not a bundle or a run document", arg), NULL;
		char msg[512];
		/* a FIFO would block here forever: refused */
		f = dlk_fopen_regular(arg, msg, sizeof(msg));
		if (!f)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s", msg), NULL;
		/* JSON starts with '{' (after blanks); a bundle is a tar archive */
		while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t')
			;
		fclose(f);
		return c == '{' ? from_json_file(arg, err) : report_run_from_bundle(arg, err);
	}
	if (errno != ENOENT || strchr(arg, '/') || strchr(arg, '.'))
		/* job names have no dots or slashes: this was meant to be a file */
		return dlk_errf(err, errno == ENOENT ? DLK_EXIT_NOTFOUND : DLK_EXIT_CONFIG, "cannot open '%s': %s", arg,
		                strerror(errno)), NULL;
	/* within a project's directory: the project's bundle NAME.dlk beside its project file (a
	 * worker's bundle in some other directory is no project's: the job NAME is meant there) */
	{
		char *dir = dlk_dir_of(ctx->file), *bundle = xasprintf("%s/%s.dlk", dir, arg);
		int here = access(ctx->file, F_OK) == 0 && access(bundle, F_OK) == 0;
		run = here ? report_run_from_bundle(bundle, err) : NULL;
		free(bundle);
		free(dir);
		if (here)
			return run;
	}
	/* a run of the local histories (no cluster needed), then the newest run of the project of
	 * that name trained here, then a job, then a run of the cluster's history of the project */
	run = from_local_run(ctx, arg, err);
	if (run || err->code != DLK_EXIT_NOTFOUND)
		return run;
	dlk_err_clear(err);
	run = newest_local(ctx, arg, err);
	if (run || err->code != DLK_EXIT_NOTFOUND)
		return run;
	dlk_err_clear(err);
	run = from_job(ctx, arg, err);
	if (run)
		return run;
	if (err->code != DLK_EXIT_NOTFOUND) {
		dlk_err_prefix(err, "no file or local run '%s' here, and asking the cluster for a job of that name failed",
		               arg);
		return NULL;
	}
	if (access(ctx->file, F_OK) == 0) {
		struct dlk_err e = DLK_ERR_INIT;
		run = from_cluster_run(ctx, arg, &e);
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

/* `dlk report SWEEP`: a sweep run here (dlk sweep --local) drawn from its trials' records */
static int report_sweep(struct dlk_ctx *ctx, const char *name, int json, int yaml)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *doc = dlk_sweep_doc(ctx, name, &err);
	struct dlk_buf b = DLK_BUF_INIT;
	char *page = NULL, *text = NULL;
	int rc = 0;

	if (!doc)
		return dlk_report(ctx, &err);
	if (json || yaml) {
		text = dlk_doc_text(doc, json, &err);
		if (!text)
			rc = dlk_report(ctx, &err);
		else
			fputs(text, stdout);
	} else if (out_opt && !strcmp(out_opt, "-")) {
		if (report_sweep_html(doc, &b, &err))
			rc = dlk_report(ctx, &err);
		else
			fwrite(b.data, 1, b.len, stdout);
	} else {
		page = out_opt ? xstrdup(out_opt) : default_page(name);
		if (report_sweep_write_html(page, doc, &err))
			rc = dlk_report(ctx, &err);
		else if (!ctx->quiet)
			fprintf(stderr, "report: %s\n", page);
	}
	dlk_buf_release(&b);
	free(page);
	free(text);
	cJSON_Delete(doc);
	return rc;
}

static int run_report(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *run = NULL, *other = NULL, *doc = NULL;
	char *page = NULL, *text = NULL, *own = NULL;
	const char *name = args->n_pos ? args->pos[0] : NULL;
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
	/* within a project's directory the run is the project's own (its bundle, else its newest
	 * run trained here, else its job) */
	if (!args->n_pos && !(name = own = dlk_ctx_project_name(ctx, "run (a bundle, a run document, a run id or a job)", &err)))
		goto fail;
	if (!compare_opt && dlk_is_local_sweep(ctx, name))
		return report_sweep(ctx, name, json, yaml);
	run = report_source(ctx, name, &err);
	if (!run || (compare_opt && !(other = report_source(ctx, compare_opt, &err))))
		goto fail;
	if (json || yaml) {
		doc = report_document(run, other, &err);
		if (!doc)
			goto fail;
		text = dlk_doc_text(doc, json, &err);
		if (!text)
			goto fail;
		fputs(text, stdout);
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
	page = out_opt ? xstrdup(out_opt) : default_page(name);
	if (report_write_html(page, run, other, &err))
		goto fail;
	if (!ctx->quiet)
		fprintf(stderr, "report: %s\n", page);
	goto done;
fail:
	rc = dlk_report(ctx, &err);
done:
	free(own);
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
	.usage = "[BUNDLE.dlk|RUN.json|RUN-ID|NAME]",
	.description = "Write one self-contained HTML page about a run: its loss, accuracy and throughput\n"
	               "per epoch, resumes and worker counts, the confusion matrix, per-class precision and\n"
	               "recall, and its provenance. The run is a model bundle, a run document (.json), a run\n"
	               "id of the history, or a NAME: the bundle NAME.dlk beside the project file, else the\n"
	               "newest run of project NAME trained here, else the training job NAME in the cluster.\n"
	               "Without one, the project of -f (./dlk.yaml) is the NAME. --compare sets a second run\n"
	               "beside it.",
	.options = report_options,
	.min_pos = 0,
	.max_pos = 1,
	.complete_pos = COMPLETE_RUN,
	.run = run_report,
	.examples = "  $ dlk report\n"
	            "  $ dlk report fashion.dlk\n"
	            "  $ dlk report fashion.dlk --compare baseline.dlk -o compare.html\n"
	            "  $ dlk report fashion -o fashion.html\n"
	            "  $ dlk report fashion.dlk -o json | jq .runs[0].metrics.test_accuracy\n",
};
