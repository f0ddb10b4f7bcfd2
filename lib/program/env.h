/* The environment (and, for torchrun, the command line) a user's program gets: the variables its
 * framework documents for a distributed run, and dlk's own. A pure function of where the process
 * stands in the gang, so the pod (dlk train --worker) and this machine (dlk train --local) give a
 * program the same thing, and a test checks each variable against the framework's documentation.
 *
 * Ranks: a gang has n_nodes nodes (pods; processes of `--local --workers N`), each running
 * procs_per_node processes; process local_rank of node node_rank has the global rank
 * node_rank * procs_per_node + local_rank, of world n_nodes * procs_per_node. When the command is
 * torchrun, dlk runs one torchrun per node, which starts the processes itself (local_rank unused).
 *
 * Frameworks whose every process listens (TensorFlow's workers, PaddlePaddle's trainers) get
 * the endpoint HOST:(port + global rank) for each process: distinct on one machine and on many. */
#ifndef DLK_PROGRAM_ENV_H
#define DLK_PROGRAM_ENV_H

#include "lib/project/program.h"
#include "lib/util/err.h"

struct program_place {
	int node_rank, n_nodes;       /* this node, of so many */
	int procs_per_node;           /* >= 1: resolved (0 = one per GPU is the caller's to resolve) */
	int local_rank;               /* this process on its node */
	int gpus;                     /* GPUs of the node (the pod's resources.gpus); 0: a CPU node */
	const char *master_addr;      /* rank 0's host name or address */
	int port;                     /* the rendezvous port (program.port) */
	const char *const *peers;     /* n_nodes host names, node 0 first; NULL: all at master_addr */
	int restart;                  /* how many times the gang was restarted before this start */
	const char *run_id;           /* required: names the run (torchrun's rdzv id) */
	const char *data_dir;         /* DLK_DATA_DIR: the verified dataset; NULL = none */
	const char *checkpoint_dir;   /* DLK_CHECKPOINT_DIR, required */
	const char *output_dir;       /* DLK_OUTPUT_DIR, required */
	const char *progress_file;    /* DLK_PROGRESS_FILE; NULL = none */
};

struct program_launch {
	char **env;   /* "KEY=VALUE", n_env entries, NULL-terminated; to add to the inherited env */
	int n_env;
	char **argv;  /* the command to exec, argc entries, NULL-terminated */
	int argc;
};
#define PROGRAM_LAUNCH_INIT { 0 }

/* true when dlk runs torchrun (command[0] is "torchrun"): one process per node, given flags */
int program_is_torchrun(const struct dlk_program *p);

/* processes dlk starts on one node: 1 under torchrun, else procs_per_node */
int program_procs_started(const struct dlk_program *p, int procs_per_node);

/* Fills out (released first) for the process at `at`: the program's own env first, then the
 * framework's and dlk's variables (which win); argv is command + args, or for torchrun the
 * rendezvous flags inserted after "torchrun". -1 with err (DLK_EXIT_USAGE) when `at` is
 * inconsistent (a rank out of range, a host name with a space, ports past 65535). */
int program_launch_build(const struct dlk_program *p, const struct program_place *at, struct program_launch *out,
                         struct dlk_err *err);
/* the value of KEY in l->env, NULL when not set */
const char *program_launch_get(const struct program_launch *l, const char *key);
void program_launch_release(struct program_launch *l);

#endif
