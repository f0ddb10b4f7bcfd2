/* dlk train: render the job's objects (--dry-run), run the training loop here (--local), or be
 * one worker of the rendered Job (--worker). The loop itself is lib/train; this file wires its
 * events to the terminal, a metrics file and the exit code. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/train_gang.h"
#include "commands/train_here.h"
#include "lib/render/render.h"
#include "lib/project/project.h"
#include "lib/util/mem.h"
#include "lib/util/yamljson.h"

#include <string.h>
#include <sys/stat.h>

/* The project's own templates/ directory (next to the project file) overrides the built-ins. */
static char *project_templates_dir(const char *spec_file)
{
	const char *slash = strrchr(spec_file, '/');

	if (!slash)
		return xstrdup("templates");
	return xasprintf("%.*s/templates", (int)(slash - spec_file), spec_file);
}

static int print_objects(const struct dlk_ctx *ctx, cJSON *objects, struct dlk_err *err)
{
	if (!strcmp(ctx->output, "json")) {
		/* a v1 List, as `kubectl get -o json` prints several objects; `kubectl apply -f` takes it */
		cJSON *list = cJSON_CreateObject();
		cJSON_AddStringToObject(list, "apiVersion", "v1");
		cJSON_AddStringToObject(list, "kind", "List");
		cJSON_AddItemReferenceToObject(list, "items", objects);
		char *s = cJSON_Print(list);
		cJSON_Delete(list);
		if (!s)
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot print the objects as JSON");
		printf("%s\n", s);
		free(s);
		return 0;
	}
	if (strcmp(ctx->output, "yaml") && strcmp(ctx->output, "text"))
		return dlk_errf(err, DLK_EXIT_USAGE, "--dry-run prints yaml or json, not '%s'", ctx->output);
	char *y = yamljson_emit_stream(objects, err);
	if (!y)
		return -1;
	fputs(y, stdout);
	free(y);
	return 0;
}

int dlk_train_render(const struct dlk_ctx *ctx, const struct dlk_project *spec, const char *templates_opt,
                     cJSON **objects, struct dlk_err *err)
{
	struct render_opts ro = RENDER_OPTS_INIT;
	char *tdir = NULL, *yaml = project_dump_yaml(spec);
	int rc = -1;

	ro.namespace_ = ctx->namespace_;
	if (templates_opt) {
		ro.templates_dir = templates_opt;
	} else {
		tdir = project_templates_dir(ctx->file);
		ro.templates_dir = tdir;
		ro.templates_dir_optional = 1;
	}
	*objects = render_train(spec, yaml, &ro, err);
	if (*objects)
		rc = 0;
	free(tdir);
	free(yaml);
	return rc;
}

static int run_train(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	cJSON *objects = NULL;
	int dry = (int)dlk_opt_num(args, "dry-run"), local = (int)dlk_opt_num(args, "local");
	int worker = (int)dlk_opt_num(args, "worker");
	long long workers = dlk_opt(args, "workers")->set ? dlk_opt_num(args, "workers") : 1;
	long long max_restarts = dlk_opt(args, "max-restarts")->set ? dlk_opt_num(args, "max-restarts") : 3;
	int rc = 0;

	int submit_opts = dlk_opt_num(args, "wait") || dlk_opt_num(args, "follow") || dlk_opt_num(args, "replace") ||
			  dlk_opt_isset(args, "timeout");

	if (dry + local + worker > 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--dry-run, --local and --worker exclude each other");
		return dlk_report(ctx, &err);
	}
	if ((dry || local || worker) && submit_opts) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--wait, --follow, --timeout and --replace go with submitting, not with %s",
			 dry ? "--dry-run" : local ? "--local" : "--worker");
		return dlk_report(ctx, &err);
	}
	if (!local && (dlk_opt(args, "workers")->set || dlk_opt(args, "max-restarts")->set)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--workers and --max-restarts go with --local");
		dlk_err_hint(&err, "in a cluster the number of workers is resources.workers in the project file");
		return dlk_report(ctx, &err);
	}
	if (workers < 1 || workers > DLK_GANG_MAX_WORKERS) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--workers: expected 1 to %d, not %lld", DLK_GANG_MAX_WORKERS, workers);
		return dlk_report(ctx, &err);
	}
	if (max_restarts < 0 || max_restarts > 1000) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--max-restarts: expected 0 to 1000, not %lld", max_restarts);
		return dlk_report(ctx, &err);
	}
	spec = dlk_ctx_load_spec(ctx, &err);
	if (!spec)
		return dlk_report(ctx, &err);
	if (!dry && !local && !worker) {
		rc = dlk_train_submit(ctx, args, spec);
		goto out;
	}
	if (dry) {
		if (dlk_train_render(ctx, spec, dlk_opt_str(args, "templates"), &objects, &err) ||
		    print_objects(ctx, objects, &err))
			rc = dlk_report(ctx, &err);
		goto out;
	}
	if (local && workers > 1)
		rc = dlk_train_gang(ctx, args, spec, (int)workers, (int)max_restarts);
	else
		rc = dlk_train_here(ctx, args, spec, worker);
out:
	cJSON_Delete(objects);
	project_free(spec);
	return rc;
}

static const struct dlk_option train_options[] = {
	{ OPT_BOOL, 0, "dry-run", NULL, "print the Kubernetes objects a submit would send, and stop", COMPLETE_NONE, NULL, NULL },
	{ OPT_BOOL, 0, "local", NULL, "train on this machine (see --workers)", COMPLETE_NONE, NULL, NULL },
	{ OPT_BOOL, 0, "worker", NULL, "be one worker of the job (what the rendered pods run)", COMPLETE_NONE, NULL, NULL },
	{ OPT_BOOL, 0, "wait", NULL, "after submitting, wait for the job to end; the exit code says how it ended", COMPLETE_NONE, NULL, NULL },
	{ OPT_BOOL, 0, "follow", NULL, "after submitting, stream the workers' logs until the job ends (implies --wait)", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "timeout", "DURATION", "give up waiting after this long, e.g. 90s, 30m (implies --wait)", COMPLETE_NONE, NULL, NULL },
	{ OPT_BOOL, 0, "replace", NULL, "delete a job of the same name first, then submit", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "templates", "DIR", "templates overriding the built-ins (default: the project's templates/)", COMPLETE_DIR, NULL, NULL },
	{ OPT_STRING, 0, "metrics", "FILE", "append a JSON line per step and per epoch to FILE", COMPLETE_FILE, NULL, NULL },
	{ OPT_STRING, 0, "bundle", "FILE", "where to write the model bundle", COMPLETE_FILE, NULL, "NAME.dlk next to the project file; in a pod, on the checkpoint volume" },
	{ OPT_INT, 0, "workers", "N", "with --local: train with N worker processes on this machine", COMPLETE_NONE, NULL, "1" },
	{ OPT_INT, 0, "max-restarts", "N", "with --local --workers: restart the workers from the last checkpoint at most N times", COMPLETE_NONE, NULL, "3" },
	{ OPT_END, 0, NULL, NULL, NULL, 0, NULL, NULL },
};

const struct dlk_command_def dlk_cmd_train = {
	.name = "train",
	.summary = "train a model: submit the job to the cluster, show it, run it here, or be its worker",
	.usage = "",
	.description = "Read the project file and submit its training job to the cluster (with --wait or\n"
	               "--follow, stay until it ends), print the job's Kubernetes objects (--dry-run), train\n"
	               "on this machine (--local), or act as one worker of the job (--worker).",
	.options = train_options,
	.min_pos = 0,
	.max_pos = 0,
	.run = run_train,
	.examples = "  $ dlk train\n"
	            "  $ dlk train --follow --timeout 2h\n"
	            "  $ dlk train --replace --wait\n"
	            "  $ dlk train --dry-run -o json\n"
	            "  $ dlk train --local --set training.epochs=1\n"
	            "  $ dlk train --local --metrics metrics.jsonl -q\n",
};
