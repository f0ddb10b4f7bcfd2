/* dlk train (no mode flag): submit the rendered objects to the cluster and, with --wait or
 * --follow, stay until the job ends. What is applied is exactly what --dry-run prints: both
 * come from render_train_project(). */
#include "commands/train_submit.h"
#include "commands/cluster.h"
#include "commands/ui.h"
#include "lib/jobs/jobdelete.h"
#include "lib/jobs/jobrun.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/jobwatch.h"
#include "lib/jobs/submit.h"
#include "lib/jobs/logfollow.h"
#include "lib/kube/api.h"
#include "lib/project/check.h"
#include "lib/render/render.h"
#include "lib/report/report.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/fsutil.h"
#include "lib/util/duration.h"
#include "lib/util/git.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

#define REPLACE_WAIT_S 300.0 /* how long --replace waits for the old job to go, without --timeout */
#define FOLLOW_DRAIN_S 10.0  /* after the job ended, how long log streams may take to finish */

static const cJSON *main_object(const cJSON *objects)
{
	const cJSON *o, *found = NULL;

	cJSON_ArrayForEach(o, objects) {
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "kind");
		if (cJSON_IsString(k) && (!strcmp(k->valuestring, "Job") || !strcmp(k->valuestring, "CronJob")))
			found = o;
	}
	return found;
}

static void failure_hint(struct dlk_err *err, const struct dlk_job_summary *s, const char *nsflag)
{
	const struct dlk_rank *r = s->failed_rank >= 0 ? &s->ranks[s->failed_rank] : NULL;

	if (r && !strcmp(r->reason, "OOMKilled"))
		dlk_err_hint(err, "rank %d ran out of memory: raise resources.memory in dlk.yaml or lower "
			     "training.batch_size; its log: 'dlk logs%s --rank %d %s'", r->rank, nsflag, r->rank, s->name);
	else if (r)
		dlk_err_hint(err, "see what rank %d printed: 'dlk logs%s --rank %d %s'", r->rank, nsflag, r->rank, s->name);
	else
		dlk_err_hint(err, "see 'dlk status%s %s' and 'dlk logs%s %s'", nsflag, s->name, nsflag, s->name);
}

/* Watches the job until it ends. Returns the exit code (reports errors itself). */
static int wait_for_job(struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, double timeout_s,
			int follow)
{
	struct dlk_jobwatch w;
	struct dlk_logfollow *lf = NULL;
	struct dlk_progress p = { ctx, 0, 0 };
	struct dlk_err err = DLK_ERR_INIT;
	const char *nsflag = dlk_ns_flag(ctx, c, ns);
	char nsf[96];
	double start = dlk_now(), ended_at = -1, events_at = -1;
	cJSON *events = NULL;
	unsigned seen = 0;
	int rc = -1, last_state = -1;
	char last_line[600] = "";

	snprintf(nsf, sizeof(nsf), "%s", nsflag);
	if (dlk_watch_jobs(ctx, &w, ns, name, &err) < 0) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (follow) {
		struct dlk_log_opts lo = { -1, -1, 0, 0, 0 };
		lf = dlk_logfollow_new(&w.open, ns, &lo, dlk_print_log_line, dlk_print_note, ctx);
	}
	for (;;) {
		struct dlk_job_summary s;
		char prog[160], el[32], line[600];
		int have = 0;

		dlk_jobwatch_wait(&w, &seen, 0.25);
		if (dlk_interrupted()) {
			dlk_progress_clear(&p);
			dlk_info(ctx, "stopped waiting; job '%s' keeps running (nothing was deleted)", name);
			dlk_info(ctx, "watch it again with 'dlk status%s -w %s' or 'dlk logs%s -f %s'", nsf, name, nsf, name);
			rc = DLK_EXIT_INTERRUPTED;
			goto out;
		}
		if (timeout_s > 0 && dlk_now() - start >= timeout_s) {
			dlk_progress_clear(&p);
			dlk_duration_text(timeout_s, el, sizeof(el));
			dlk_errf(&err, DLK_EXIT_TIMEOUT, "job '%s' did not end within %s%s%s", name, el,
				 last_line[0] ? " (" : "", last_line[0] ? last_line : "");
			if (last_line[0])
				strcat(err.msg, ")");
			dlk_err_hint(&err, "the job keeps running: 'dlk status%s %s'; stop it with 'dlk delete%s %s'", nsf, name,
				     nsf, name);
			rc = dlk_report(ctx, &err);
			goto out;
		}
		cJSON *jc = NULL, *pc = NULL;
		dlk_jobwatch_lock(&w);
		if (w.failed) {
			err = w.err;
			dlk_jobwatch_unlock(&w);
			dlk_progress_clear(&p);
			rc = dlk_report(ctx, &err);
			goto out;
		}
		if (w.synced_jobs && w.synced_pods) {
			const cJSON *job = cJSON_GetObjectItemCaseSensitive(w.jobs, name);
			if (!job) {
				dlk_jobwatch_unlock(&w);
				dlk_progress_clear(&p);
				dlk_errf(&err, DLK_EXIT_FAIL, "job '%s' was deleted while waiting for it", name);
				rc = dlk_report(ctx, &err);
				goto out;
			}
			/* copies: the watch threads go on changing their picture once the lock is released */
			cJSON *pods = dlk_jobwatch_pods_of(&w, name);
			jc = cJSON_Duplicate(job, 1);
			pc = cJSON_Duplicate(pods, 1);
			cJSON_Delete(pods);
			have = 1;
		}
		dlk_jobwatch_unlock(&w);
		if (!have)
			continue;
		dlk_job_summarize(jc, pc, events, &s);
		/* a pending job's reason is in events, which are not watched: read them when it becomes
		 * pending and every few seconds while it stays so (shown at the next change) */
		if ((s.state == JOB_PENDING || s.state == JOB_SUSPENDED) && (events_at < 0 || dlk_now() - events_at > 5)) {
			cJSON_Delete(events);
			events = dlk_job_events(c, ns, name, &s);
			events_at = dlk_now();
			dlk_job_summary_release(&s);
			dlk_job_summarize(jc, pc, events, &s);
		}
		if (lf)
			dlk_logfollow_update(lf, pc);

		dlk_job_progress_text(&s, prog, sizeof(prog));
		snprintf(line, sizeof(line), "%s, %d/%d workers ready%s%s%s%.300s", dlk_job_state_name(s.state), s.ready, s.total,
			 prog[0] ? ", " : "", prog, (s.state == JOB_PENDING || s.state == JOB_SUSPENDED) && s.reason[0] ? ": " : "",
			 (s.state == JOB_PENDING || s.state == JOB_SUSPENDED) ? s.reason : "");
		snprintf(last_line, sizeof(last_line), "%s", line);
		dlk_duration_text(dlk_now() - start, el, sizeof(el));
		if ((int)s.state != last_state) {
			/* without a terminal, each change of state is a line of its own */
			if (!ctx->tty_err && s.state != JOB_SUCCEEDED && s.state != JOB_FAILED)
				dlk_info(ctx, "job '%s': %s", name, line);
			last_state = (int)s.state;
		}
		if (!lf)
			dlk_progress_draw(&p, 0, "%s: %s (%s)", name, line, el);
		if (s.state == JOB_SUCCEEDED || s.state == JOB_FAILED) {
			if (lf && dlk_logfollow_active(lf)) {
				if (ended_at < 0)
					ended_at = dlk_now();
				if (dlk_now() - ended_at < FOLLOW_DRAIN_S) {
					dlk_job_summary_release(&s);
					cJSON_Delete(jc);
					cJSON_Delete(pc);
					continue;
				}
			}
			dlk_progress_clear(&p);
			if (s.state == JOB_SUCCEEDED) {
				dlk_info(ctx, "job '%s' succeeded after %s%s%s", name, el, prog[0] ? ": " : "", prog);
				rc = 0;
			} else {
				dlk_errf(&err, DLK_EXIT_FAIL, "job '%s' failed: %s", name, s.reason[0] ? s.reason : "see its status");
				failure_hint(&err, &s, nsf);
				rc = dlk_report(ctx, &err);
			}
			dlk_job_summary_release(&s);
			cJSON_Delete(jc);
			cJSON_Delete(pc);
			goto out;
		}
		dlk_job_summary_release(&s);
		cJSON_Delete(jc);
		cJSON_Delete(pc);
	}
out:
	cJSON_Delete(events);
	dlk_logfollow_free(lf, rc != 0);
	dlk_jobwatch_release(&w);
	return rc;
}

int dlk_train_wait_job(struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, double timeout_s)
{
	return wait_for_job(ctx, c, ns, name, timeout_s, 0);
}

/* --report: the page of the job that ended, from the run it published on itself */
static int write_report(struct dlk_ctx *ctx, const char *ns, const char *name, const char *path)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = dlk_kube_client(ctx, &err);
	cJSON *run = c ? dlk_job_run_doc(c, ns, name, dlk_ns_flag(ctx, c, ns), &err) : NULL;

	dlk_kube_close(ctx, c);

	if (!run || report_write_html(path, run, NULL, &err)) {
		cJSON_Delete(run);
		dlk_err_prefix(&err, "--report '%s'", path);
		return dlk_report(ctx, &err);
	}
	cJSON_Delete(run);
	if (!ctx->quiet)
		fprintf(stderr, "report: %s\n", path);
	return 0;
}

void dlk_train_cluster_warnings(const struct dlk_ctx *ctx, const struct dlk_project *spec)
{
	struct dlk_buf w = DLK_BUF_INIT;
	char *save = NULL;

	if (!ctx->quiet && project_cluster_warnings(spec, &w))
		for (char *l = strtok_r(w.data, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			dlk_warn(ctx, "%s", l);
	dlk_buf_release(&w);
}

int dlk_train_submit(struct dlk_ctx *ctx, const struct dlk_train_cli *cli, const struct dlk_project *spec)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	const char *render_ns = ctx->namespace_;
	cJSON *objects = NULL, *existing = NULL, *applied = NULL;
	const cJSON *main_obj, *o;
	const char *name, *kind, *ns;
	int replace = cli->replace, follow = cli->follow;
	int wait = cli->wait || follow || cli->timeout_s > 0;
	double timeout_s = cli->timeout_s;
	int rc = 0;

	if (ctx->output != DLK_OUTPUT_TEXT && ctx->output != DLK_OUTPUT_JSON) {
		dlk_errf(&err, DLK_EXIT_USAGE, "submitting prints text or json (the applied objects), not '%s'",
		         dlk_output_names[ctx->output]);
		return dlk_report(ctx, &err);
	}
	dlk_train_cluster_warnings(ctx, spec);
	c = dlk_kube_client(ctx, &err);
	if (!c) {
		if (err.code == DLK_EXIT_CONFIG) {
			char h[sizeof(err.hint)];
			snprintf(h, sizeof(h), "%s", err.hint);
			dlk_err_hint(&err, "%.300s%s on this machine: 'dlk train --local'", h, h[0] ? "; or train" : "train");
		}
		return dlk_report(ctx, &err);
	}
	/* kubectl's rule: -n, else the project's namespace, else the kubeconfig context's */
	if (!render_ns && !spec->namespace_)
		render_ns = kube_client_namespace(c);
	{
		/* the code being submitted: the workers record it in the run (a pod has no git tree) */
		char *dir = dlk_dir_of(ctx->file);
		char commit[65];
		int dirty = 0;
		if (dlk_git_head(dir, commit, &dirty))
			commit[0] = '\0';
		free(dir);
		objects = render_train_project_git(spec, ctx->file, cli->templates, render_ns, commit, dirty, &err);
	}
	if (!objects) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	main_obj = main_object(objects);
	if (!main_obj || !kube_meta(main_obj, "name")) {
		dlk_errf(&err, DLK_EXIT_CONFIG, "the rendered objects hold no Job or CronJob");
		dlk_err_hint(&err, "check the project's templates/ against 'dlk init --templates'");
		rc = dlk_report(ctx, &err);
		goto out;
	}
	name = kube_meta(main_obj, "name");
	kind = cJSON_GetObjectItemCaseSensitive(main_obj, "kind")->valuestring;
	ns = kube_meta(main_obj, "namespace");
	if (!ns)
		ns = kube_client_namespace(c);
	if (kube_get(c, kind, ns, name, &existing, &err) == 0) {
		if (!replace) {
			dlk_errf(&err, DLK_EXIT_EXISTS, "job '%s' already exists in namespace '%s'", name, ns);
			dlk_err_hint(&err, "see it with 'dlk status%s %s'; submit again with 'dlk train --replace' "
				     "(deletes the old one), or change 'name' in dlk.yaml", dlk_ns_flag(ctx, c, ns), name);
			rc = dlk_report(ctx, &err);
			goto out;
		}
		int n = 0;
		dlk_interrupt_catch();
		if (dlk_delete_job_objects(c, ns, name, dlk_print_deleted, ctx, &n, &err) < 0) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		dlk_info(ctx, "deleted the old job '%s' (%d objects); waiting for it to go", name, n);
		if (strcmp(kind, "Job") == 0 &&
		    dlk_wait_job_gone(c, ns, name, timeout_s > 0 ? timeout_s : REPLACE_WAIT_S, &err) < 0) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
	} else if (err.code != DLK_EXIT_NOTFOUND) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	dlk_err_clear(&err);

	/* the run history (dlk.dev/create-only) outlives the job: made once, never replaced */
	applied = cJSON_CreateArray();
	if (dlk_submit_objects(c, objects, applied, &err) < 0) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (ctx->verbose)
		cJSON_ArrayForEach(o, applied)
			dlk_info(ctx, "applied %s/%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "kind")),
			         kube_meta(o, "name"));
	dlk_kube_warnings(ctx, c);
	if (!dlk_print_applied(ctx, applied, name)) {
		printf("job '%s' submitted to namespace '%s' (%d worker%s)\n", name, ns, spec->resources.workers,
		       spec->resources.workers == 1 ? "" : "s");
		if (!wait)
			printf("next:\n  dlk status%s %s\n  dlk logs%s -f %s\n", dlk_ns_flag(ctx, c, ns), name, dlk_ns_flag(ctx, c, ns),
			       name);
	}
	fflush(stdout);
	if (wait) {
		if (strcmp(kind, "Job")) {
			/* nothing runs until the schedule says so (hours away, maybe): waiting would
			 * block a script for that long, and reporting a run that has not happened would
			 * be a lie (train.c refuses --report before submitting). The submit is done;
			 * say so and what follows the runs. */
			dlk_info(ctx, "'%s' is scheduled (CronJob, schedule '%s'): no run starts now, so --wait has nothing to "
			         "wait for", name, spec->schedule ? spec->schedule : "?");
			dlk_info(ctx, "its runs: dlk status%s %s; the running one's logs: dlk logs%s -f %s", dlk_ns_flag(ctx, c, ns),
			         name, dlk_ns_flag(ctx, c, ns), name);
			goto out;
		}
		rc = wait_for_job(ctx, c, ns, name, timeout_s, follow);
		/* a job that failed has a report too: what it did before it failed */
		if (cli->report && (rc == 0 || rc == DLK_EXIT_FAIL)) {
			int r = write_report(ctx, ns, name, cli->report);
			rc = rc ? rc : r;
		}
	}
out:
	dlk_kube_close(ctx, c);
	cJSON_Delete(applied);
	cJSON_Delete(existing);
	cJSON_Delete(objects);
	return rc;
}
