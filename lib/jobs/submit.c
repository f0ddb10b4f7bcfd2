/* Submitting rendered objects (see submit.h). */
#include "lib/jobs/submit.h"
#include "lib/kube/api.h"

#include <string.h>

int dlk_job_replace(struct kube_client *c, const char *ns, const char *name, double timeout_s, dlk_deleted_fn *on_deleted,
                    void *ud, int *deleted, struct dlk_err *err)
{
	cJSON *old = NULL;

	*deleted = 0;
	if (kube_get(c, "Job", ns, name, &old, err) < 0) {
		if (err->code != DLK_EXIT_NOTFOUND)
			return -1;
		dlk_err_clear(err);
		return 0;
	}
	cJSON_Delete(old);
	if (dlk_delete_job_objects(c, ns, name, on_deleted, ud, deleted, err) < 0 ||
	    dlk_wait_job_gone(c, ns, name, timeout_s, err) < 0)
		return -1;
	return 1;
}

int dlk_submit_objects(struct kube_client *c, const cJSON *objects, cJSON *applied, struct dlk_err *err)
{
	const cJSON *o;

	cJSON_ArrayForEach(o, objects) {
		const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
		const cJSON *once = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "annotations"),
		                                                     "dlk.dev/create-only");
		const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "kind"));
		cJSON *got = NULL;

		if (cJSON_IsString(once) && !strcmp(once->valuestring, "true")) {
			if (kube_create(c, o, &got, err) < 0) {
				if (err->code != DLK_EXIT_EXISTS)
					return dlk_err_prefix(err, "cannot create %s '%s'", kind ? kind : "?", kube_meta(o, "name"));
				dlk_err_clear(err);
			}
			cJSON_Delete(got);
			continue;
		}
		if (kube_apply(c, o, &got, err) < 0)
			return dlk_err_prefix(err, "cannot submit %s '%s'", kind ? kind : "?", kube_meta(o, "name"));
		if (applied)
			cJSON_AddItemToArray(applied, got);
		else
			cJSON_Delete(got);
	}
	return 0;
}
