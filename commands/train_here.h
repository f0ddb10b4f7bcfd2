#ifndef DLK_COMMANDS_TRAIN_HERE_H
#define DLK_COMMANDS_TRAIN_HERE_H

#include <cJSON.h>

#include "commands/ctx.h"
#include "commands/train.h"
#include "lib/project/project.h"

/* Runs the training loop in this process (--local, or --worker in a pod) and reports the result.
 * Returns the exit code. */
int dlk_train_here(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec, int worker);

/* Where the model bundle goes: --bundle, else NAME.dlk next to the project file. Caller frees. */
char *dlk_train_bundle_path(const struct dlk_train_cli *cli, const char *spec_file, const char *name);

/* Where the runs' checkpoint folders are (each run's is BASE/RUN-ID): training.checkpoint_dir,
 * relative to the project file's folder here, or to the checkpoint volume in a pod. NULL when
 * the project keeps no checkpoints. Caller frees. */
char *dlk_train_ckpt_base(const struct dlk_project *spec, const char *spec_file, int in_pod);

#endif
