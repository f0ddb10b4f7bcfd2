/* Deleting a dlk job (see jobdelete.h). dlk labels every object it renders dlk.dev/job=NAME, so
 * deleting by that label across the kinds dlk renders cleans up exactly what a submit made,
 * including objects of an older dlk.yaml that a newer one no longer renders. */
#include "lib/jobs/jobdelete.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/servestate.h"
#include "lib/kube/api.h"
#include "lib/util/clock.h"
#include "lib/util/duration.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

/* Jobs first, so their pods stop before the ConfigMap and the RBAC they use disappear. */
static const char *const dlk_kinds[] = {
	"Job", "CronJob", "Service", "RoleBinding", "Role", "ServiceAccount", "ConfigMap", "PersistentVolumeClaim",
};

/* Deployments first, so their pods stop before their ConfigMaps go. */
static const char *const serve_kinds[] = {
	"HTTPRoute", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service", "ConfigMap",
};

static int delete_labelled(struct kube_client *c, const char *ns, const char *sel, const char *const *kinds, size_t n_kinds,
			   dlk_deleted_fn *on_deleted, void *ud, int *deleted, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;

	*deleted = 0;
	lo.label_selector = sel;
	for (size_t k = 0; k < n_kinds; k++) {
		cJSON *list = NULL;
		const cJSON *it;
		if (kube_list(c, kinds[k], ns, &lo, &list, err) < 0) {
			/* a kind the cluster does not serve (the Gateway API's) has no objects to delete */
			if (err->code == DLK_EXIT_NOTFOUND && !strcmp(kinds[k], "HTTPRoute")) {
				dlk_err_clear(err);
				continue;
			}
			return -1;
		}
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
			const char *n = kube_meta(it, "name");
			if (!n)
				continue;
			if (kube_delete(c, kinds[k], ns, n, err) < 0) {
				/* gone between the list and the delete: what we wanted */
				if (err->code == DLK_EXIT_NOTFOUND) {
					dlk_err_clear(err);
					continue;
				}
				cJSON_Delete(list);
				return -1;
			}
			if (on_deleted)
				on_deleted(ud, kinds[k], n);
			(*deleted)++;
		}
		cJSON_Delete(list);
	}
	return 0;
}

int dlk_delete_job_objects(struct kube_client *c, const char *ns, const char *name, dlk_deleted_fn *on_deleted,
			   void *ud, int *deleted, struct dlk_err *err)
{
	char *sel = dlk_job_selector(name);
	int rc = delete_labelled(c, ns, sel, dlk_kinds, DLK_ARRAY_SIZE(dlk_kinds), on_deleted, ud, deleted, err);

	free(sel);
	return rc;
}

int dlk_delete_served_objects(struct kube_client *c, const char *ns, const char *name, dlk_deleted_fn *on_deleted,
			      void *ud, int *deleted, struct dlk_err *err)
{
	char *sel = dlk_serve_selector(name, NULL);
	int rc = delete_labelled(c, ns, sel, serve_kinds, DLK_ARRAY_SIZE(serve_kinds), on_deleted, ud, deleted, err);

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
		const char *n = kube_meta(obj, "name");
		g->gone = n && !strcmp(n, g->name);
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
	struct gone_state g = { name, 0, dlk_now() + timeout_s, 0, NULL, NULL };
	char *field = xasprintf("metadata.name=%s", name);
	int rc;

	o.list.field_selector = field;
	/* the deadline rides on the cancel hook, which the library polls during the stream */
	kube_client_cancel_hook(c, &g.inner, &g.inner_ud);
	kube_client_set_cancel(c, gone_cancel, &g);
	rc = kube_watch(c, "Job", ns, &o, gone_event, &g, err);
	kube_client_set_cancel(c, g.inner, g.inner_ud);
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

int dlk_job_names(struct kube_client *c, const char *ns, cJSON **names, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	static const char *const kinds[] = { "Job", "CronJob" };

	*names = cJSON_CreateObject(); /* used as a set */
	lo.label_selector = DLK_LABEL_JOB;
	for (size_t k = 0; k < 2; k++) {
		cJSON *list = NULL;
		const cJSON *it;
		if (kube_list(c, kinds[k], ns, &lo, &list, err) < 0) {
			/* a kind the cluster does not serve (the Gateway API's) has no objects to delete */
			if (err->code == DLK_EXIT_NOTFOUND && !strcmp(kinds[k], "HTTPRoute")) {
				dlk_err_clear(err);
				continue;
			}
			return -1;
		}
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

