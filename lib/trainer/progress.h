/* Rank 0 of a training Job publishes its progress on its own Job, as the annotation
 * dlk.dev/progress (a JSON string), so that `dlk status` and kubectl show it without logs, and
 * after every epoch the run so far as dlk.dev/metrics, which `dlk report JOB` draws. */
#ifndef DLK_TRAINER_PROGRESS_H
#define DLK_TRAINER_PROGRESS_H

#include "lib/trainer/trainer.h"
#include "lib/train/progress.h"
#include "lib/train/train.h"

#define DLK_PROGRESS_INTERVAL_SEC 10.0

struct dlk_job_progress;
/* A publisher for the Job named by $DLK_JOB_NAME when running in a cluster
 * ($KUBERNETES_SERVICE_HOST set; the service account's files in $DLK_SERVICEACCOUNT_DIR, else
 * the standard mount); NULL otherwise, or (after one warning) when the in-cluster
 * configuration cannot be read. Its warnings go to sink (borrowed: it outlives the publisher). */
struct dlk_job_progress *dlk_job_progress_new(const struct dlk_trainer_sink *sink);
/* Publishes ev when DLK_PROGRESS_INTERVAL_SEC passed since the last patch, or at once for epoch
 * ends and the end of the run; with those, metrics (the run document so far, or NULL) goes in
 * the same patch as the annotation dlk.dev/metrics. A failed patch is warned about once and
 * never stops training. */
void dlk_job_progress_event(struct dlk_job_progress *p, const struct dlk_train_event *ev, const char *metrics);
/* Publishes metrics (a run document) alone as dlk.dev/metrics: the bundle's, once it is written,
 * so that the job's document names the weights' digest `dlk serve` deploys. */
void dlk_job_progress_metrics(struct dlk_job_progress *p, const char *metrics);
/* A user's program's progress (lib/program/supervise.c): json is the annotation's value,
 * published as dlk_job_progress_event does (at once with at_once, else at most every
 * DLK_PROGRESS_INTERVAL_SEC). */
void dlk_job_progress_raw(struct dlk_job_progress *p, const char *json, int at_once);
void dlk_job_progress_free(struct dlk_job_progress *p);

/* Elastic workers: how many workers (pods) the Job has now, its spec.completions, which
 * `dlk scale` changes while it runs. In *n (0 when the Job does not say, or is not Indexed); -1
 * with err when the Job cannot be read. */
int dlk_job_progress_workers(struct dlk_job_progress *p, int *n, struct dlk_err *err);
/* The same for a worker before it joins the gang, from a client of its own: 0 with *n = 0 when
 * not in a cluster, or in a CronJob's run (its Jobs are not resized, and the Role cannot name
 * them). */
int dlk_job_workers(int *n, struct dlk_err *err);
/* A worker in a pod, before it reads its environment: WORLD_SIZE (when set, as the template sets
 * it) set to the Job's workers now when `dlk scale` changed them since the pod was made (a
 * Job's pod template cannot change). A
 * Job that cannot be read leaves WORLD_SIZE as it is, with a warning. -1 with
 * DLK_EXIT_RESTARTABLE when this pod's rank is beyond the new size (the Job controller is
 * removing it). */
int dlk_job_world_env(const struct dlk_trainer_sink *sink, struct dlk_err *err);
/* A worker that fails publishes why (lib/jobs/failure.h): its rank, pod, the class of
 * exit_code and message, as the container's termination message (the file named by
 * $DLK_TERMINATION_LOG) and, in a cluster, as the Job's annotation dlk.dev/failure. What cannot
 * be published is warned about. */
void dlk_train_publish_failure(const struct dlk_trainer_sink *sink, int exit_code, const char *message);
/* The same with the class given (a user's program's: dlk_program_exit_class()); NULL: the
 * exit code's name as dlk_train_publish_failure gives it. */
/* The failure a worker of this pod's Job published on the Job (its dlk.dev/failure
 * annotation): 0 and *f, -1 when there is none or the Job cannot be read (not in a cluster). */
struct dlk_failure;
int dlk_train_job_failure(const struct dlk_trainer_sink *sink, struct dlk_failure *f);
/* Before a pod's rank (the Job's index `rank`, one rank a pod) waits for its gang: -1 with err
 * (restartable, saying which completed and what to do) when ranks of its Job other than it have
 * already completed (the Job's completedIndexes), so that the gang can never form again (a retry
 * of a rank that failed after the others finished); 0 when none did, or the Job cannot be read
 * (not in a cluster). */
int dlk_train_gang_gone(const struct dlk_trainer_sink *sink, int rank, struct dlk_err *err);
void dlk_train_publish_failure_class(const struct dlk_trainer_sink *sink, int exit_code, const char *cls,
                                     const char *message);

#endif
