/* Submitting what a project renders (lib/render) to the API: the objects in order, and first the
 * earlier Job of the same name out of the way. Library code: errors come back in struct dlk_err. */
#ifndef DLK_JOBS_SUBMIT_H
#define DLK_JOBS_SUBMIT_H

#include <cJSON.h>

#include "lib/jobs/jobdelete.h"
#include "lib/kube/client.h"
#include "lib/util/err.h"

/* When ns holds a Job name, deletes every object of that dlk job (dlk_delete_job_objects, each
 * told to on_deleted) and waits up to timeout_s for the Job to go; *deleted counts the objects.
 * Returns 1 when there was such a Job (now gone), 0 when there was none, -1 with err. */
int dlk_job_replace(struct kube_client *c, const char *ns, const char *name, double timeout_s, dlk_deleted_fn *on_deleted,
                    void *ud, int *deleted, struct dlk_err *err);

/* Submits objects (a JSON array, in the order the templates give) one by one: each server-side
 * applied (kube_apply), except one annotated dlk.dev/create-only: "true" (what outlives a job,
 * its run history), which is created only when missing and never replaced. A failure names the
 * object ("cannot submit Job 'x': ..."; the objects before it stay submitted). applied, when
 * not NULL (an array), gets each applied object as the server returned it. */
int dlk_submit_objects(struct kube_client *c, const cJSON *objects, cJSON *applied, struct dlk_err *err);

#endif
