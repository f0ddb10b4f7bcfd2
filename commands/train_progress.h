/* Rank 0 of a training Job publishes its progress on its own Job, as the annotation
 * dlk.dev/progress (a JSON string), so that `dlk status` and kubectl show it without logs, and
 * after every epoch the run so far as dlk.dev/metrics, which `dlk report JOB` draws. */
#ifndef DLK_COMMANDS_TRAIN_PROGRESS_H
#define DLK_COMMANDS_TRAIN_PROGRESS_H

#include "commands/ctx.h"
#include "lib/train/progress.h"
#include "lib/train/train.h"

#define DLK_PROGRESS_INTERVAL_SEC 10.0

struct dlk_job_progress;
/* A publisher for the Job named by $DLK_JOB_NAME when running in a cluster
 * ($KUBERNETES_SERVICE_HOST set; the service account's files in $DLK_SERVICEACCOUNT_DIR, else
 * the standard mount); NULL otherwise, or (after one warning) when the in-cluster
 * configuration cannot be read. */
struct dlk_job_progress *dlk_job_progress_new(const struct dlk_ctx *ctx);
/* Publishes ev when DLK_PROGRESS_INTERVAL_SEC passed since the last patch, or at once for epoch
 * ends and the end of the run; with those, metrics (the run document so far, or NULL) goes in
 * the same patch as the annotation dlk.dev/metrics. A failed patch is warned about once and
 * never stops training. */
void dlk_job_progress_event(struct dlk_job_progress *p, const struct dlk_train_event *ev, const char *metrics);
/* Publishes metrics (a run document) alone as dlk.dev/metrics: the bundle's, once it is written,
 * so that the job's document names the weights' digest `dlk serve` deploys. */
void dlk_job_progress_metrics(struct dlk_job_progress *p, const char *metrics);
void dlk_job_progress_free(struct dlk_job_progress *p);

/* A worker that fails publishes why (lib/jobs/failure.h): its rank, pod, the class of
 * exit_code and message, as the container's termination message (the file named by
 * $DLK_TERMINATION_LOG) and, in a cluster, as the Job's annotation dlk.dev/failure. What cannot
 * be published is warned about. */
void dlk_train_publish_failure(const struct dlk_ctx *ctx, int exit_code, const char *message);

#endif
