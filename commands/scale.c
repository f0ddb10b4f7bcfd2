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
                              int *gpus, int *program)
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
	*gpus = spec->resources.gpus > 1 ? spec->resources.gpus : 1;
	/* the user's own program: its batch is its own business, and its pods run procs_per_worker
	 * processes (0: one per GPU) */
	if (spec->program.present) {
		*program = 1;
		if (spec->program.procs_per_worker > 0)
			*gpus = spec->program.procs_per_worker;
		goto out;
	}
	g = (long long)spec->training.batch_size * (spec->resources.workers > 0 ? spec->resources.workers : 1);
out:
	if (!g && !*program)
		dlk_warn(ctx, "the job's project cannot be read (%s); the workers check that the batch splits", err.msg);
	project_free(spec);
	cJSON_Delete(obj);
	free(cm);
	return g;
}

/* The user's own program (docs/program.md) cannot join a running gang: dlk's runs see the new
 * size and stop with a checkpoint, a program does not. Its pods of the ranks that stay are
 * evicted, so that the Job makes them again: they read the new size from the Job (as every
 * worker does when it starts) and the program resumes from its own checkpoint. An eviction marks
 * the pod DisruptionTarget, which the Job's podFailurePolicy ignores: no restart is counted.
 * `pods` is the list read before the resize (the new ranks' pods are not in it). *n: evicted. */
static int restart_program(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const cJSON *pods,
                           int workers, int *n, struct dlk_err *err)
{
	const cJSON *p;

	*n = 0;
	cJSON_ArrayForEach(p, jget(pods, "items", NULL)) {
		const cJSON *md = jget(p, "metadata", NULL), *phase = jget(jget(p, "status", NULL), "phase", NULL);
		const cJSON *nm = jget(md, "name", NULL);
		const cJSON *idx = jget(jget(md, "annotations", NULL), "batch.kubernetes.io/job-completion-index", NULL);
		if (!cJSON_IsString(nm) || jget(md, "deletionTimestamp", NULL) ||
		    (cJSON_IsString(phase) && (!strcmp(phase->valuestring, "Succeeded") || !strcmp(phase->valuestring, "Failed"))))
			continue;
		/* the pods past the new size go with the resize (the Job controller removes them) */
		if (cJSON_IsString(idx) && atoi(idx->valuestring) >= workers)
			continue;
		if (kube_evict(c, ns, nm->valuestring, err) < 0) {
			if (err->code != DLK_EXIT_NOTFOUND)
				return dlk_err_prefix(err, "the job was resized, but its program's pods cannot be restarted at "
				                      "the new size");
			dlk_err_clear(err);
			continue;
		}
		if (ctx->verbose)
			dlk_info(ctx, "evicted pod '%s'", nm->valuestring);
		(*n)++;
	}
	return 0;
}

/* What -o json prints, and what the text says. `restarted`: a program's pods evicted (-1: not
 * a program, the gang resizes itself). */
static void print_result(const struct dlk_ctx *ctx, const char *name, const char *ns, int from, int to, int waited,
                         long step, int restarted)
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
		/* how the gang changed size: dlk's own run resizes itself from a checkpoint; a program
		 * is restarted at the new size and resumes from its own checkpoint */
		if (from != to)
			cJSON_AddStringToObject(o, "how", restarted >= 0 ? "restarted" : "resized");
		if (waited && step >= 0)
			cJSON_AddNumberToObject(o, "step", (double)step);
		s = dlk_doc_text(o, ctx->output == DLK_OUTPUT_JSON, &err);
		if (s)
			fputs(s, stdout);
		free(s);
		cJSON_Delete(o);
		return;
	}
	if (ctx->quiet)
		return;
	if (from == to)
		printf("job '%s' has %d worker%s already\n", name, to, to == 1 ? "" : "s");
	else if (restarted >= 0 && waited && step > 0)
		printf("job '%s' scaled from %d to %d workers: its program was restarted at %d (%d pod%s evicted) and "
		       "trains again (step %ld), resuming from its own checkpoint\n", name, from, to, to, restarted,
		       restarted == 1 ? "" : "s", step);
	else if (restarted >= 0 && waited) /* a program that reports epochs only has no step to show */
		printf("job '%s' scaled from %d to %d workers: its program was restarted at %d (%d pod%s evicted) and "
		       "trains again, resuming from its own checkpoint\n", name, from, to, to, restarted,
		       restarted == 1 ? "" : "s");
	else if (restarted >= 0)
		printf("job '%s' scaled from %d to %d workers: its program cannot join a running gang, so it is restarted "
		       "at %d (%d pod%s evicted) and resumes from its own checkpoint (DLK_CHECKPOINT_DIR)\n", name, from, to,
		       to, restarted, restarted == 1 ? "" : "s");
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
	cJSON *job = NULL, *patch = NULL, *out = NULL, *pods = NULL;
	const cJSON *spec;
	struct dlk_job_summary s;
	int have_summary = 0, rc = 0, n = opt.workers, from, par, gpus = 1, program = 0, restarted = -1;
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
	global = global_batch(ctx, c, ns, name, &gpus, &program);
	if (global && global % ((long long)n * gpus)) {
		dlk_errf(&err, DLK_EXIT_CONFIG,
		         "job '%s' cannot train at %d workers: its global batch of %lld does not split into %d equal batches",
		         name, n, global, n * gpus);
		dlk_err_hint(&err, "choose a worker count that divides %lld (it has %d now)", global / gpus, from);
		rc = dlk_report(ctx, &err);
		goto out;
	}
	/* a program's pods as they are before the resize: those of the ranks that stay restart */
	if (program && n != from && dlk_job_list_pods(c, ns, name, &pods, &err) < 0) {
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
		/* a running Job's resourceVersion moves with its status and the progress rank 0 publishes
		 * on it: a conflict is retried on the Job as it is now, while its size is still the one
		 * read (the precondition is about the size, not about the progress) */
		for (int tries = 1;; tries++) {
			cJSON *now = NULL;
			dlk_err_clear(&err);
			if (kube_merge_patch(c, "Job", ns, name, patch, &out, &status, &err) == 0 || status != 409 || tries == 5)
				break;
			if (kube_get(c, "Job", ns, name, &now, &err) < 0)
				break;
			rv = jget(jget(now, "metadata", NULL), "resourceVersion", NULL);
			if (jint(jget(jget(now, "spec", NULL), "completions", NULL)) != from ||
			    jint(jget(jget(now, "spec", NULL), "parallelism", NULL)) != from || !cJSON_IsString(rv)) {
				cJSON_Delete(now);
				dlk_errf(&err, DLK_EXIT_FAIL, "job '%s' was resized by someone else while it was resized", name);
				status = 409;
				break;
			}
			cJSON_ReplaceItemInObject(md, "resourceVersion", cJSON_CreateString(rv->valuestring));
			cJSON_Delete(now);
		}
		if (err.msg[0]) {
			if (status == 409)
				dlk_err_hint(&err, "the job changed while it was resized; run the command again");
			else if (status == 422)
				dlk_err_hint(&err, "this cluster may not resize Indexed Jobs (Kubernetes 1.27 or later does)");
			rc = dlk_report(ctx, &err);
			goto out;
		}
		dlk_info(ctx, "job '%s': %d -> %d workers", name, from, n);
		if (program) {
			if (restart_program(ctx, c, ns, pods, n, &restarted, &err)) {
				rc = dlk_report(ctx, &err);
				goto out;
			}
			dlk_info(ctx, "job '%s' runs its own program, which does not change size while it runs: restarting "
			         "its %d pod%s at %d workers", name, restarted, restarted == 1 ? "" : "s", n);
		}
	}
	if ((opt.wait || opt.timeout_s > 0) && n != from) {
		rc = wait_for_size(ctx, c, ns, name, n, n * gpus, &step);
		if (rc)
			goto out;
		print_result(ctx, name, ns, from, n, 1, step, restarted);
	} else {
		print_result(ctx, name, ns, from, n, 0, -1, restarted);
	}
out:
	cJSON_Delete(pods);
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
	               "it trained at. A CronJob, a job that is not running or not Indexed is refused.\n"
	               "A job of your own program (program:) cannot change size while it runs: its pods are\n"
	               "evicted and start again at N, and the program resumes from its own checkpoint.",
	.options = scale_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_JOB,
	.run = run_scale,
	.examples = "  $ dlk scale mnist --workers 4\n"
	            "  $ dlk scale mnist --workers 2 --wait --timeout 10m\n"
	            "  $ dlk scale mnist --workers 3 -o json\n",
};
