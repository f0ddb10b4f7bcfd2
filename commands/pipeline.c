/* dlk pipeline: stages over versioned data (lib/pipeline). `run --local` runs them here, reusing
 * every stage whose key an earlier run recorded; `status` shows the last run's stages; `logs`
 * prints a stage's log. This file finds the pipeline file, opens its store and shows notes. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/jobs/jobdelete.h"
#include "lib/jobs/logarchive.h"
#include "lib/jobs/submit.h"
#include "lib/kube/api.h"
#include "lib/kube/client.h"
#include "lib/pipeline/cluster.h"
#include "lib/pipeline/drive.h"
#include "lib/pipeline/pipeline.h"
#include "lib/util/clock.h"
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
#include <time.h>
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

static int run_run(struct dlk_ctx *ctx, struct dlk_args *args);

/* ---- the cluster: submit, and the driver in its pod ---- */

static int run_wait;

static void nap(void)
{
	struct timespec ts = { 0, 500 * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

static const char *annotation(const cJSON *o, const char *key)
{
	return jstr(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations"), key);
}

/* Sends the pipeline's objects (or prints them). The driver's Job of an earlier run is deleted
 * first when it has ended (a Job's pod template cannot change); one still running is a refusal. */
static int submit(struct dlk_ctx *ctx, const struct dlk_pipeline *p, int dry, struct dlk_err *err)
{
	cJSON *objs = dlk_pipeline_render_cluster(p, ctx->namespace_, err), *old = NULL;
	struct kube_client *c = NULL;
	char *driver = dlk_pipeline_driver_name(p);
	const char *ns;
	int rc = -1;

	if (!objs)
		goto out;
	if (dry) {
		rc = dlk_print_objects(ctx, objs, err) ? -1 : 0;
		goto out;
	}
	if (!(c = dlk_kube_client(ctx, err)))
		goto out;
	ns = ctx->namespace_ ? ctx->namespace_ : kube_client_namespace(c);
	if (!p->schedule && !p->data_changed && kube_get(c, "Job", ns, driver, &old, err) == 0) {
		if (!strcmp(dlk_pipeline_job_state(old), "running")) {
			dlk_errf(err, DLK_EXIT_EXISTS, "pipeline %s is running in namespace '%s' (job '%s')", p->name, ns, driver);
			dlk_err_hint(err, "follow it with 'dlk pipeline status %s', or delete its job to start again", p->name);
			goto out;
		}
		if (kube_delete(c, "Job", ns, driver, err) < 0 || dlk_wait_job_gone(c, ns, driver, 60, err) < 0)
			goto out;
	} else if (old == NULL && err->code && err->code != DLK_EXIT_NOTFOUND) {
		goto out;
	}
	dlk_err_clear(err);
	if (dlk_submit_objects(c, objs, NULL, err) < 0)
		goto out;
	dlk_kube_warnings(ctx, c);
	dlk_info(ctx, "pipeline %s submitted: its driver is %s '%s' in namespace '%s'", p->name,
	         p->schedule || p->data_changed ? "the CronJob" : "the job", driver, ns);
	if (run_wait && !p->schedule && !p->data_changed) {
		/* the driver's own Job says how the run ended */
		const char *state = "running";
		dlk_interrupt_catch();
		while (!dlk_interrupted()) {
			cJSON_Delete(old);
			old = NULL;
			if (kube_get(c, "Job", ns, driver, &old, err) < 0)
				goto out;
			state = dlk_pipeline_job_state(old);
			if (strcmp(state, "running"))
				break;
			nap();
		}
		if (!strcmp(state, "running")) {
			dlk_errf(err, DLK_EXIT_FAIL, "stopped waiting; pipeline %s goes on in the cluster", p->name);
			goto out;
		}
		if (strcmp(state, "succeeded")) {
			dlk_errf(err, DLK_EXIT_FAIL, "pipeline %s failed in the cluster", p->name);
			dlk_err_hint(err, "'dlk pipeline status %s' names the stage; 'dlk pipeline logs %s STAGE' shows its log",
			             p->name, p->name);
			goto out;
		}
		dlk_info(ctx, "pipeline %s: done ('dlk pipeline status %s' shows its stages)", p->name, p->name);
	}
	rc = 0;
out:
	cJSON_Delete(old);
	cJSON_Delete(objs);
	dlk_kube_close(ctx, c);
	free(driver);
	return rc;
}

/* The driver (`dlk pipeline drive`, in its pod): lib/pipeline/drive.c creates the stage Jobs of
 * the pipeline's ConfigMap through the API; run_run opens the store and calls it. */
static struct dlk_pipeline_api *drive_api;
static const cJSON *drive_jobs;

static int run_drive(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pipeline p = DLK_PIPELINE_INIT;
	struct dlk_pipeline_kube k = { 0 };
	struct dlk_pipeline_api api;
	cJSON *cm = NULL, *jobs = NULL;
	char *cm_name = NULL;
	int rc;

	if (load(ctx, &p, &err))
		goto fail;
	if (!(k.client = dlk_kube_client(ctx, &err)))
		goto fail;
	k.namespace_ = ctx->namespace_ ? ctx->namespace_ : kube_client_namespace(k.client);
	cm_name = dlk_pipeline_jobs_config_map(&p);
	if (kube_get(k.client, "ConfigMap", k.namespace_, cm_name, &cm, &err) < 0 ||
	    !(jobs = dlk_pipeline_stage_jobs(cm, cm_name, &err)))
		goto fail;
	dlk_pipeline_api_kube(&api, &k);
	drive_api = &api;
	drive_jobs = jobs;
	run_mode = RUN_LOCAL;
	rc = run_run(ctx, args);
	drive_api = NULL;
	drive_jobs = NULL;
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	cJSON_Delete(cm);
	cJSON_Delete(jobs);
	free(cm_name);
	dlk_kube_close(ctx, k.client);
	dlk_pipeline_release(&p);
	return rc;
}

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

	if (load(ctx, &p, &err))
		goto fail;
	if (run_mode == RUN_SUBMIT || (run_mode == RUN_DRY && strstr(p.store, "://") && strncmp(p.store, "file://", 7))) {
		/* a store the pods reach: the cluster's objects (--dry-run prints them, and below says
		   which stages would run when this machine reaches the store too) */
		if (args->n_pos || run_force.n || run_parallel > 1) {
			dlk_errf(&err, DLK_EXIT_USAGE, "STAGE..., --force and --parallel go with --local for now");
			goto fail;
		}
		rc = submit(ctx, &p, run_mode == RUN_DRY, &err);
		if (rc < 0)
			goto fail;
		if (run_mode != RUN_DRY)
			goto out;
	}
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
	if (dlk_data_store_open(ctx, store_url, NULL, &ds, &err)) {
		if (run_mode == RUN_DRY && rc == 0 && strstr(p.store, "://") && strncmp(p.store, "file://", 7)) {
			/* the objects are printed: which stages would run needs the store from here too */
			dlk_warn(ctx, "cannot say which stages would run: %s", err.msg);
			goto out;
		}
		goto fail;
	}
	o.self = self;
	o.store = ds.store;
	o.store_url = store_url;
	o.rank = getenv("DLK_PIPELINE_RANK"); /* a pod of an N-worker predict stage's Job (lib/pipeline/cluster.c) */
	o.only = (const char *const *)args->pos;
	o.n_only = (size_t)args->n_pos;
	o.force = (const char *const *)run_force.v;
	o.n_force = run_force.n;
	o.dry_run = run_mode == RUN_DRY;
	o.parallel = run_parallel;
	if (drive_api) {
		/* the status goes on the driver's own Job: NAME-pipeline, or the Job a CronJob started */
		char *driver = getenv("DLK_JOB_NAME") && *getenv("DLK_JOB_NAME") ? xstrdup(getenv("DLK_JOB_NAME"))
		                                                                 : dlk_pipeline_driver_name(&p);
		rc = dlk_pipeline_drive(&p, drive_jobs, drive_api, driver, &o, &sink, &err);
		free(driver);
	} else {
		rc = dlk_pipeline_run_local(&p, &o, &sink, &err);
	}
	if (!o.dry_run && (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML)) {
		/* the stages as status shows them, also when one failed */
		struct dlk_err serr = DLK_ERR_INIT;
		cJSON *st = dlk_pipeline_read_status(&p, &serr);
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
	OPT_MODE("dry-run", &run_mode, RUN_DRY, "say which stages would run and which would be reused, with their keys; "
	                                       "with a store the cluster reaches, print the objects it would send"),
	OPT_BOOL(0, "wait", &run_wait, "on a cluster: wait for the driver to end; the exit code says how it ended"),
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

static const struct dlk_option drive_options[] = {
	OPT_STRING(0, "pipeline", &pipeline_file, "FILE", NULL, "the pipeline file",
	           .def_doc = DLK_PIPELINE_FILE " beside the project file", .complete = COMPLETE_FILE),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_pipeline_drive = {
	.usage = "",
	.description = "Run in the pod of a pipeline's driver Job (what 'dlk pipeline run' submits): decide the stages\n"
	               "in dependency order by their keys, and create the Job of each stage whose key has no output\n"
	               "in the store, one at a time, from the pipeline's ConfigMap NAME-pipeline-jobs; a stage Job\n"
	               "a stopped driver left running is followed, not started again.",
	.options = drive_options,
	.min_pos = 0,
	.max_pos = 0,
	.run = run_drive,
	.examples = "  $ dlk pipeline drive --pipeline dlk-pipeline.yaml\n",
};

/* ---- status ---- */

/* Prints the status document st: as it is for -o json/yaml, else a table. */
static int show_status(const struct dlk_ctx *ctx, const struct dlk_pipeline *p, const cJSON *st, struct dlk_err *err)
{
	const cJSON *s;

	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		return dlk_doc_print(stdout, st, ctx->output == DLK_OUTPUT_JSON, err);
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

/* dlk pipeline status NAME: from the cluster, the Jobs labelled dlk.dev/pipeline=NAME (driver
 * runs and stage Jobs), then each run of the driver, newest first (its Job, or each Job its
 * CronJob started), with the stages it published on its Job when it ended */
static int cluster_status(struct dlk_ctx *ctx, const char *name)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	struct dlk_pipeline fake = DLK_PIPELINE_INIT;
	cJSON *list = NULL, *runs = NULL, *doc = NULL;
	const cJSON *j, *r;
	char *sel = xasprintf("%s=%s", DLK_PIPELINE_LABEL, name);
	const char *ns;
	int rc = 0;

	fake.name = (char *)name;
	if (!(c = dlk_kube_client(ctx, &err)))
		goto fail;
	ns = ctx->namespace_ ? ctx->namespace_ : kube_client_namespace(c);
	lo.label_selector = sel;
	if (kube_list(c, "Job", ns, &lo, &list, &err) < 0)
		goto fail;
	if (!cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "items"))) {
		dlk_errf(&err, DLK_EXIT_NOTFOUND, "pipeline '%s' has no jobs in namespace '%s'", dlk_visible(name), ns);
		dlk_err_hint(&err, "start it with 'dlk pipeline run'; 'dlk pipeline status' (no NAME) shows a run here");
		goto fail;
	}
	runs = dlk_pipeline_driver_runs(cJSON_GetObjectItemCaseSensitive(list, "items"), name);
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		/* the newest run's stages that has published them, and every run */
		cJSON_ArrayForEach(r, runs)
			if (!doc && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "status")))
				doc = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(r, "status"), 1);
		if (!doc)
			doc = cJSON_CreateObject();
		cJSON_AddItemToObject(doc, "runs", runs);
		runs = NULL;
		if (show_status(ctx, &fake, doc, &err))
			goto fail;
		goto out;
	}
	printf("%-32s %-10s %s\n", "JOB", "STATE", "KEY");
	cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(list, "items"))
	{
		const char *key = annotation(j, DLK_PIPELINE_KEY_ANNOTATION);
		printf("%-32s %-10s %.12s\n", dlk_visible(kube_meta(j, "name")), dlk_pipeline_job_state(j), key ? key : "-");
	}
	cJSON_ArrayForEach(r, runs)
	{
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
		printf("\nrun of job %s: %s, started %s\n", dlk_visible(jstr(r, "job")), jstr(r, "state"),
		       jstr(r, "created") ? dlk_visible(jstr(r, "created")) : "-");
		if (cJSON_IsObject(st))
			show_status(ctx, &fake, st, &err);
		else
			printf("  (no stages published: %s)\n", !strcmp(jstr(r, "state"), "running") ? "it is running"
			                                                                            : "it ended before it could");
	}
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	cJSON_Delete(list);
	cJSON_Delete(runs);
	cJSON_Delete(doc);
	dlk_kube_close(ctx, c);
	free(sel);
	return rc;
}

static int run_status(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pipeline p = DLK_PIPELINE_INIT;
	cJSON *st = NULL;
	int rc = 0;

	if (args->n_pos)
		return cluster_status(ctx, args->pos[0]);
	if (load(ctx, &p, &err) || !(st = dlk_pipeline_read_status(&p, &err)) || show_status(ctx, &p, st, &err))
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
	.usage = "[NAME]",
	.description = "Show the stages of the pipeline's last run here: kind, state (succeeded, reused, failed,\n"
	               "blocked), the output dataset's id and the run that made it. -o json gives the same.\n"
	               "With NAME, the pipeline NAME in the cluster: its Jobs (driver and stages) with their state\n"
	               "and key, then each run of its driver, newest first (its Job, or each Job its CronJob\n"
	               "started), with the stages that run published when it ended; -o json: the newest\n"
	               "published status with \"runs\" added.",
	.options = status_options,
	.min_pos = 0,
	.max_pos = 1,
	.run = run_status,
	.examples = "  $ dlk pipeline status\n"
	            "  $ dlk pipeline status -o json\n"
	            "  $ dlk pipeline status fashion\n",
};

/* ---- logs ---- */

static int print_line(const char *line, size_t len, void *ud)
{
	(void)ud;
	dlk_put_text(stdout, line, len);
	fputc('\n', stdout);
	return 0;
}

static const char *logs_from;

/* Once a stage's pods are gone: its worker's archive on the pipeline's log_claim (the pipeline
 * file's, when it is pipeline name's), or under --from. */
static int archived_logs(struct dlk_ctx *ctx, const char *name, const char *stage, struct dlk_err *err)
{
	struct dlk_pipeline p = DLK_PIPELINE_INIT;
	struct dlk_err lerr = DLK_ERR_INIT;
	struct dlk_data_store ds = { 0 };
	char *url = NULL, run[96];
	int rc = -1;

	if (logs_from) {
		url = xasprintf("%s/%s-%s", logs_from, name, stage);
	} else if (!load(ctx, &p, &lerr) && !strcmp(p.name, name) && p.log_claim) {
		url = xasprintf("pvc://%s/%s/%s-%s", p.log_claim, DLK_LOG_ARCHIVE_DIR, name, stage);
	} else {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "stage '%s' of pipeline '%s' has no pod: it was reused, has not run, or its "
		         "job was deleted; and its log was not archived", dlk_visible(stage), dlk_visible(name));
		dlk_err_hint(err, "'dlk pipeline status %s' shows its stages; give the pipeline log_claim: to archive the "
		             "stages' logs (docs/pipelines.md), or --from where they are", name);
		goto out;
	}
	if (dlk_data_store_open(ctx, url, NULL, &ds, err) || dlk_pipeline_archived_log(ds.store, print_line, NULL, run, err)) {
		dlk_err_prefix(err, "stage '%s' has no pod, and its archived log", dlk_visible(stage));
		goto out;
	}
	fflush(stdout);
	dlk_info(ctx, "stage %s: its pods are gone; the log above is its worker's archive of run %s (%s)", stage, run, url);
	rc = 0;
out:
	dlk_data_store_release(&ds);
	dlk_pipeline_release(&p);
	free(url);
	return rc;
}

/* dlk pipeline logs NAME STAGE: the log of the newest pod of the stage's Job in the cluster, or
 * once its pods are gone the archive of it */
static int cluster_logs(struct dlk_ctx *ctx, const char *name, const char *stage)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	struct kube_log_opts logo = KUBE_LOG_OPTS_INIT;
	cJSON *list = NULL;
	const cJSON *pod, *newest = NULL;
	char *sel = xasprintf("batch.kubernetes.io/job-name=%s-%s,%s=%s", name, stage, DLK_PIPELINE_LABEL, name);
	const char *ns;
	int rc = 0;

	if (!(c = dlk_kube_client(ctx, &err)))
		goto fail;
	ns = ctx->namespace_ ? ctx->namespace_ : kube_client_namespace(c);
	lo.label_selector = sel;
	if (kube_list(c, "Pod", ns, &lo, &list, &err) < 0)
		goto fail;
	cJSON_ArrayForEach(pod, cJSON_GetObjectItemCaseSensitive(list, "items"))
		if (!newest || strcmp(kube_meta(pod, "creationTimestamp"), kube_meta(newest, "creationTimestamp")) >= 0)
			newest = pod;
	if (!newest) {
		if (archived_logs(ctx, name, stage, &err))
			goto fail;
		goto out;
	}
	if (kube_logs(c, ns, kube_meta(newest, "name"), &logo, print_line, NULL, &err) < 0)
		goto fail;
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	cJSON_Delete(list);
	dlk_kube_close(ctx, c);
	free(sel);
	return rc;
}

static int run_logs(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pipeline p = DLK_PIPELINE_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256], *path = NULL;
	int rc = 0;

	if (args->n_pos == 2)
		return cluster_logs(ctx, args->pos[0], args->pos[1]);
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

static const struct dlk_option logs_options[] = {
	OPT_STRING(0, "pipeline", &pipeline_file, "FILE", NULL, "the pipeline file",
	           .def_doc = DLK_PIPELINE_FILE " beside the project file", .complete = COMPLETE_FILE),
	OPT_STRING(0, "from", &logs_from, "STORE", NULL,
	           "with NAME: where the stages' logs are archived (the folder holding NAME-STAGE/)",
	           .def_doc = "pvc://LOG_CLAIM/dlk-logs of the pipeline file", .complete = COMPLETE_DIR),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_pipeline_logs = {
	.usage = "[NAME] STAGE",
	.description = "Print the log (standard output and error) of STAGE's last run here; with NAME, the log of\n"
	               "the newest pod of STAGE's Job of pipeline NAME in the cluster, or once its pods are gone\n"
	               "the log its worker archived on the pipeline's log_claim (its newest run).",
	.options = logs_options,
	.min_pos = 1,
	.max_pos = 2,
	.run = run_logs,
	.examples = "  $ dlk pipeline logs train\n"
	            "  $ dlk pipeline logs fashion train\n",
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
