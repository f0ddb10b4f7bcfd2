/* A training run in this process: `dlk train --local` (alone, or one worker process of a local
 * gang) and `dlk train --worker` in a pod. It joins the other ranks (the rendezvous, the TCP
 * ring or NCCL), loads the data, resumes from the newest checkpoint that verifies (rank 0 loads
 * it and broadcasts it), runs the loop (lib/train) with its gradients averaged over the ranks,
 * stops after a step on a signal or a resize of its Job (with a checkpoint), and on rank 0
 * writes checkpoints, the bundle, the run's record and its progress on the Job. What the user
 * sees comes through the sink. */
#ifndef DLK_TRAINER_HERE_H
#define DLK_TRAINER_HERE_H

#include "lib/data/dataset.h"
#include "lib/project/project.h"
#include "lib/trainer/trainer.h"
#include "lib/util/err.h"

/* data.dataset: the store and the node cache the sources are read through. Opening a store may
 * need the caller's cluster client, so the caller does it: open points dopts at the dataset (and
 * returns a handle of its own in *data, NULL when the project names no dataset), loaded is told
 * when the data is loaded (on rank), close frees the handle. */
struct dlk_trainer_data_hooks {
	int (*open)(void *ud, const struct dlk_project *spec, int worker, const char *project_dir,
	            struct dlk_data_opts *dopts, void **data, struct dlk_err *err);
	void (*loaded)(void *ud, void *data, int rank);
	void (*close)(void *ud, void *data);
	void *ud;
};

struct dlk_trainer_here_opts {
	struct dlk_trainer_opts run; /* spec_file, bundle, in_pod (--worker), fresh, if_data_changed */
	int worker;                  /* a rank of a gang: its place comes from the environment (RANK, ...) */
	int verbose;                 /* say the details too (-v) */
	int metrics_port;            /* serve Prometheus metrics on this port + the local rank; 0: not */
	const char *report;          /* NULL, or the report page written from the bundle at the end */
	struct dlk_trainer_data_hooks data;
};

/* Runs the training (the sink's placed, data, start, event, result and clear callbacks follow
 * it; its notes say the rest). Returns the exit code: 0, or the code of the failure in err
 * (DLK_EXIT_RESTARTABLE: stopped by a signal or a lost peer, DLK_EXIT_RESIZED: the Job was
 * resized, ...), which the caller reports; the run's record already says how it ended. */
int dlk_trainer_here(const struct dlk_trainer_here_opts *o, const struct dlk_project *spec,
                     const struct dlk_trainer_sink *sink, struct dlk_err *err);

#endif
