/* dlk train: render the job's objects (--dry-run), run the training loop here (--local), or be
 * one worker of the rendered Job (--worker). The loop itself is lib/train; this file wires its
 * events to the terminal, a metrics file and the exit code. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/train.h"
#include "lib/program/place.h"
#include "lib/util/utf8.h"
#include "commands/train_data.h"
#include "commands/train_gang.h"
#include "commands/train_report.h"
#include "commands/train_submit.h"
#include "commands/ui.h"
#include "lib/trainer/gang.h"
#include "lib/trainer/progress.h"
#include "lib/trainer/run.h"
#include "lib/jobs/logarchive.h"
#include "lib/jobs/podenv.h"
#include "lib/render/render.h"
#include "lib/project/project.h"
#include "lib/util/mem.h"
#include "lib/util/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct dlk_train_cli opt;

void dlk_train_trainer_opts(const struct dlk_train_cli *cli, const char *spec_file, struct dlk_trainer_opts *o)
{
	*o = (struct dlk_trainer_opts)DLK_TRAINER_OPTS_INIT;
	o->spec_file = spec_file;
	o->bundle = cli->bundle;
	o->in_pod = cli->mode == TRAIN_WORKER;
	o->workers = cli->workers > 1 ? cli->workers : 1;
	o->max_restarts = cli->max_restarts;
	o->fresh = cli->fresh;
	o->if_data_changed = cli->if_data_changed;
}

/* A worker in a pod whose job has a checkpoint volume keeps its log there too (DLK_LOG_ARCHIVE),
 * so that `dlk logs NAME --run ID` reads it after the pods are gone. The processes of a pod's
 * gang write into their parent's pipes and are archived with it. A log that cannot be archived
 * is warned about; training goes on. */
static struct dlk_log_archive *archive_start(const struct dlk_ctx *ctx)
{
	const char *dir = getenv(DLK_ENV_LOG_ARCHIVE), *run = getenv(DLK_ENV_RUN_ID), *rank = getenv(DLK_ENV_RANK);
	const char *pod = getenv(DLK_ENV_POD_NAME);
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_log_archive *a = NULL;
	char key[256], *path;

	if (!dir || !*dir || getenv(DLK_ENV_LOCAL_RANK))
		return NULL;
	if (!run || !rank || !pod || dlk_log_archive_key(run, atoi(rank), pod, key, sizeof(key))) {
		dlk_warn(ctx, "the log is not archived: %s, %s and %s do not name this worker", DLK_ENV_RUN_ID, DLK_ENV_RANK,
		         DLK_ENV_POD_NAME);
		return NULL;
	}
	/* a container restarted in the same pod archives into a file of its own: POD.2, POD.3... */
	path = xasprintf("%s/%s", dir, key);
	for (int attempt = 2; access(path, F_OK) == 0 && attempt < 1000; attempt++) {
		char *p2 = xasprintf("%s.%d", pod, attempt);
		free(path);
		path = dlk_log_archive_key(run, atoi(rank), p2, key, sizeof(key)) ? xstrdup("") : xasprintf("%s/%s", dir, key);
		free(p2);
	}
	/* rank 0 keeps the folder bounded: the archives of the last runs only */
	if (atoi(rank) == 0) {
		unsigned removed = 0;
		if (dlk_log_archive_prune(dir, run, DLK_LOG_ARCHIVE_KEEP_RUNS, &removed, &err)) {
			dlk_warn(ctx, "old log archives are not removed: %s", err.msg);
			dlk_err_clear(&err);
		} else if (removed && ctx->verbose) {
			dlk_info(ctx, "removed %u log archives of runs before the last %d", removed, DLK_LOG_ARCHIVE_KEEP_RUNS);
		}
	}
	if (dlk_log_archive_start(path, 0, &a, &err))
		dlk_warn(ctx, "the log is not archived: %s", err.msg);
	free(path);
	return a;
}

static int run_train(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct dlk_log_archive *archive = NULL;
	struct dlk_trainer_sink sink = { .note = dlk_train_note, .ud = ctx };
	struct dlk_err last = DLK_ERR_INIT;
	cJSON *objects = NULL;
	int rc = 0;

	(void)args;
	if ((opt.mode == TRAIN_LOCAL || opt.mode == TRAIN_WORKER) && dlk_log_format_set(ctx, opt.log_format, &err))
		return dlk_report(ctx, &err);
	/* the processes of a gang log as their parent does */
	if (opt.mode == TRAIN_LOCAL && opt.log_format >= 0)
		setenv(DLK_ENV_LOG_FORMAT, dlk_log_format_names[opt.log_format], 1);
	if (opt.place) {
		/* a program pod's init container: no project, no run, no failure to publish */
		int n = 0;
		if (dlk_program_place(opt.place, &n, &err))
			return dlk_report(ctx, &err);
		dlk_info(ctx, "placed dlk with %d shared objects in '%s': its 'dlk' starts it", n, dlk_visible(opt.place));
		return 0;
	}
	if ((enum dlk_train_mode)opt.mode == TRAIN_WORKER) {
		archive = archive_start(ctx);
		ctx->last_err = &last; /* what a failing worker publishes */
	}
	if (opt.report && opt.mode == TRAIN_SUBMIT && !opt.wait && !opt.follow && !opt.timeout_s) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--report writes the page when the run ends: submitting, it goes with "
		         "--wait, --follow or --timeout");
		return dlk_report(ctx, &err);
	}
	spec = dlk_ctx_load_spec(ctx, &err);
	if (!spec) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (opt.report && opt.mode == TRAIN_SUBMIT && spec->schedule) {
		/* refused before anything is submitted: no run starts now (see train_submit.c) */
		dlk_errf(&err, DLK_EXIT_USAGE, "a scheduled training (schedule: %s) has no run to report on yet", spec->schedule);
		dlk_err_hint(&err, "once a run has ended: 'dlk report RUN', RUN one of the Jobs 'dlk status %s' lists", spec->name);
		rc = dlk_report(ctx, &err);
		goto out;
	}
	/* a dataset tag names one id for the whole run: resolved here, once, and the id is what the
	 * rendered spec, every worker and the bundle carry */
	if ((enum dlk_train_mode)opt.mode != TRAIN_WORKER &&
	    dlk_train_pin_dataset(ctx, spec, (enum dlk_train_mode)opt.mode == TRAIN_SUBMIT, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	switch ((enum dlk_train_mode)opt.mode) {
	case TRAIN_SUBMIT:
		rc = dlk_train_submit(ctx, &opt, spec);
		break;
	case TRAIN_DRY_RUN:
		/* what will not work on a cluster, said before the objects as a submit says it */
		dlk_train_cluster_warnings(ctx, spec);
		objects = render_train_project(spec, ctx->file, opt.templates, ctx->namespace_, &err);
		if (!objects || dlk_print_objects(ctx, objects, &err))
			rc = dlk_report(ctx, &err);
		break;
	case TRAIN_LOCAL:
		if (opt.if_data_changed) {
			rc = dlk_train_skip_unchanged(&sink, ctx->file, spec, &err);
			if (rc < 0)
				rc = dlk_report(ctx, &err);
			if (rc)
				/* DLK_EXIT_UNCHANGED, or an error */
				break;
		}
		if (spec->program.present) {
			/* the user's own program: its processes under the supervisor */
			rc = dlk_train_program(ctx, &opt, spec);
		} else if (opt.workers > 1) {
			/* the worker processes serve their metrics on PORT + rank */
			if (opt.metrics_port) {
				char port[16];
				snprintf(port, sizeof(port), "%d", opt.metrics_port);
				setenv(DLK_ENV_METRICS_PORT, port, 1);
			}
			rc = dlk_train_gang(ctx, &opt, spec);
		} else {
			rc = dlk_train_here(ctx, &opt, spec, 0);
		}
		break;
	case TRAIN_WORKER:
		/* elastic: the Job's size now, which `dlk scale` may have changed since the pod was made */
		if (!getenv(DLK_ENV_LOCAL_RANK) && dlk_job_world_env(&sink, &err)) {
			rc = dlk_report(ctx, &err);
			break;
		}
		if (spec->program.present)
			/* the user's own program: this pod's processes of it, under the supervisor */
			rc = dlk_train_program_pod(ctx, &opt, spec);
		else if (spec->resources.gpus > 1 && getenv(DLK_ENV_SERVICE_HOST) && !getenv(DLK_ENV_LOCAL_RANK))
			/* a pod with several GPUs: a rank per GPU (unless a launcher already made them) */
			rc = dlk_train_pod_gang(ctx, &opt, spec, spec->resources.gpus);
		else
			rc = dlk_train_here(ctx, &opt, spec, 1);
		break;
	}
out:
	/* a worker (not one process of a pod's gang: its parent speaks for the pod) says why it
	 * failed where any user can read it (a resize is no failure) */
	if (rc && rc != DLK_EXIT_RESIZED && (enum dlk_train_mode)opt.mode == TRAIN_WORKER && !getenv(DLK_ENV_LOCAL_RANK))
		/* a program's codes mean what its exit_codes say (the Job's podFailurePolicy reads them
		 * so), not dlk's own */
		dlk_train_publish_failure_class(&sink, rc, spec && spec->program.present ? dlk_program_exit_class(&spec->program, rc) : NULL,
		                                last.msg);
	ctx->last_err = NULL;
	cJSON_Delete(objects);
	project_free(spec);
	dlk_log_archive_stop(archive);
	return rc;
}

static const struct dlk_option train_options[] = {
	OPT_MODE("dry-run", &opt.mode, TRAIN_DRY_RUN, "print the Kubernetes objects a submit would send, and stop"),
	OPT_MODE("local", &opt.mode, TRAIN_LOCAL, "train on this machine (see --workers)"),
	OPT_MODE("worker", &opt.mode, TRAIN_WORKER, "be one worker of the job (what the rendered pods run)"),
	OPT_BOOL(0, "wait", &opt.wait, "after submitting, wait for the job to end; the exit code says how it ended",
	         .modes = DLK_MODE(TRAIN_SUBMIT)),
	OPT_BOOL(0, "follow", &opt.follow, "after submitting, stream the workers' logs until the job ends (implies --wait)",
	         .modes = DLK_MODE(TRAIN_SUBMIT)),
	OPT_DURATION(0, "timeout", &opt.timeout_s, "DURATION", "give up waiting after this long, e.g. 90s, 30m (implies --wait)",
	             .modes = DLK_MODE(TRAIN_SUBMIT)),
	OPT_BOOL(0, "replace", &opt.replace, "delete a job of the same name first, then submit", .modes = DLK_MODE(TRAIN_SUBMIT)),
	OPT_STRING(0, "templates", &opt.templates, "DIR", NULL,
	           "templates overriding the built-ins (default: the project's templates/)", .complete = COMPLETE_DIR),
	OPT_STRING(0, "metrics", &opt.metrics, "FILE", NULL, "append a JSON line per step and per epoch to FILE",
	           .complete = COMPLETE_FILE),
	OPT_STRING(0, "bundle", &opt.bundle, "FILE", NULL, "where to write the model bundle",
	           .def_doc = "NAME.dlk next to the project file; in a pod, on the checkpoint volume", .complete = COMPLETE_FILE),
	OPT_STRING(0, "report", &opt.report, "FILE", NULL, "when the run ends, write its report page (see dlk report) to FILE",
	           .modes = DLK_MODE(TRAIN_SUBMIT) | DLK_MODE(TRAIN_LOCAL) | DLK_MODE(TRAIN_WORKER),
	           .hint = "the page is written when the run ends: here, or after waiting for a submitted job",
	           .complete = COMPLETE_FILE),
	OPT_INT(0, "workers", &opt.workers, "N", 1, "with --local: train with N worker processes on this machine",
	        .min = 1, .max = DLK_GANG_MAX_WORKERS, .modes = DLK_MODE(TRAIN_LOCAL),
	        .hint = "in a cluster the number of workers is resources.workers in the project file"),
	OPT_BOOL(0, "fresh", &opt.fresh, "start a new run even when the last one was interrupted (it is resumed otherwise)",
	         .modes = DLK_MODE(TRAIN_LOCAL), .flags = OPT_NONEG,
	         .hint = "in a cluster every job is a run of its own; its restarts and resizes resume it"),
	OPT_BOOL(0, "if-data-changed", &opt.if_data_changed,
	         "train only when the data differs from the last successful run's; else record a skipped run and exit 10",
	         .modes = DLK_MODE(TRAIN_LOCAL), .flags = OPT_NONEG),
	OPT_ENUM(0, "log-format", &opt.log_format, "FORMAT", dlk_log_format_names, -1,
	         "write the log as text, or as one JSON object per line for log collectors",
	         .def_doc = "$DLK_LOG_FORMAT (logging.format in a pod), text",
	         .modes = DLK_MODE(TRAIN_LOCAL) | DLK_MODE(TRAIN_WORKER)),
	OPT_INT(0, "metrics-port", &opt.metrics_port, "PORT", 0,
	        "serve Prometheus metrics on PORT at /metrics while training (with --workers, rank r on PORT + r; a program: its reports, on PORT)",
	        .min = 0, .max = 65535, .modes = DLK_MODE(TRAIN_LOCAL), .def_doc = "0: none",
	        .hint = "in a cluster every worker serves them on resources.metrics_port"),
	OPT_STRING(0, "place-supervisor", &opt.place, "DIR", NULL,
	           "with --worker: copy this dlk with its libraries and loader into DIR (DIR/dlk starts it) and stop: "
	           "what a program pod's init container runs for an image without dlk",
	           .modes = DLK_MODE(TRAIN_WORKER), .complete = COMPLETE_DIR),
	OPT_INT(0, "max-restarts", &opt.max_restarts, "N", 3,
	        "with --local --workers: restart the workers from the last checkpoint at most N times",
	        .min = 0, .max = 1000, .modes = DLK_MODE(TRAIN_LOCAL)),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_train = {
	.usage = "",
	.description = "Read the project file and submit its training job to the cluster (with --wait or\n"
	               "--follow, stay until it ends), print the job's Kubernetes objects (--dry-run), train\n"
	               "on this machine (--local), or act as one worker of the job (--worker).",
	.options = train_options,
	.default_mode = "submitting",
	.min_pos = 0,
	.max_pos = 0,
	.run = run_train,
	.examples = "  $ dlk train\n"
	            "  $ dlk train --follow --timeout 2h\n"
	            "  $ dlk train --replace --wait\n"
	            "  $ dlk train --dry-run -o json\n"
	            "  $ dlk train --local --set training.epochs=1\n"
	            "  $ dlk train --local --metrics metrics.jsonl -q\n"
	            "  $ dlk train --local --report run.html\n",
};
