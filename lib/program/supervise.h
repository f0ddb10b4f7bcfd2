/* A user's program run by dlk's gang supervisor (lib/trainer/gang.c): its processes started with
 * the environment of lib/program/env.h, their output prefixed and merged as for dlk's own
 * workers, rank 0's progress lines (lib/program/protocol.h) turned into progress and, at the end,
 * into the run's record (metrics, confusion matrix, the model's path, the code's digest), and
 * its exit codes mapped by program.exit_codes: a fail code stops the run naming the rank and its
 * last line; a death by a signal or any other non-zero code restarts the whole gang (which
 * resumes from the program's own checkpoint in DLK_CHECKPOINT_DIR) up to the restart limit. */
#ifndef DLK_PROGRAM_SUPERVISE_H
#define DLK_PROGRAM_SUPERVISE_H

#include <stddef.h>

#include "lib/project/project.h"
#include "lib/store/manifest.h"
#include "lib/trainer/trainer.h"
#include "lib/util/err.h"

/* How the command shows the gang (the hooks of lib/trainer/gang.h, which get the same
 * arguments): an ordinary line of a process, a progress line of rank 0 to draw in place, the end
 * of a generation. ud is passed to each. A line's rank is -1 when it is to be shown without one:
 * the only process of a pod, whose log is its rank's already (`dlk logs` and the log archive's
 * reader prefix it). */
struct dlk_program_view {
	void (*line)(void *ud, int local, int rank, char *s, size_t n);
	void (*progress)(void *ud, int local, int rank, char *s, size_t n);
	void (*ended)(void *ud);
	void *ud;
	/* where the command placed data.dataset's files (DLK_DATA_DIR); NULL: none (the directory of
	 * a local data.train.images file, if any) */
	const char *data_dir;
	/* data.dataset's id (64 hex digits) when data_dir holds it: the run records it as its data */
	const char *data_id;
	/* `dlk train --local --metrics-port PORT`: the supervisor serves the gang's Prometheus
	 * metrics (lib/trainer/metrics.h) there, fed from rank 0's reports; 0: none. In a pod the
	 * port is DLK_METRICS_PORT (resources.metrics_port), as for dlk's own workers. */
	int metrics_port;
	/* -v: say which GPU each rank's is sampled on (lib/program/gpus.h), or why none */
	int verbose;
};

/* 1 when an exit status (waitpid's) restarts the gang under program's exit_codes, 0 when it
 * fails the run */
int dlk_program_restarts(const struct dlk_program *p, int status);

/* The manifest of a code directory (lib/store/manifest.h): every regular file under dir except
 * those below a directory named .dlk (dlk's outputs beside dlk.yaml), .git or __pycache__; its id
 * is the code's digest, so the same tree of files has one digest wherever it is. -1 with err. */
int dlk_program_code_manifest(const char *dir, struct dlk_manifest *m, struct dlk_err *err);

/* The digest of a code directory: dlk_program_code_manifest()'s id. -1 with err. */
int dlk_program_code_digest(const char *dir, char hex[65], struct dlk_err *err);

/* `dlk train --local [--workers N]` of a project with program: (opts->workers nodes of
 * program.procs_per_worker processes, rank 0 at 127.0.0.1). Returns the exit code, with err set
 * when there is a failure to tell. */
int dlk_program_local(const struct dlk_trainer_opts *opts, const struct dlk_project *spec,
                      const struct dlk_program_view *view, const struct dlk_trainer_sink *sink, struct dlk_err *err);

/* `dlk train --worker` in a pod of a project with program: (the pods the cluster side renders):
 * this pod is node RANK of WORLD_SIZE (the Job's environment, lib/comm/rendezvous.h), rank 0 at
 * MASTER_ADDR on program.port, the peers JOB-i.SERVICE as MASTER_ADDR names JOB-0.SERVICE (or
 * DLK_PEERS when the pod sets it); the program runs in program.workdir (else the working
 * directory); its checkpoints in the checkpoint volume. Rank 0's pod keeps the run's record in
 * the cluster as dlk's own rank 0 does. No restarts here: the Job restarts the pod, and the exit
 * code (the program's, 75 for a death by a signal) is what its podFailurePolicy reads. */
int dlk_program_pod(const struct dlk_project *spec, const char *spec_file, const struct dlk_program_view *view,
                    const struct dlk_trainer_sink *sink, struct dlk_err *err);

#endif
