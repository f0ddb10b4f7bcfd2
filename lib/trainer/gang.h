/* A gang of worker processes on this machine, supervised as the Job supervises pods:
 * `dlk train --local --workers N` (N ranks over loopback, restarted from the last checkpoint
 * after a lost worker), and `dlk train --worker` in a pod with several GPUs (a rank per GPU,
 * no restarts: the Job restarts the pod). The supervisor forks, watches, signals and reaps; what
 * a worker does in its process and how its output is shown are the caller's (hooks). */
#ifndef DLK_TRAINER_GANG_H
#define DLK_TRAINER_GANG_H

#include <stddef.h>

#include "lib/project/project.h"
#include "lib/trainer/trainer.h"
#include "lib/util/err.h"

#define DLK_GANG_MAX_WORKERS 64

/* What the caller does for the supervisor. ud is passed to each. */
struct dlk_gang_hooks {
	/* In the worker's own process, its environment set (RANK, WORLD_SIZE, MASTER_ADDR,
	 * MASTER_PORT, LOCAL_RANK, ...) and its stderr the supervisor's pipe: be worker `local`
	 * (0..n-1) and return its exit code. */
	int (*worker)(void *ud, int local);
	/* A line worker `local` wrote on its stderr (no newline, the "erase line" escapes of a
	 * progress draw removed); rank is its rank in the gang. s may be changed. */
	void (*line)(void *ud, int local, int rank, char *s, size_t n);
	/* A progress redraw of worker `local` (what it wrote after a carriage return), the newest
	 * one so far; NULL: not shown. */
	void (*progress)(void *ud, int local, int rank, char *s, size_t n);
	/* The workers of a generation are gone: whatever progress is drawn can be cleared. */
	void (*ended)(void *ud);
	void *ud;
	/* A user's program (lib/program/supervise.h) decides which of its exit statuses (a
	 * waitpid status) restart the gang: 1 restart, 0 fail. NULL: a death by a signal or
	 * DLK_EXIT_RESTARTABLE restarts, as for dlk's own workers. */
	int (*restarts)(void *ud, int status);
	/* A user's program: the run document (lib/report/report.h) of a run that succeeded, for its
	 * record, instead of rank 0's bundle; caller of the hook frees. NULL: the bundle's. */
	struct cJSON *(*run_doc)(void *ud);
	/* Called from the supervisor's loop while a generation runs (every 50 ms or so: for what
	 * the workers write elsewhere than their output, e.g. a progress file), and once with
	 * ended 1 after its workers are gone. NULL: none. */
	void (*tick)(void *ud, int ended);
};

/* How the workers' stderr is read: json 1 when they write --log-format json lines (a worker's
 * last error is then read from its objects). */
struct dlk_gang_output {
	int json;
};

/* `dlk train --local --workers N` (opts->workers): the run (lib/trainer/run.h: a new one, or the
 * interrupted one it continues) is recorded in the project's local history; its workers are
 * restarted, one generation later, after a worker that exits with DLK_EXIT_RESTARTABLE or dies
 * by a signal, at most opts->max_restarts times (a note each time); any other failure stops
 * the gang with that worker's exit code. SIGINT/SIGTERM stop it cleanly (the workers write a
 * checkpoint): DLK_EXIT_FAIL after SIGINT, DLK_EXIT_RESTARTABLE after SIGTERM. Returns the exit
 * code; with err set (err->msg not empty) when there is a failure to tell. */
int dlk_trainer_gang(const struct dlk_trainer_opts *opts, const struct dlk_project *spec, struct dlk_gang_output out,
                     const struct dlk_gang_hooks *hooks, const struct dlk_trainer_sink *sink, struct dlk_err *err);

/* `dlk train --worker` in a pod given resources.gpus = gpus > 1: one worker process per GPU,
 * ranks RANK*gpus .. RANK*gpus + gpus-1 of WORLD_SIZE*gpus (RANK, WORLD_SIZE and MASTER_ADDR as the
 * pod's environment gives them), LOCAL_RANK picking each one's GPU. No restarts: a rank that
 * fails stops the others and its code is returned (DLK_EXIT_RESTARTABLE for a death by signal,
 * DLK_EXIT_RESIZED without a message). Returns the exit code, with err set as above. */
int dlk_trainer_pod_gang(const struct dlk_project *spec, int gpus, struct dlk_gang_output out,
                         const struct dlk_gang_hooks *hooks, struct dlk_err *err);

#endif
