/* The driver of a pipeline on a cluster (`dlk pipeline drive`, in the pod of the driver's Job):
 * it decides the stages in dependency order by their keys (lib/pipeline/run.c) and, for each stage
 * whose key has no output in the store, creates the stage's Job from the pipeline's ConfigMap
 * (NAME-pipeline-jobs, jobs.json: stage name -> Job), annotated with the key it is to make, and
 * follows it to its end. A stage Job that a stopped driver left running for the same key is
 * followed, not created again; a Job of the stage's name without the pipeline's label is left
 * alone (an error), whatever RBAC would allow. The API calls go through struct dlk_pipeline_api,
 * so that a test can drive it without a cluster; dlk_pipeline_api_kube() binds it to a client.
 * Library code: nothing is printed, notes go through the sink. */
#ifndef DLK_PIPELINE_DRIVE_H
#define DLK_PIPELINE_DRIVE_H

#include <cJSON.h>

#include "lib/pipeline/pipeline.h"
#include "lib/util/err.h"

struct kube_client;

/* The API calls of the driver, on Jobs of its namespace. Each returns 0, or -1 with err (a Job
 * that is not there: DLK_EXIT_NOTFOUND). *out (get, create) is a new object the caller frees. */
struct dlk_pipeline_api {
	int (*get_job)(void *ud, const char *name, cJSON **out, struct dlk_err *err);
	int (*create_job)(void *ud, const cJSON *job, cJSON **out, struct dlk_err *err);
	int (*delete_job)(void *ud, const char *name, struct dlk_err *err);
	/* sets annotation key=value on Job name (the driver's own, for its status) */
	int (*annotate_job)(void *ud, const char *name, const char *key, const char *value, struct dlk_err *err);
	/* waits a little between two looks at a Job; NULL: does not wait */
	void (*nap)(void *ud);
	void *ud;
};

/* A client and namespace that dlk_pipeline_api_kube() binds an API to; they outlive the API. */
struct dlk_pipeline_kube {
	struct kube_client *client;
	const char *namespace_;
};

/* Fills api with calls of k's client in k's namespace (half a second between looks). */
void dlk_pipeline_api_kube(struct dlk_pipeline_api *api, struct dlk_pipeline_kube *k);

/* "running", "succeeded" or "failed": a Job's state by its Complete/Failed conditions. */
const char *dlk_pipeline_job_state(const cJSON *job);

/* The stage Jobs of the pipeline's ConfigMap cm (named cm_name in messages): its jobs.json, an
 * object stage name -> Job. A new object, or NULL with err (DLK_EXIT_CONFIG). */
cJSON *dlk_pipeline_stage_jobs(const cJSON *cm, const char *cm_name, struct dlk_err *err);

/* Why stage Job job failed, for the stage's reason: "its job 'NAME' failed: rank R (pod P)
 * failed: CLASS (exit N): MESSAGE" when a worker published its failure (dlk.dev/failure), else
 * what the Job's Failed condition says. */
void dlk_pipeline_job_failure(const cJSON *job, char *out, size_t n);

/* Whether Job job is a run of pipeline name's driver: its Job NAME-pipeline, or a Job that the
 * CronJob NAME-pipeline started (its owner). */
int dlk_pipeline_is_driver_run(const cJSON *job, const char *name);

/* The driver's runs among jobs (an array of Jobs, e.g. a list's items), newest first: a new
 * array of {"job": NAME, "state": running|succeeded|failed, "created": TIME, "status": the
 * stages' status the run published when it ended (dlk.dev/pipeline-status), or null}. */
cJSON *dlk_pipeline_driver_runs(const cJSON *jobs, const char *name);

/* Runs the pipeline with its stages as Jobs: dlk_pipeline_run_local() with o (store, store_url,
 * self, only, force; remote and parallel are set here: one stage at a time) whose stages that
 * must run are the Jobs of jobs, created and followed through api. A failed stage's reason names
 * its Job, the failing rank and the cause, and blocks the stages below it. When driver_job is
 * not NULL the stages' status (status.json) is published on that Job as the annotation
 * dlk.dev/pipeline-status when the run ends, also when a stage failed (a failure to publish is a
 * warning note). Returns what dlk_pipeline_run_local() returns. */
int dlk_pipeline_drive(const struct dlk_pipeline *p, const cJSON *jobs, const struct dlk_pipeline_api *api,
                       const char *driver_job, const struct dlk_pipeline_run_opts *o,
                       const struct dlk_pipeline_sink *sink, struct dlk_err *err);

#endif
