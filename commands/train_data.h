/* train's side of data.dataset (commands/train_data.c). */
#ifndef DLK_COMMANDS_TRAIN_DATA_H
#define DLK_COMMANDS_TRAIN_DATA_H

#include "commands/ctx.h"
#include "lib/util/err.h"

struct dlk_project;
struct dlk_data_opts;
struct dlk_train_data;

/* A dataset named by tag only gets its id from the store (spec->data.dataset.id), so that the
 * job, every worker and the bundle see one id; nothing to do otherwise. For a run in the
 * cluster (cluster), a store that is a directory of this machine is refused. */
int dlk_train_pin_dataset(const struct dlk_ctx *ctx, struct dlk_project *spec, int cluster, struct dlk_err *err);

/* With data.dataset: opens the store (a worker reads a pvc:// store on its mounted claim),
 * verifies the manifest, opens the node cache ($DLK_DATA_CACHE in a pod, data.cache_dir here)
 * and points dopts->resolve at the dataset. *out stays NULL when the project names no dataset. */
int dlk_train_data_open(const struct dlk_ctx *ctx, const struct dlk_project *spec, int worker, const char *project_dir,
                        struct dlk_data_opts *dopts, struct dlk_train_data **out, struct dlk_err *err);
/* After the data is loaded: the line saying how much came from the node cache, then the cache
 * trimmed to its bound (keeping what this run uses). */
void dlk_train_data_done(const struct dlk_ctx *ctx, struct dlk_train_data *td, int rank);
void dlk_train_data_free(struct dlk_train_data *td);
/* A user's program (program:) reads data.dataset as files: every file of the dataset placed,
 * verified, under a directory (through the node cache as dlk_train_data_open reads it): here
 * PROJECT_DIR/.dlk/data/ID, in a pod $DLK_DATA_CACHE/datasets/ID (the node cache's volume), else
 * /tmp/dlk-data/ID. *dir (absolute here: the program runs in its code's directory) and *id (the
 * dataset's id, 64 hex digits: the run records it) stay NULL when the project names no dataset;
 * the caller frees both. */
int dlk_train_program_data(const struct dlk_ctx *ctx, const struct dlk_project *spec, int worker,
                           const char *project_dir, char **dir, char **id, struct dlk_err *err);

#endif
