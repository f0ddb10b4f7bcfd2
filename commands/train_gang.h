/* The terminal view of a gang of workers (lib/trainer/gang.h): their stderr merged with
 * "[rank N] " prefixes, rank 0's progress line kept on a terminal, the gang's failure reported. */
#ifndef DLK_COMMANDS_TRAIN_GANG_H
#define DLK_COMMANDS_TRAIN_GANG_H

#include "commands/ctx.h"
#include "commands/train.h"
#include "lib/project/project.h"

/* `dlk train --local --workers N` (dlk_trainer_gang), each worker running the --worker path
 * here. Returns the exit code; errors are reported. */
int dlk_train_gang(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec);

/* `dlk train --worker` in a pod given resources.gpus = gpus > 1 (dlk_trainer_pod_gang). Returns
 * the exit code; errors are reported. */
/* `dlk train --local [--workers N]` of a project whose program: is the workload */
int dlk_train_program(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec);

/* `dlk train --worker` in a pod of a project whose program: is the workload */
int dlk_train_program_pod(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec);

int dlk_train_pod_gang(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec, int gpus);

#endif
