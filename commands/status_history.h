/* The run history as the commands show it (lib/runs keeps it): `dlk status NAME --history`
 * lists a project's runs, `dlk status NAME --run ID` shows one, and `dlk report RUN-ID` draws
 * one. --local reads the history kept next to the project file (.dlk/runs/NAME), no cluster
 * needed; otherwise the cluster's (the ConfigMap NAME-runs of the namespace). */
#ifndef DLK_COMMANDS_STATUS_HISTORY_H
#define DLK_COMMANDS_STATUS_HISTORY_H

#include <cJSON.h>

#include "commands/ctx.h"
#include "lib/kube/client.h"
#include "lib/runs/runs.h"

/* The history of project name: the local one, or the cluster's through a client made from the
 * global options (returned in *kc, the caller's to close with dlk_kube_close). */
struct dlk_run_store *dlk_open_run_history(const struct dlk_ctx *ctx, const char *name, int local,
                                           struct kube_client **kc, struct dlk_err *err);
/* `dlk status NAME --history`: a table of the runs, newest first (-o wide: more columns; -o
 * json|yaml: {"project", "store", "dropped", "usage", "runs": [the full records]}). by
 * "dataset": the usage summed per dataset the runs trained on instead (a table; -o json|yaml:
 * {"project", "store", "by", "usage", "groups": [dlk_usage_by_dataset]}); NULL: the runs.
 * Returns the exit code. */
int dlk_show_run_history(struct dlk_ctx *ctx, const char *name, int local, const char *by);
/* `dlk status NAME --run ID` (ID: the run's id or at least 4 characters of it). */
int dlk_show_run(struct dlk_ctx *ctx, const char *name, const char *id, int local);
/* `dlk status NAME --run A --compare B`: the two runs' outcome, metrics, settings and digests
 * side by side, the facts that differ marked (-o json: {"runs": [a, b], "differ": [names]}). */
int dlk_compare_runs(struct dlk_ctx *ctx, const char *name, const char *id_a, const char *id_b, int local);
/* For `dlk status NAME`: the run the Job is (its uid) as the run history has it, and for a
 * failed run its cause, as lines appended to b. Nothing when the history has no such run or
 * cannot be read (the job's status stands without it). */
void dlk_job_run_lines(const struct dlk_ctx *ctx, struct kube_client *c, const cJSON *job, struct dlk_buf *b);
#endif
