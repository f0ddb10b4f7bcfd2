/* `dlk train --local --workers N`: a gang of N worker processes on this machine, each running
 * exactly the --worker path of a pod over loopback, supervised like the Job supervises pods. */
#ifndef DLK_TRAINER_GANG_H
#define DLK_TRAINER_GANG_H

#include "commands/ctx.h"
#include "commands/train.h"
#include "lib/project/project.h"

#define DLK_GANG_MAX_WORKERS 64

/* Forks opts->workers processes (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT of a socket
 * the parent opened), merges their stderr with "[rank N] " prefixes (rank 0's progress line
 * kept on a terminal), and supervises them: a worker that exits with DLK_EXIT_RESTARTABLE or
 * dies by a signal restarts the whole gang, one generation later, from the last checkpoint, at
 * most opts->max_restarts times; any other failure stops the gang with that worker's exit code.
 * SIGINT/SIGTERM stop the gang cleanly (the workers write a checkpoint). Returns the exit code. */
int dlk_train_gang(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec);

/* `dlk train --worker` in a pod given resources.gpus = N > 1: one worker process per GPU, ranks
 * RANK*N .. RANK*N + N-1 of WORLD_SIZE*N (RANK, WORLD_SIZE and MASTER_ADDR as the pod's environment
 * gives them for its pod), LOCAL_RANK picking each one's GPU; their stderr merged with "[rank N] "
 * prefixes. No restarts here: a rank that fails stops the pod's others and the pod exits with its
 * code (DLK_EXIT_RESTARTABLE for a death by signal), and the Job restarts the gang. */
int dlk_train_pod_gang(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec, int gpus);

#endif
