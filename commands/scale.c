/* dlk scale: resize a running training job (elastic workers). An Indexed Job's completions and
 * parallelism may change together while it runs (Kubernetes' elastic Indexed Jobs): the Job
 * controller removes the pods of the indexes past the new size, or makes the new ones. Rank 0
 * reads the Job's size as it trains; on a change every rank stops after the same step with a
 * checkpoint, the pods go again (the podFailurePolicy ignores that exit), read the new size,
 * re-form the gang and go on from the checkpoint with the same global batch. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ui.h"
#include "lib/comm/rendezvous.h"
#include "lib/jobs/jobstate.h"
#include "lib/kube/api.h"
#include "lib/project/project.h"
#include "lib/train/progress.h"
#include "lib/util/clock.h"
#include "lib/util/duration.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
	int workers, wait;
	double timeout_s;
} opt;

static const cJSON *jget(const cJSON *o, const char *a, const char *b)
{
	o = cJSON_GetObjectItemCaseSensitive(o, a);
	return b ? cJSON_GetObjectItemCaseSensitive(o, b) : o;
}

static int jint(const cJSON *v)
{
	return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e9 ? (int)v->valuedouble : -1;
}

/* The run's global batch: the project's batch_size times the workers it was submitted with (what
 * the run's first checkpoint was written at), from the spec ConfigMap every worker reads. 0
 * with a warning when it cannot be read: the workers check it again. */
static long long global_batch(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name,
                              int *gpus)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *cm = xasprintf("%s-spec", name);
	cJSON *obj = NULL;
	const cJSON *y;
	struct dlk_project *spec = NULL;
	long long g = 0;

	if (kube_get(c, "ConfigMap", ns, cm, &obj, &err) < 0)
		goto out;
	y = jget(obj, "data", "dlk.yaml");
	if (!cJSON_IsString(y)) {
		dlk_errf(&err, DLK_EXIT_CONFIG, "configmap '%s' has no dlk.yaml", cm);
		goto out;
	}
	spec = project_load_mem(y->valuestring, strlen(y->valuestring), cm, NULL, 0, &err);
	if (!spec)
		goto out;
	g = (long long)spec->training.batch_size * (spec->resources.workers > 0 ? spec->resources.workers : 1);
	*gpus = spec->resources.gpus > 1 ? spec->resources.gpus : 1;
out:
	if (!g)
		dlk_warn(ctx, "the job's project cannot be read (%s); the workers check that the batch splits", err.msg);
	project_free(spec);
	cJSON_Delete(obj);
	free(cm);
	return g;
}

/* What -o json prints, and what the text says. */
static void print_result(const struct dlk_ctx *ctx, const char *name, const char *ns, int from, int to, int waited,
                         long step)
{
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		struct dlk_err err = DLK_ERR_INIT;
		cJSON *o = cJSON_CreateObject();
		char *s;
		cJSON_AddStringToObject(o, "job", name);
		cJSON_AddStringToObject(o, "namespace", ns);
		cJSON_AddNumberToObject(o, "from", from);
		cJSON_AddNumberToObject(o, "workers", to);
		cJSON_AddBoolToObject(o, "running", waited);
		if (waited && step >= 0)
			cJSON_AddNumberToObject(o, "step", (double)step);
		s = ctx->output == DLK_OUTPUT_JSON ? dlk_json_print(o) : yamljson_emit(o, &err);
		if (s) {
			fputs(s, stdout);
			if (ctx->output == DLK_OUTPUT_JSON)
				putchar('\n');
		}
		free(s);
		cJSON_Delete(o);
		return;
	}
	if (ctx->quiet)
		return;
	if (from == to)
		printf("job '%s' has %d worker%s already\n", name, to, to == 1 ? "" : "s");
	else if (waited)
		printf("job '%s' scaled from %d to %d workers; training goes on at %d (step %ld)\n", name, from, to, to, step);
	else
		printf("job '%s' scaled from %d to %d workers; the gang re-forms at the new size from its next checkpoint\n",
		       name, from, to);
}

/* Waits until the gang trains at `ranks` ranks: the progress rank 0 publishes says so (before
 * the patch it said the old size, and only a gang of the new size says the new one). */
static int wait_for_size(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name,
                         int workers, int ranks, long *step)
{
	struct dlk_progress p = { ctx, 0, 0 };
	struct dlk_err err = DLK_ERR_INIT;
	double start = dlk_now();
	char el[32], last[200] = "waiting for the workers";
	int rc = -1;

	dlk_interrupt_catch();
	for (;;) {
		cJSON *job = NULL;
		struct dlk_job_summary s;
		const cJSON *w, *st;

		if (dlk_interrupted()) {
			dlk_progress_clear(&p);
			dlk_info(ctx, "stopped waiting; job '%s' goes on resizing to %d workers", name, workers);
			return DLK_EXIT_INTERRUPTED;
		}
		if (opt.timeout_s > 0 && dlk_now() - start >= opt.timeout_s) {
			dlk_progress_clear(&p);
			dlk_duration_text(opt.timeout_s, el, sizeof(el));
			dlk_errf(&err, DLK_EXIT_TIMEOUT, "job '%s' did not train at %d workers within %s (%s)", name, workers, el,
			         last);
			dlk_err_hint(&err, "the resize goes on: 'dlk status%s %s'", dlk_ns_flag(ctx, c, ns), name);
			return dlk_report(ctx, &err);
		}
		if (dlk_read_job(ctx, c, ns, name, &job, &err) < 0) {
			dlk_progress_clear(&p);
			return dlk_report(ctx, &err);
		}
		dlk_job_summarize_job(job, &s);
		w = cJSON_GetObjectItemCaseSensitive(s.progress, DLK_PROGRESS_WORKERS);
		st = cJSON_GetObjectItemCaseSensitive(s.progress, DLK_PROGRESS_STEP);
		if (s.state == JOB_SUCCEEDED || s.state == JOB_FAILED) {
			dlk_errf(&err, DLK_EXIT_FAIL, "job '%s' %s before it trained at %d workers%s%s", name,
			         s.state == JOB_FAILED ? "failed" : "finished", workers, s.reason[0] ? ": " : "", s.reason);
			rc = 1;
		} else if (jint(w) == ranks) {
			/* only a gang of the new size publishes it: the old one said `from` */
			*step = jint(st);
			rc = 0;
		} else {
			snprintf(last, sizeof(last), "%d of %d workers ready, the gang at %s", s.ready, workers,
			         jint(w) > 0 ? "its old size" : "no size yet");
		}
		dlk_job_summary_release(&s);
		cJSON_Delete(job);
		if (rc >= 0) {
			dlk_progress_clear(&p);
			return rc ? dlk_report(ctx, &err) : 0;
		}
		dlk_duration_text(dlk_now() - start, el, sizeof(el));
		dlk_progress_draw(&p, 0, "scaling '%s' to %d workers: %s (%s)", name, workers, last, el);
		struct timespec ts = { 0, 500 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static int run_scale(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	const char *name = args->pos[0], *ns;
	cJSON *job = NULL, *patch = NULL, *out = NULL;
	const cJSON *spec;
	struct dlk_job_summary s;
	int have_summary = 0, rc = 0, n = opt.workers, from, par, gpus = 1;
	long long global;
	long status = 0, step = -1;

	if (n < 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, "'dlk scale' needs --workers N, at least 1 (a job with no workers trains "
		                               "nothing)");
		dlk_err_hint(&err, "to stop a job for good: 'dlk delete %s'", name);
		return dlk_report(ctx, &err);
	}
	c = dlk_kube_client(ctx, &err);
	if (!c)
		return dlk_report(ctx, &err);
	ns = kube_client_namespace(c);
	if (kube_get(c, "Job", ns, name, &job, &err) < 0) {
		cJSON *cj = NULL;
		struct dlk_err e2 = DLK_ERR_INIT;
		if (err.code == DLK_EXIT_NOTFOUND && kube_get(c, "CronJob", ns, name, &cj, &e2) == 0) {
			dlk_err_clear(&err);
			dlk_errf(&err, DLK_EXIT_CONFIG, "'%s' is a CronJob: its runs are Jobs of their own, started on its schedule",
			         name);
			dlk_err_hint(&err, "set resources.workers in the project and submit it again: the next run has that size");
		} else if (err.code == DLK_EXIT_NOTFOUND) {
			dlk_job_not_found(ctx, c, ns, name, &err);
		}
		cJSON_Delete(cj);
		rc = dlk_report(ctx, &err);
		goto out;
	}
	spec = jget(job, "spec", NULL);
	from = jint(jget(spec, "completions", NULL));
	par = jint(jget(spec, "parallelism", NULL));
	if (!cJSON_IsString(jget(spec, "completionMode", NULL)) ||
	    strcmp(jget(spec, "completionMode", NULL)->valuestring, "Indexed")) {
		dlk_errf(&err, DLK_EXIT_CONFIG, "job '%s' is not an Indexed Job: only an Indexed Job's size can change while it runs",
		         name);
		dlk_err_hint(&err, "dlk renders training jobs as Indexed Jobs; submit it again with 'dlk train'");
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (from < 1 || from != par) {
		dlk_errf(&err, DLK_EXIT_CONFIG,
		         "job '%s' has completions %d and parallelism %d: Kubernetes resizes an Indexed Job only when they "
		         "are equal", name, from, par);
		rc = dlk_report(ctx, &err);
		goto out;
	}
	dlk_job_summarize_job(job, &s);
	have_summary = 1;
	/* running, or resized and some of its pods still starting */
	if (s.state != JOB_RUNNING && !(s.state == JOB_PENDING && jint(jget(jget(job, "status", NULL), "active", NULL)) > 0)) {
		dlk_errf(&err, DLK_EXIT_CONFIG, "job '%s' is %s, not running: only a running job is resized", name,
		         dlk_job_state_name(s.state));
		if (s.state == JOB_PENDING || s.state == JOB_SUSPENDED)
			dlk_err_hint(&err, "wait until it runs ('dlk status%s -w %s'), or submit it again with another "
			                   "resources.workers", dlk_ns_flag(ctx, c, ns), name);
		else
			dlk_err_hint(&err, "set resources.workers in the project and submit it again");
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (n > DIST_WORLD_MAX) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--workers: %d is more than the %d workers a gang can have", n,
		         DIST_WORLD_MAX);
		rc = dlk_report(ctx, &err);
		goto out;
	}
	global = global_batch(ctx, c, ns, name, &gpus);
	if (global && global % ((long long)n * gpus)) {
		dlk_errf(&err, DLK_EXIT_CONFIG,
		         "job '%s' cannot train at %d workers: its global batch of %lld does not split into %d equal batches",
		         name, n, global, n * gpus);
		dlk_err_hint(&err, "choose a worker count that divides %lld (it has %d now)", global / gpus, from);
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (n != from) {
		patch = cJSON_CreateObject();
		cJSON *ps = cJSON_AddObjectToObject(patch, "spec"), *md = cJSON_AddObjectToObject(patch, "metadata");
		const cJSON *rv = jget(jget(job, "metadata", NULL), "resourceVersion", NULL);
		/* both at once, and only on the Job as read: the two must stay equal */
		cJSON_AddNumberToObject(ps, "completions", n);
		cJSON_AddNumberToObject(ps, "parallelism", n);
		if (cJSON_IsString(rv))
			cJSON_AddStringToObject(md, "resourceVersion", rv->valuestring);
		if (kube_merge_patch(c, "Job", ns, name, patch, &out, &status, &err) < 0) {
			if (status == 409)
				dlk_err_hint(&err, "the job changed while it was resized; run the command again");
			else if (status == 422)
				dlk_err_hint(&err, "this cluster may not resize Indexed Jobs (Kubernetes 1.27 or later does)");
			rc = dlk_report(ctx, &err);
			goto out;
		}
		dlk_info(ctx, "job '%s': %d -> %d workers", name, from, n);
	}
	if ((opt.wait || opt.timeout_s > 0) && n != from) {
		rc = wait_for_size(ctx, c, ns, name, n, n * gpus, &step);
		if (rc)
			goto out;
		print_result(ctx, name, ns, from, n, 1, step);
	} else {
		print_result(ctx, name, ns, from, n, 0, -1);
	}
out:
	if (have_summary)
		dlk_job_summary_release(&s);
	dlk_kube_close(ctx, c);
	cJSON_Delete(out);
	cJSON_Delete(patch);
	cJSON_Delete(job);
	return rc;
}

static const struct dlk_option scale_options[] = {
	OPT_INT(0, "workers", &opt.workers, "N", 0, "the number of workers (pods) the job trains with from now on", .flags = OPT_HIDE_DEFAULT,
	        .min = 0, .max = 1 << 20),
	OPT_BOOL(0, "wait", &opt.wait, "wait until the gang trains at the new size"),
	OPT_DURATION(0, "timeout", &opt.timeout_s, "DURATION", "give up waiting after this long, e.g. 90s (implies --wait)"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_scale = {
	.usage = "NAME --workers N",
	.description = "Resize the running training job NAME to N workers. Its Indexed Job's completions and\n"
	               "parallelism change together; the workers past N are removed, or new ones start. Rank 0\n"
	               "sees the change within DLK_RESIZE_POLL seconds (10): every worker stops after the same\n"
	               "step with a checkpoint, and the gang re-forms at N from it with the same global batch\n"
	               "(each worker takes global / N), so N must divide it. The run's record lists each size\n"
	               "it trained at. A CronJob, a job that is not running or not Indexed is refused.",
	.options = scale_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_JOB,
	.run = run_scale,
	.examples = "  $ dlk scale mnist --workers 4\n"
	            "  $ dlk scale mnist --workers 2 --wait --timeout 10m\n"
	            "  $ dlk scale mnist --workers 3 -o json\n",
};
