/* Deleting a dlk job: every object labelled with it, then waiting for its Job to go; and the
 * names of the dlk jobs a namespace holds. */
#ifndef DLK_JOBS_JOBDELETE_H
#define DLK_JOBS_JOBDELETE_H

#include <cJSON.h>

#include "lib/kube/client.h"
#include "lib/util/err.h"

/* Told about each object deleted (kind, name), e.g. for -v. */
typedef void dlk_deleted_fn(void *ud, const char *kind, const char *name);

/* Deletes every object labelled dlk.dev/job=name of the kinds dlk renders (Jobs and CronJobs
 * first, Background propagation). *deleted counts them (0: nothing was there, not an error). */
int dlk_delete_job_objects(struct kube_client *c, const char *ns, const char *name, dlk_deleted_fn *on_deleted,
			   void *ud, int *deleted, struct dlk_err *err);
/* The same for a served model: every object labelled dlk.dev/serve=name (Deployments first;
 * their pods go with them). */
int dlk_delete_served_objects(struct kube_client *c, const char *ns, const char *name, dlk_deleted_fn *on_deleted,
			      void *ud, int *deleted, struct dlk_err *err);
/* Waits (watching) until the Job name is gone, or timeout_s passes (DLK_EXIT_TIMEOUT); the
 * client's cancel hook stops the wait with DLK_EXIT_INTERRUPTED. */
int dlk_wait_job_gone(struct kube_client *c, const char *ns, const char *name, double timeout_s,
		      struct dlk_err *err);
/* The names of every dlk job in ns (the dlk.dev/job label of its Jobs and CronJobs), as a new
 * object used as a set (names are keys, unique, in the order the server listed them), or -1 with err. */
int dlk_job_names(struct kube_client *c, const char *ns, cJSON **names, struct dlk_err *err);

#endif
