#ifndef DLK_TRAINER_HERE_H
#define DLK_TRAINER_HERE_H

#include <cJSON.h>

#include "commands/ctx.h"
#include "commands/train.h"
#include "lib/project/project.h"

/* Runs the training loop in this process (--local, or --worker in a pod) and reports the result.
 * Returns the exit code. */
int dlk_train_here(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec, int worker);

#endif
