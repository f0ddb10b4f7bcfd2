/* dlk pipeline: stages over versioned data (lib/pipeline). `run --local` runs them here, reusing
 * every stage whose key an earlier run recorded; `status` shows the last run's stages; `logs`
 * prints a stage's log. This file finds the pipeline file, opens its store and shows notes. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/pipeline/pipeline.h"
#include "lib/store/store.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *pipeline_file;

/* The pipeline file: --pipeline, else dlk-pipeline.yaml beside the project file (-f). */
static char *pipeline_path(const struct dlk_ctx *ctx)
{
	char *dir, *path;

	if (pipeline_file)
		return xstrdup(pipeline_file);
	dir = dlk_dir_of(ctx->file);
	path = !strcmp(dir, ".") ? xstrdup(DLK_PIPELINE_FILE) : xasprintf("%s/%s", dir, DLK_PIPELINE_FILE);
	free(dir);
	return path;
}

static int load(const struct dlk_ctx *ctx, struct dlk_pipeline *p, struct dlk_err *err)
{
	char *path = pipeline_path(ctx);
	int rc = dlk_pipeline_load(path, p, err);

	if (rc && access(path, F_OK))
		dlk_err_hint(err, "write one (docs/pipelines.md), or start from 'dlk init --example pipeline DIR'");
	free(path);
	return rc;
}

static void pipeline_note(void *ud, int warn, const char *msg)
{
	const struct dlk_ctx *ctx = ud;

	if (warn)
		dlk_warn(ctx, "%s", msg);
	else
		dlk_info(ctx, "%s", msg);
}

static cJSON *read_status(const struct dlk_pipeline *p, struct dlk_err *err)
{
	char *dir = dlk_pipeline_state_dir(p), *path = xasprintf("%s/status.json", dir);
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256];
	cJSON *j = NULL;

	if (dlk_buf_read_file(&b, path, 16u << 20, msg, sizeof(msg)))
		dlk_errf(err, DLK_EXIT_NOTFOUND, "pipeline %s has not run here (%s)", p->name, msg);
	else if (!(j = cJSON_ParseWithLength(b.data, b.len)) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "stages"))) {
		cJSON_Delete(j);
		j = NULL;
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is not a pipeline status; run the pipeline again", path);
	}
	dlk_buf_release(&b);
	free(path);
	free(dir);
	return j;
}

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int show_status(const struct dlk_ctx *ctx, const struct dlk_pipeline *p, const cJSON *st, struct dlk_err *err);

/* ---- run ---- */

enum { RUN_SUBMIT, RUN_LOCAL, RUN_DRY };
static int run_mode, run_parallel;
static struct dlk_strlist run_force;

static int run_run(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pipeline p = DLK_PIPELINE_INIT;
	struct dlk_pipeline_run_opts o = { 0 };
	struct dlk_pipeline_sink sink = { pipeline_note, ctx };
	struct dlk_data_store ds = { 0 };
	char self[4096], *store_url = NULL;
	ssize_t n;
	int rc = 0;

	if (run_mode == RUN_SUBMIT) {
		dlk_errf(&err, DLK_EXIT_USAGE, "a pipeline runs here for now: give --local (or --dry-run)");
		dlk_err_hint(&err, "its stages as Jobs driven in the cluster are not there yet (docs/pipelines.md)");
		return dlk_report(ctx, &err);
	}
	if (load(ctx, &p, &err))
		goto fail;
	/* train and predict stages are this very binary */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		dlk_errf(&err, DLK_EXIT_FAIL, "cannot find the dlk binary (/proc/self/exe) to run the stages");
		goto fail;
	}
	self[n] = 0;
	/* a relative store is relative to the pipeline file, for this process and the stages' */
	if (strstr(p.store, "://") || p.store[0] == '/') {
		store_url = xstrdup(p.store);
	} else {
		char cwd[4096];
		const char *rel = p.store;
		while (!strncmp(rel, "./", 2))
			rel += 2;
		if (p.dir[0] == '/')
			store_url = xasprintf("%s/%s", p.dir, rel);
		else if (!getcwd(cwd, sizeof(cwd)))
			store_url = xasprintf("%s/%s", p.dir, rel);
		else if (!strcmp(p.dir, "."))
			store_url = xasprintf("%s/%s", cwd, rel);
		else
			store_url = xasprintf("%s/%s/%s", cwd, p.dir, rel);
	}
	if (dlk_data_store_open(ctx, store_url, NULL, &ds, &err))
		goto fail;
	o.self = self;
	o.store = ds.store;
	o.store_url = store_url;
	o.only = (const char *const *)args->pos;
	o.n_only = (size_t)args->n_pos;
	o.force = (const char *const *)run_force.v;
	o.n_force = run_force.n;
	o.dry_run = run_mode == RUN_DRY;
	o.parallel = run_parallel;
	rc = dlk_pipeline_run_local(&p, &o, &sink, &err);
	if (!o.dry_run && (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML)) {
		/* the stages as status shows them, also when one failed */
		struct dlk_err serr = DLK_ERR_INIT;
		cJSON *st = read_status(&p, &serr);
		if (st)
			show_status(ctx, &p, st, &serr);
		cJSON_Delete(st);
	}
	if (rc)
		goto fail;
	if (!o.dry_run)
		dlk_info(ctx, "pipeline %s: done ('dlk pipeline status' shows its stages)", p.name);
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	dlk_data_store_release(&ds);
	free(store_url);
	dlk_pipeline_release(&p);
	return rc;
}

static const struct dlk_option run_options[] = {
	OPT_MODE("local", &run_mode, RUN_LOCAL, "run the stages on this machine"),
	OPT_MODE("dry-run", &run_mode, RUN_DRY, "say which stages would run and which would be reused, with their keys"),
	OPT_LIST(0, "force", &run_force, "STAGE", "run STAGE again even when its key is known (repeatable)"),
	OPT_INT(0, "parallel", &run_parallel, "N", 1, "run up to N stages at once, those whose inputs are ready",
	        .min = 1, .max = 64),
	OPT_STRING(0, "pipeline", &pipeline_file, "FILE", NULL, "the pipeline file",
	           .def_doc = DLK_PIPELINE_FILE " beside the project file", .complete = COMPLETE_FILE),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_pipeline_run = {
	.usage = "[STAGE...]",
	.description = "Run the pipeline's stages in dependency order (with STAGE..., those stages and what they\n"
	               "read). A stage whose key (its inputs' ids, program, code, parameters) an earlier run\n"
	               "recorded, with its output still in the store, is reused, not run. Each stage run pushes\n"
	               "its output as a dataset with its provenance and writes a run record; a stage that fails\n"
	               "stops the stages below it, and the exit code is 1.",
	.options = run_options,
	.default_mode = "submitting",
	.min_pos = 0,
	.max_pos = -1,
	.run = run_run,
	.examples = "  $ dlk init --example pipeline fpipe && cd fpipe && dlk pipeline run --local\n"
	            "  $ dlk pipeline run --local predict\n"
	            "  $ dlk pipeline run --local --force train\n"
	            "  $ dlk pipeline run --dry-run\n",
};

/* ---- status ---- */

/* Prints the status document st: as it is for -o json/yaml, else a table. */
static int show_status(const struct dlk_ctx *ctx, const struct dlk_pipeline *p, const cJSON *st, struct dlk_err *err)
{
	const cJSON *s;

	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		char *text = ctx->output == DLK_OUTPUT_JSON ? dlk_json_print(st) : yamljson_emit(st, err);
		if (!text)
			return -1;
		fputs(text, stdout);
		if (ctx->output == DLK_OUTPUT_JSON)
			fputc('\n', stdout);
		free(text);
		return 0;
	}
	printf("pipeline %s (%s)\n", dlk_visible(p->name), dlk_visible(jstr(st, "finished_at") ? jstr(st, "finished_at")
	                                                                                    : "running or stopped"));
	printf("%-16s %-8s %-10s %-30s %s\n", "STAGE", "KIND", "STATE", "OUTPUT", "RUN");
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(st, "stages"))
	{
		const char *id = jstr(s, "output_id"), *run = jstr(s, "run_id"), *from = jstr(s, "reused_from_run");
		char out[128];
		snprintf(out, sizeof(out), "%s%s%.12s", jstr(s, "output") ? jstr(s, "output") : "", id ? " " : "",
		         id && strlen(id) > 7 ? id + 7 : "");
		printf("%-16s %-8s %-10s %-30s %s%s\n", dlk_visible(jstr(s, "name")), dlk_visible(jstr(s, "kind")),
		       dlk_visible(jstr(s, "state")), dlk_visible(out), from ? "from " : "",
		       dlk_visible(from ? from : run ? run : "-"));
		if (jstr(s, "reason"))
			printf("  %s\n", dlk_visible(jstr(s, "reason")));
	}
	return 0;
}

static int run_status(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pipeline p = DLK_PIPELINE_INIT;
	cJSON *st = NULL;
	int rc = 0;

	(void)args;
	if (load(ctx, &p, &err) || !(st = read_status(&p, &err)) || show_status(ctx, &p, st, &err))
		rc = dlk_report(ctx, &err);
	cJSON_Delete(st);
	dlk_pipeline_release(&p);
	return rc;
}

static const struct dlk_option status_options[] = {
	OPT_STRING(0, "pipeline", &pipeline_file, "FILE", NULL, "the pipeline file",
	           .def_doc = DLK_PIPELINE_FILE " beside the project file", .complete = COMPLETE_FILE),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_pipeline_status = {
	.usage = "",
	.description = "Show the stages of the pipeline's last run here: kind, state (succeeded, reused, failed,\n"
	               "blocked), the output dataset's id and the run that made it. -o json gives the same.",
	.options = status_options,
	.min_pos = 0,
	.max_pos = 0,
	.run = run_status,
	.examples = "  $ dlk pipeline status\n"
	            "  $ dlk pipeline status -o json\n",
};

/* ---- logs ---- */

static int run_logs(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pipeline p = DLK_PIPELINE_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256], *path = NULL;
	int rc = 0;

	if (load(ctx, &p, &err))
		goto fail;
	if (dlk_pipeline_stage(&p, args->pos[0]) < 0) {
		dlk_errf(&err, DLK_EXIT_NOTFOUND, "no stage '%s' in %s", dlk_visible(args->pos[0]), p.file);
		goto fail;
	}
	path = dlk_pipeline_log_path(&p, args->pos[0]);
	if (dlk_buf_read_file(&b, path, 256u << 20, msg, sizeof(msg))) {
		dlk_errf(&err, DLK_EXIT_NOTFOUND, "stage '%s' has no log here ('%s': %s): it has not run, or was reused",
		         args->pos[0], path, msg);
		goto fail;
	}
	dlk_put_text(stdout, b.data ? b.data : "", b.len);
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	dlk_buf_release(&b);
	free(path);
	dlk_pipeline_release(&p);
	return rc;
}

const struct dlk_command_def dlk_cmd_pipeline_logs = {
	.usage = "STAGE",
	.description = "Print the log (standard output and error) of STAGE's last run here.",
	.options = status_options,
	.min_pos = 1,
	.max_pos = 1,
	.run = run_logs,
	.examples = "  $ dlk pipeline logs train\n",
};

/* ---- the parent ---- */

const struct dlk_command_def dlk_cmd_pipeline = {
	.usage = "",
	.description = "Pipelines over versioned data: stages in dlk-pipeline.yaml that read datasets or each\n"
	               "other's outputs and write datasets, run in dependency order; a stage runs again only\n"
	               "when its key (inputs' ids, program, code, parameters) is new.",
	.min_pos = 0,
	.max_pos = -1,
	.examples = "  $ dlk pipeline run --local\n"
	            "  $ dlk pipeline status\n"
	            "  $ dlk pipeline logs prepare\n",
};
