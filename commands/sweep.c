/* dlk sweep: search hyperparameters. --local runs the project file's sweep: section here
 * (lib/sweep: the samplers, ASHA and the driver); this file turns options into the driver's
 * options and shows its notes. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/sweep_show.h"
#include "commands/ui.h"
#include "commands/cluster.h"
#include "lib/project/check.h"
#include "lib/project/project.h"
#include "lib/util/buf.h"
#include "lib/kube/client.h"
#include "lib/util/fsutil.h"
#include "lib/util/git.h"
#include "lib/sweep/sweep.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SWEEP_SUBMIT, SWEEP_LOCAL };
static int sweep_mode, sweep_trials;
static const char *sweep_templates;

static void sweep_note(void *ud, int warn, const char *msg)
{
	const struct dlk_ctx *ctx = ud;
	if (warn)
		dlk_warn(ctx, "%s", msg);
	else
		dlk_info(ctx, "%s", msg);
}

/* The trials as Jobs: the client and namespace as `dlk train` finds them (kubectl's rule: -n,
 * else the project's namespace, else the kubeconfig context's), the code's git commit for the
 * runs' records. Returns the exit code. */
static int run_in_cluster(struct dlk_ctx *ctx, struct dlk_sweep_opts *o, const struct dlk_sweep_sink *sink)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *p = project_load(ctx->file, NULL, 0, &err);
	struct kube_client *c = NULL;
	char *dir = NULL, commit[65];
	int dirty = 0, rc = 0;

	if (!p)
		return dlk_report(ctx, &err);
	c = dlk_kube_client(ctx, &err);
	if (!c) {
		if (err.code == DLK_EXIT_CONFIG) {
			char h[sizeof(err.hint)];
			snprintf(h, sizeof(h), "%s", err.hint);
			dlk_err_hint(&err, "%.300s%srun the sweep on this machine: 'dlk sweep --local'", h, h[0] ? "; or " : "");
		}
		rc = dlk_report(ctx, &err);
		goto out;
	}
	{
		/* what `dlk train` warns about a project it submits holds for each trial */
		struct dlk_buf w = DLK_BUF_INIT;
		char *save = NULL;
		if (!ctx->quiet && project_cluster_warnings(p, &w))
			for (char *l = strtok_r(w.data, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
				dlk_warn(ctx, "%s", l);
		dlk_buf_release(&w);
	}
	o->kube = c;
	o->namespace_ = ctx->namespace_ ? ctx->namespace_ : p->namespace_ ? p->namespace_ : kube_client_namespace(c);
	o->templates = sweep_templates;
	dir = dlk_dir_of(ctx->file);
	if (!dlk_git_head(dir, commit, &dirty)) {
		o->git_commit = commit;
		o->git_dirty = dirty;
	}
	if (dlk_sweep_run_cluster(o, sink, &err))
		rc = dlk_report(ctx, &err);
out:
	dlk_kube_close(ctx, c);
	project_free(p);
	free(dir);
	return rc;
}

static int run_sweep(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_sweep_opts o = { 0 };
	struct dlk_sweep_sink sink = { sweep_note, ctx };
	struct dlk_sweep_spec spec;
	struct dlk_project *p;
	char self[4096];
	ssize_t n;
	int rc;

	(void)args;
	if (ctx->sets.n) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--set does not go with dlk sweep: the trials' values are the sweep's");
		dlk_err_hint(&err, "write the fixed values into the project file, the swept ones under sweep.parameters");
		return dlk_report(ctx, &err);
	}
	/* the trials are this very binary */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		dlk_errf(&err, DLK_EXIT_FAIL, "cannot find the dlk binary (/proc/self/exe) to run the trials");
		return dlk_report(ctx, &err);
	}
	self[n] = 0;
	o.spec_file = ctx->file;
	o.self = self;
	o.quiet = ctx->quiet;
	o.max_trials = sweep_trials;
	if (sweep_mode == SWEEP_LOCAL) {
		if (dlk_sweep_run_local(&o, &sink, &err))
			return dlk_report(ctx, &err);
	} else if ((rc = run_in_cluster(ctx, &o, &sink)))
		return rc;
	/* the result, as `dlk status SWEEP` shows it */
	p = project_load(ctx->file, NULL, 0, &err);
	if (!p || dlk_sweep_spec_load(ctx->file, p->name, &spec, &err)) {
		project_free(p);
		return dlk_report(ctx, &err);
	}
	if (!ctx->quiet || ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML)
		rc = dlk_show_sweep(ctx, spec.name);
	else
		rc = 0;
	dlk_sweep_spec_release(&spec);
	project_free(p);
	return rc;
}

static const struct dlk_option sweep_options[] = {
	OPT_MODE("local", &sweep_mode, SWEEP_LOCAL, "run the trials on this machine, as dlk train --local processes"),
	OPT_STRING(0, "templates", &sweep_templates, "DIR", NULL,
	           "render the trials' Jobs with the templates in DIR (default: the project's templates/)"),
	OPT_INT(0, "trials", &sweep_trials, "N", 0, "run at most N trials (fewer than sweep.trials)", .min = 1,
	        .max = 10000, .def_doc = "sweep.trials"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_sweep = {
	.usage = "",
	.description = "Search hyperparameters: run the trials of the project file's sweep: section (random, grid or\n"
	               "TPE search over any project keys), at most sweep.parallel at once, each an ordinary run (a Job\n"
	               "in the cluster, driven from here until the sweep ends; with --local a process here) with\n"
	               "the sweep's id and its parameters in its record; ASHA stops the trials that fall behind at\n"
	               "its rungs. Run again after an interruption, it resumes the sweep from the run history\n"
	               "without running finished trials again. 'dlk status SWEEP' lists the trials best first\n"
	               "and names the best trial's bundle; 'dlk report SWEEP' draws them.",
	.options = sweep_options,
	.default_mode = "submitting",
	.min_pos = 0,
	.max_pos = 0,
	.run = run_sweep,
	.examples = "  $ dlk init --example sweep fsweep && cd fsweep && dlk sweep --local\n"
	            "  $ dlk sweep -n team-a            # the trials as Jobs, 'sweep.parallel' at once\n"
	            "  $ dlk status fashion-sweep\n"
	            "  $ dlk status fashion-sweep -o json\n"
	            "  $ dlk report fashion-sweep -o sweep.html\n",
};
