/* dlk delete: remove a job and everything dlk created for it (lib/jobs/jobdelete.c says how). */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ui.h"
#include "lib/jobs/jobdelete.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int confirm(const char *question)
{
	char line[64];

	fprintf(stderr, "%s [y/N] ", question);
	fflush(stderr);
	if (!fgets(line, sizeof(line), stdin))
		return 0;
	return line[0] == 'y' || line[0] == 'Y';
}

static struct {
	int all, yes, what;
} opt;

enum { DELETE_BOTH, DELETE_JOB, DELETE_SERVED };

static int run_delete(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = NULL;
	cJSON *names = NULL;
	int all = opt.all, yes = opt.yes;
	int rc = 0, missing = 0;
	const char *ns;

	if (all && args->n_pos) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--all deletes every job; do not name jobs with it");
		return dlk_report(ctx, &err);
	}
	if (!all && !args->n_pos) {
		dlk_errf(&err, DLK_EXIT_USAGE, "'dlk delete' needs the name of a job (or --all)");
		dlk_err_hint(&err, "list the jobs with 'dlk status'");
		return dlk_report(ctx, &err);
	}
	if (all && !yes && !isatty(STDIN_FILENO)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "refusing to delete every job without confirmation");
		dlk_err_hint(&err, "there is no terminal to ask on; add --yes if you mean it");
		return dlk_report(ctx, &err);
	}
	c = dlk_kube_client(ctx, &err);
	if (!c)
		return dlk_report(ctx, &err);
	ns = kube_client_namespace(c);
	if (all) {
		if (dlk_job_names(c, ns, &names, &err) < 0) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		int n = cJSON_GetArraySize(names);
		if (!n) {
			dlk_info(ctx, "no dlk jobs in namespace '%s'", ns);
			goto out;
		}
		if (!yes) {
			struct dlk_buf q = DLK_BUF_INIT;
			const cJSON *it;
			dlk_buf_addf(&q, "delete %d job%s in namespace '%s' (", n, n == 1 ? "" : "s", ns);
			cJSON_ArrayForEach(it, names)
				dlk_buf_addf(&q, "%s%s", it == names->child ? "" : ", ", it->string);
			dlk_buf_adds(&q, ") and everything dlk created for them?");
			int ok = confirm(q.data);
			dlk_buf_release(&q);
			if (!ok) {
				dlk_info(ctx, "nothing deleted");
				rc = DLK_EXIT_FAIL;
				goto out;
			}
		}
	} else {
		names = cJSON_CreateObject();
		for (int i = 0; i < args->n_pos; i++)
			if (!cJSON_GetObjectItemCaseSensitive(names, args->pos[i]))
				cJSON_AddTrueToObject(names, args->pos[i]);
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, names) {
		int n = 0, ns_ = 0;
		if ((opt.what != DELETE_SERVED && dlk_delete_job_objects(c, ns, it->string, dlk_print_deleted, ctx, &n, &err) < 0) ||
		    (!all && opt.what != DELETE_JOB &&
		     dlk_delete_served_objects(c, ns, it->string, dlk_print_deleted, ctx, &ns_, &err) < 0)) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		if (!n && !ns_) {
			dlk_errf(&err, DLK_EXIT_NOTFOUND, "%s '%s' not found in namespace '%s'%s",
			         opt.what == DELETE_SERVED ? "served model" : "job", it->string, ns,
			         opt.what == DELETE_BOTH ? " (nor a model served under that name)" : "");
			dlk_err_hint(&err, "list the jobs and served models with 'dlk status%s'; another namespace is -n NS",
			             dlk_ns_flag(ctx, c, ns));
			rc = dlk_report(ctx, &err);
			dlk_err_clear(&err);
			missing++;
			continue;
		}
		if (!ctx->quiet && n)
			printf("deleted job '%s' (%d object%s)\n", dlk_visible(it->string), n, n == 1 ? "" : "s");
		if (!ctx->quiet && ns_)
			printf("deleted served model '%s' (%d object%s)\n", dlk_visible(it->string), ns_, ns_ == 1 ? "" : "s");
	}
	if (missing)
		rc = DLK_EXIT_NOTFOUND;
out:
	dlk_kube_close(ctx, c);
	cJSON_Delete(names);
	return rc;
}

static const struct dlk_option delete_options[] = {
	OPT_BOOL(0, "all", &opt.all, "delete every dlk job in the namespace (asks first)"),
	OPT_BOOL('y', "yes", &opt.yes, "do not ask for confirmation"),
	OPT_MODE("job", &opt.what, DELETE_JOB, "only the training job NAME, not a model served under that name"),
	OPT_MODE("served", &opt.what, DELETE_SERVED, "only the model served as NAME (dlk serve), not its training job"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_delete = {
	.usage = "NAME...",
	.description = "Delete job NAME and every object dlk created for it (labelled dlk.dev/job=NAME): the\n"
	               "Job or CronJob with its pods, its Service, RBAC, ConfigMap and checkpoint claim; and the\n"
	               "model served as NAME (labelled dlk.dev/serve=NAME): its Deployments with their pods,\n"
	               "Service, ConfigMaps, autoscaler and disruption budget. --job or --served: only one.",
	.options = delete_options,
	.min_pos = 0,
	.max_pos = -1,
	.complete_pos = COMPLETE_JOB,
	.run = run_delete,
	.examples = "  $ dlk delete mnist\n"
	            "  $ dlk delete --served fashion\n"
	            "  $ dlk delete --all --yes -n experiments\n",
};
