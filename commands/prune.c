/* dlk prune: remove old runs of the project here (their records, their own bundles and their
 * checkpoints) and the checkpoints of finished runs; lib/runs/prune decides what goes. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/runs/prune.h"
#include "lib/runs/runs.h"
#include "lib/trainer/trainer.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/yamljson.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int prune_keep = -1, prune_dry_run;
static double prune_older_than;

/* "12.3 MB": what a prune frees, for people (-o json gives the bytes) */
static void size_text(unsigned long long b, char *out, size_t n)
{
	if (b < 1000)
		snprintf(out, n, "%llu bytes", b);
	else if (b < 1000000)
		snprintf(out, n, "%.1f kB", (double)b / 1e3);
	else if (b < 1000000000)
		snprintf(out, n, "%.1f MB", (double)b / 1e6);
	else
		snprintf(out, n, "%.1f GB", (double)b / 1e9);
}

static int run_prune(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_prune_opts o = DLK_PRUNE_OPTS_INIT;
	struct dlk_prune p = DLK_PRUNE_INIT;
	struct dlk_project *spec = NULL;
	char *runs = NULL, *base = NULL, sz[32];
	int rc = 0, pruned;

	(void)args;
	spec = dlk_ctx_load_spec(ctx, &err);
	if (!spec) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	runs = dlk_runs_local_dir(ctx->file, spec->name);
	base = dlk_trainer_ckpt_base(spec, ctx->file, 0);
	o.runs_dir = runs;
	o.project = spec->name;
	o.ckpt_base = base;
	o.keep = prune_keep;
	o.older_than = prune_older_than > 0 ? prune_older_than : -1;
	o.now = (double)time(NULL);
	o.dry_run = prune_dry_run;
	pruned = dlk_runs_prune(&o, &p, &err);
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *doc = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(doc, "removed");
		char *s;
		cJSON_AddStringToObject(doc, "project", spec->name);
		cJSON_AddBoolToObject(doc, "dryRun", prune_dry_run);
		cJSON_AddNumberToObject(doc, "bytes", (double)p.bytes);
		for (size_t i = 0; i < p.n; i++) {
			cJSON *it = cJSON_CreateObject();
			cJSON_AddStringToObject(it, "run", p.items[i].id);
			cJSON_AddStringToObject(it, "what", p.items[i].whole ? "run" : "checkpoints");
			if (p.items[i].record)
				cJSON_AddStringToObject(it, "record", p.items[i].record);
			if (p.items[i].bundle)
				cJSON_AddStringToObject(it, "bundle", p.items[i].bundle);
			if (p.items[i].checkpoints)
				cJSON_AddStringToObject(it, "checkpoints", p.items[i].checkpoints);
			cJSON_AddNumberToObject(it, "bytes", (double)p.items[i].bytes);
			cJSON_AddItemToArray(arr, it);
		}
		s = dlk_doc_text(doc, ctx->output == DLK_OUTPUT_JSON, &err);
		cJSON_Delete(doc);
		if (s) {
			fputs(s, stdout);
			free(s);
		}
	} else {
		for (size_t i = 0; i < p.n; i++) {
			const struct dlk_prune_item *it = &p.items[i];
			size_text(it->bytes, sz, sizeof(sz));
			if (it->whole)
				printf("%s run %.8s: its record%s%s (%s)\n", prune_dry_run ? "would remove" : "removed", it->id,
				       it->bundle ? ", its bundle" : "", it->checkpoints ? ", its checkpoints" : "", sz);
			else
				printf("%s the checkpoints of run %.8s, finished (%s)\n", prune_dry_run ? "would remove" : "removed",
				       it->id, sz);
		}
		size_text(p.bytes, sz, sizeof(sz));
		if (!p.n)
			dlk_info(ctx, "nothing to prune in the runs of '%s'", spec->name);
		else
			dlk_info(ctx, "%s %s%s", prune_dry_run ? "would free" : "freed", sz,
			         prune_dry_run ? "; run it again without --dry-run to remove them" : "");
	}
	if (pruned)
		rc = dlk_report(ctx, &err);
out:
	dlk_prune_release(&p);
	project_free(spec);
	free(runs);
	free(base);
	return rc;
}

static const struct dlk_option prune_options[] = {
	OPT_INT(0, "keep", &prune_keep, "N", -1, "keep the newest N runs; older ones go", .min = 1, .max = 1000000,
	        .flags = OPT_HIDE_DEFAULT),
	OPT_DURATION(0, "older-than", &prune_older_than, "DURATION", "remove the runs started longer ago than this (30d, 12h)"),
	OPT_BOOL(0, "dry-run", &prune_dry_run, "say what would be removed, remove nothing", .flags = OPT_NONEG),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_prune = {
	.usage = "",
	.description = "Remove what old runs of the project (-f) left on this machine. A run that goes takes its\n"
	               "record in the run history (.dlk/runs/NAME/), its own bundle beside it and its checkpoints;\n"
	               "with --keep N the newest N runs stay, with --older-than DURATION the runs started since.\n"
	               "Whatever the options, the checkpoints of a finished run go (nothing resumes it; its bundle\n"
	               "is what it made), and what resuming needs stays: the newest run, when it did not finish,\n"
	               "keeps its checkpoints, and a run still going is never touched. NAME.dlk, the newest run's\n"
	               "bundle, stays.",
	.options = prune_options,
	.min_pos = 0,
	.max_pos = 0,
	.run = run_prune,
	.examples = "  $ dlk prune --dry-run\n"
	            "  $ dlk prune --keep 10\n"
	            "  $ dlk prune --older-than 30d -o json\n",
};
