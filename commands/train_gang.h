/* `dlk train --local --workers N`: a gang of N worker processes on this machine, each running
 * exactly the --worker path of a pod over loopback, supervised like the Job supervises pods. */
#ifndef DLK_COMMANDS_TRAIN_GANG_H
#define DLK_COMMANDS_TRAIN_GANG_H

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

#endif
