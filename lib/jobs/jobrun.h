/* The run a training job published on itself: rank 0's run document (the annotation
 * dlk.dev/metrics, rewritten after every epoch), with the job's state, workers and pod restarts
 * as its source. What `dlk report JOB`, `dlk train --report` and the promotion gate of
 * `dlk serve NAME` read. */
#ifndef DLK_JOBS_JOBRUN_H
#define DLK_JOBS_JOBRUN_H

#include <cJSON.h>

#include "lib/kube/client.h"
#include "lib/util/err.h"

/* The run document of the Job name in ns, through c, its source {"kind": "job", "name",
 * "namespace", "state", "workers", "pod_restarts"}. A new tree the caller owns, or NULL with err:
 * DLK_EXIT_NOTFOUND when there is no such Job or it has published nothing yet (the hints name
 * `dlk status` with ns_flag, e.g. " -n NS", appended); the document's own errors name the job
 * and the annotation. */
cJSON *dlk_job_run_doc(struct kube_client *c, const char *ns, const char *name, const char *ns_flag,
                       struct dlk_err *err);

#endif
