/* dlk sweep: search hyperparameters. --local runs the project file's sweep: section here
 * (lib/sweep: the samplers, ASHA and the driver); this file turns options into the driver's
 * options and shows its notes. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/sweep_show.h"
#include "commands/ui.h"
#include "lib/project/project.h"
#include "lib/sweep/sweep.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { SWEEP_SUBMIT, SWEEP_LOCAL };
static int sweep_mode, sweep_trials;

static void sweep_note(void *ud, int warn, const char *msg)
{
	const struct dlk_ctx *ctx = ud;
	if (warn)
		dlk_warn(ctx, "%s", msg);
	else
		dlk_info(ctx, "%s", msg);
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
	if (sweep_mode != SWEEP_LOCAL) {
		dlk_errf(&err, DLK_EXIT_USAGE, "a sweep runs here for now: give --local");
		dlk_err_hint(&err, "its trials as Jobs in the cluster are not there yet (docs/sweeps.md)");
		return dlk_report(ctx, &err);
	}
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
	if (dlk_sweep_run_local(&o, &sink, &err))
		return dlk_report(ctx, &err);
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
	OPT_INT(0, "trials", &sweep_trials, "N", 0, "run at most N trials (fewer than sweep.trials)", .min = 1,
	        .max = 10000, .def_doc = "sweep.trials"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_sweep = {
	.usage = "",
	.description = "Search hyperparameters: run the trials of the project file's sweep: section (random, grid or\n"
	               "TPE search over any project keys), at most sweep.parallel at once, each an ordinary run with\n"
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
	            "  $ dlk status fashion-sweep\n"
	            "  $ dlk status fashion-sweep -o json\n"
	            "  $ dlk report fashion-sweep -o sweep.html\n",
};
