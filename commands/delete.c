/* dlk delete: remove a job and everything dlk created for it. dlk labels every object it
 * renders dlk.dev/job=NAME, so deleting by that label across the kinds dlk renders cleans up
 * exactly what a submit made, including objects of an older dlk.yaml that a newer one no longer
 * renders. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Jobs first, so their pods stop before the ConfigMap and the RBAC they use disappear. */
static const char *const dlk_kinds[] = {
	"Job", "CronJob", "Service", "RoleBinding", "Role", "ServiceAccount", "ConfigMap", "PersistentVolumeClaim",
};

int dlk_delete_job_objects(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name,
			   int *deleted, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	char *sel = xasprintf("%s=%s", DLK_LABEL_JOB, name);
	int rc = -1;

	*deleted = 0;
	lo.label_selector = sel;
	for (size_t k = 0; k < DLK_ARRAY_SIZE(dlk_kinds); k++) {
		cJSON *list = NULL;
		const cJSON *it;
		if (kube_list(c, dlk_kinds[k], ns, &lo, &list, err) < 0)
			goto out;
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
			const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(it, "metadata"), "name");
			if (!cJSON_IsString(n))
				continue;
			if (kube_delete(c, dlk_kinds[k], ns, n->valuestring, err) < 0) {
				/* gone between the list and the delete: what we wanted */
				if (err->code == DLK_EXIT_NOTFOUND) {
					dlk_err_clear(err);
					continue;
				}
				cJSON_Delete(list);
				goto out;
			}
			if (ctx->verbose)
				dlk_info(ctx, "deleted %s/%s", dlk_kinds[k], n->valuestring);
			(*deleted)++;
		}
		cJSON_Delete(list);
	}
	rc = 0;
out:
	free(sel);
	return rc;
}

struct gone_state {
	const char *name;
	int gone;
	double deadline;
	int timed_out;
	kube_cancel_fn *inner;
	void *inner_ud;
};

static int gone_event(const char *type, const cJSON *obj, void *ud, struct dlk_err *err)
{
	struct gone_state *g = ud;

	(void)err;
	if (!strcmp(type, "RELIST")) {
		g->gone = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(obj, "items")) == 0;
	} else if (!strcmp(type, "DELETED")) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "name");
		g->gone = cJSON_IsString(n) && !strcmp(n->valuestring, g->name);
	}
	return g->gone;
}

static int gone_cancel(void *ud)
{
	struct gone_state *g = ud;

	if (dlk_now() >= g->deadline) {
		g->timed_out = 1;
		return 1;
	}
	return g->inner && g->inner(g->inner_ud);
}

int dlk_wait_job_gone(struct kube_client *c, const char *ns, const char *name, double timeout_s, struct dlk_err *err)
{
	struct kube_watch_opts o = KUBE_WATCH_OPTS_INIT;
	struct gone_state g = { name, 0, dlk_now() + timeout_s, 0, c->cancel, c->cancel_ud };
	char *field = xasprintf("metadata.name=%s", name);
	int rc;

	o.list.field_selector = field;
	/* the deadline rides on the cancel hook, which the library polls during the stream */
	c->cancel = gone_cancel;
	c->cancel_ud = &g;
	rc = kube_watch(c, "Job", ns, &o, gone_event, &g, err);
	c->cancel = g.inner;
	c->cancel_ud = g.inner_ud;
	free(field);
	if (rc < 0)
		return -1;
	if (g.gone)
		return 0;
	if (g.timed_out) {
		char d[32];
		dlk_duration_text(timeout_s, d, sizeof(d));
		return dlk_errf(err, DLK_EXIT_TIMEOUT, "job '%s' is still being deleted after %s", name, d);
	}
	return dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped waiting for job '%s' to be deleted", name);
}

/* The names of every dlk job in ns (from Jobs and CronJobs), sorted, unique. */
static int list_job_names(struct kube_client *c, const char *ns, cJSON **names, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	static const char *const kinds[] = { "Job", "CronJob" };

	*names = cJSON_CreateObject(); /* used as a set */
	lo.label_selector = DLK_LABEL_JOB;
	for (size_t k = 0; k < 2; k++) {
		cJSON *list = NULL;
		const cJSON *it;
		if (kube_list(c, kinds[k], ns, &lo, &list, err) < 0)
			return -1;
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
			const cJSON *l = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(it, "metadata"), "labels");
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(l, DLK_LABEL_JOB);
			if (cJSON_IsString(v) && !cJSON_GetObjectItemCaseSensitive(*names, v->valuestring))
				cJSON_AddTrueToObject(*names, v->valuestring);
		}
		cJSON_Delete(list);
	}
	return 0;
}

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
	int all, yes;
} opt;

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
	c = dlk_kube_client(ctx, NULL, &err);
	if (!c)
		return dlk_report(ctx, &err);
	ns = c->cfg.namespace;
	if (all) {
		if (list_job_names(c, ns, &names, &err) < 0) {
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
		int n = 0;
		if (dlk_delete_job_objects(ctx, c, ns, it->string, &n, &err) < 0) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		if (!n) {
			dlk_errf(&err, DLK_EXIT_NOTFOUND, "job '%s' not found in namespace '%s'", it->string, ns);
			dlk_err_hint(&err, "list the jobs with 'dlk status%s'; another namespace is -n NS", dlk_ns_flag(ctx, c, ns));
			rc = dlk_report(ctx, &err);
			dlk_err_clear(&err);
			missing++;
			continue;
		}
		if (!ctx->quiet)
			printf("deleted job '%s' (%d object%s)\n", it->string, n, n == 1 ? "" : "s");
	}
	if (missing)
		rc = DLK_EXIT_NOTFOUND;
out:
	if (c)
		dlk_kube_warnings(ctx, c);
	cJSON_Delete(names);
	kube_client_free(c);
	return rc;
}

static const struct dlk_option delete_options[] = {
	OPT_BOOL(0, "all", &opt.all, "delete every dlk job in the namespace (asks first)"),
	OPT_BOOL('y', "yes", &opt.yes, "do not ask for confirmation"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_delete = {
	.usage = "NAME...",
	.description = "Delete job NAME and every object dlk created for it (labelled dlk.dev/job=NAME): the\n"
	               "Job or CronJob with its pods, its Service, RBAC, ConfigMap and checkpoint claim.",
	.options = delete_options,
	.min_pos = 0,
	.max_pos = -1,
	.complete_pos = COMPLETE_JOB,
	.run = run_delete,
	.examples = "  $ dlk delete mnist\n"
	            "  $ dlk delete --all --yes -n experiments\n",
};
