/* A sweep's trials as the commands show them (lib/sweep gathers them from the run history):
 * `dlk status SWEEP` and the end of `dlk sweep --local`. */
#ifndef DLK_COMMANDS_SWEEP_SHOW_H
#define DLK_COMMANDS_SWEEP_SHOW_H

#include "commands/ctx.h"

#include <cJSON.h>

/* 1 when the project here (-f) ran a sweep called id (its folder .dlk/sweeps/ID exists). */
int dlk_is_local_sweep(const struct dlk_ctx *ctx, const char *id);
/* The trials best first: TRIAL, OUTCOME, METRIC, STOPPED (the rung), each parameter, RUN; then
 * the best trial's bundle, servable with `dlk serve --local BUNDLE`. -o json|yaml: the document
 * of dlk_sweep_status. Returns the exit code. */
int dlk_show_sweep(struct dlk_ctx *ctx, const char *id);
/* The document of dlk_sweep_status for the sweep id run from here: from the cluster's run
 * histories when its driver ran the trials as Jobs (in the namespace it noted, or -n), else
 * from the local ones. NULL with err. */
cJSON *dlk_sweep_doc(struct dlk_ctx *ctx, const char *id, struct dlk_err *err);

#endif
