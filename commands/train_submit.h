/* dlk train without a mode flag: submit the rendered objects and, with --wait, --follow or
 * --timeout, stay until the job ends. */
#ifndef DLK_COMMANDS_TRAIN_SUBMIT_H
#define DLK_COMMANDS_TRAIN_SUBMIT_H

#include "commands/ctx.h"
#include "commands/train.h"
#include "lib/project/project.h"

/* Renders the spec's objects and applies them (then waits, as cli says). Returns the exit
 * code; errors are reported. */
int dlk_train_submit(struct dlk_ctx *ctx, const struct dlk_train_cli *cli, const struct dlk_project *spec);
/* Warns (on stderr, not with -q) of what will not work when spec runs in a cluster, though it
 * runs here (project_cluster_warnings): before a submit, and with --dry-run. */
void dlk_train_cluster_warnings(const struct dlk_ctx *ctx, const struct dlk_project *spec);
/* Watches Job name until it ends (progress on a terminal, a line per change of state without
 * one), as `dlk train --wait` does; 0 when it succeeded, else the exit code, reported (a failed
 * rank named with its cause). timeout_s 0: no limit. For other commands that submit a Job. */
struct kube_client;
int dlk_train_wait_job(struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, double timeout_s);

#endif
