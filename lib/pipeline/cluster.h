/* A pipeline on a cluster: what `dlk pipeline run` sends, and the driver's side.
 *
 * Each stage is the program Job that `dlk train` renders (lib/render, templates/job.yaml) for a
 * project made from the stage: its one worker runs `dlk pipeline run --local STAGE` on a copy of
 * the pipeline's directory (shipped as the program's code ConfigMap), so the stage's inputs and
 * the stages above it are taken from the store by their keys and its output is pushed there with
 * its key tag, exactly as on a laptop. The driver is such a Job too (`dlk pipeline drive`), or
 * a CronJob with schedule: / trigger: data-changed; it decides stage by stage (lib/pipeline's
 * keys) and creates a stage's Job, from the pipeline's ConfigMap NAME-pipeline-jobs, only when
 * its key has no output in the store. Library code: nothing is printed. */
#ifndef DLK_PIPELINE_CLUSTER_H
#define DLK_PIPELINE_CLUSTER_H

#include <cJSON.h>

#include "lib/pipeline/pipeline.h"
#include "lib/util/err.h"

#define DLK_PIPELINE_LABEL "dlk.dev/pipeline"         /* on every object of a pipeline's */
#define DLK_PIPELINE_KEY_ANNOTATION "dlk.dev/pipeline-key" /* a stage Job: the key it makes */
#define DLK_PIPELINE_STATUS_ANNOTATION "dlk.dev/pipeline-status" /* the driver's Job: status.json */
#define DLK_PIPELINE_DATA_CHANGED_SCHEDULE "*/10 * * * *" /* trigger: data-changed without schedule: */

/* The names of a pipeline's objects. Each is a new string the caller frees. */
char *dlk_pipeline_driver_name(const struct dlk_pipeline *p);     /* NAME-pipeline: the driver's Job */
char *dlk_pipeline_jobs_config_map(const struct dlk_pipeline *p); /* NAME-pipeline-jobs */
char *dlk_pipeline_stage_job(const struct dlk_pipeline *p, const struct dlk_stage *s); /* NAME-STAGE */

/* Every object a cluster run sends, in the order to apply them: each stage's objects but its Job
 * (ConfigMaps, ServiceAccount, Role, RoleBinding, Service), the ConfigMap holding the stage Jobs,
 * the driver's objects with the driver's Role and RoleBinding (Jobs: create; get and delete by
 * name, only the stage Jobs), and last the driver's Job (or CronJob with a schedule). The store
 * must be one the pods reach (s3://, pvc://). namespace_ NULL: "default". A new array, or NULL
 * with err (DLK_EXIT_CONFIG naming the stage). */
cJSON *dlk_pipeline_render_cluster(const struct dlk_pipeline *p, const char *namespace_, struct dlk_err *err);

/* The log of a stage's newest run, archived by its worker on the pipeline's log_claim (read once
 * its pods are gone): s is the stage Job's archive folder, dlk-logs/NAME-STAGE of the claim. Each
 * line of the run whose last line is the latest goes to fn (without its time), in the order
 * written; fn returning non-zero stops. run gets the run's id. 0; -1 with err (DLK_EXIT_NOTFOUND:
 * no archive there). */
struct dlk_store;
int dlk_pipeline_archived_log(struct dlk_store *s, int (*fn)(const char *line, size_t len, void *ud), void *ud,
                              char run[96], struct dlk_err *err);

/* Whether a Job object belongs to pipeline name (its dlk.dev/pipeline label). */
int dlk_pipeline_owns(const cJSON *job, const char *name);

#endif
