/* The trainer: a training run as a service, whatever runs it (`dlk train --local` here, the
 * parent of a local gang of workers, a worker in a pod). What the caller asks is an options
 * struct; what the trainer has to say comes back through a sink of callbacks, never the
 * terminal: the command decides how a note, a progress event or a result is shown, and which
 * exit code follows (the trainer derives the codes of lib/util/err.h: DLK_EXIT_RESTARTABLE,
 * DLK_EXIT_RESIZED, DLK_EXIT_UNCHANGED, ...; it never exits). */
#ifndef DLK_TRAINER_TRAINER_H
#define DLK_TRAINER_TRAINER_H

#include <stddef.h>

#include "lib/project/project.h"
#include "lib/util/err.h"

/* What the caller asks of a run. Strings are borrowed. */
struct dlk_trainer_opts {
	const char *spec_file; /* the project file: here its folder holds .dlk/, the checkpoints, the bundle */
	const char *bundle;    /* NULL: NAME.dlk next to the project file */
	int in_pod;            /* a worker in a pod: outputs on the checkpoint volume, history in the cluster */
	int workers;           /* the processes of a local gang (1: this process alone) */
	int max_restarts;      /* how often a local gang starts again after a lost worker */
	int fresh;             /* a new run, even when the last one was interrupted */
	int if_data_changed;   /* train only when the data changed since the last successful run */
	const char *code_sha256; /* a user's program: the digest of its code directory, for the record */
};
#define DLK_TRAINER_OPTS_INIT { NULL, NULL, 0, 1, 0, 0, 0, NULL }

enum dlk_trainer_level { DLK_TRAINER_INFO, DLK_TRAINER_WARN };

struct dlk_training;
struct dlk_train_event;
struct dlk_train_result;

/* What the trainer has to say, for the caller to show. Every callback may be NULL (then that
 * is not shown); ud is passed to each. */
struct dlk_trainer_sink {
	/* A line in words (no newline): an info that -q may silence, or a warning that must be seen. */
	void (*note)(void *ud, enum dlk_trainer_level level, const char *msg);
	void *ud;
	/* A run here: this process is rank of world (a run alone: 0 of 1), known before anything is
	 * loaded; -1 with err stops the run (e.g. a metrics file that cannot be opened). */
	int (*placed)(void *ud, int rank, int world, struct dlk_err *err);
	/* Loading the data (phase: "loading training data"): done of total bytes of what (total 0:
	 * unknown). */
	void (*data)(void *ud, const char *phase, const char *what, unsigned long long done, unsigned long long total);
	/* Rank 0, before the first step: what is trained, on how many samples, by how many workers. */
	void (*start)(void *ud, const struct dlk_project *spec, const struct dlk_training *tr, size_t n_train,
	              size_t n_test, int world);
	/* Rank 0: a step, an epoch's end or the end of the loop (the loss is the whole gang's). */
	void (*event)(void *ud, const struct dlk_train_event *ev);
	/* Rank 0: the run finished, its bundle written at bundle. */
	void (*result)(void *ud, const struct dlk_project *spec, const struct dlk_train_result *res, const char *bundle,
	               int world);
	/* Whatever is drawn in place (a progress line) is to go: a message or the end follows. */
	void (*clear)(void *ud);
};

/* Hands a printf-style note to sink (NULL: nothing). */
void dlk_trainer_note(const struct dlk_trainer_sink *sink, enum dlk_trainer_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The same at DLK_TRAINER_INFO and DLK_TRAINER_WARN. */
void dlk_trainer_info(const struct dlk_trainer_sink *sink, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlk_trainer_warn(const struct dlk_trainer_sink *sink, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The command that resumes a run these options stopped with a checkpoint, as a hint ("run the
 * same command again to resume from it"; with --fresh, the same command without it, since it
 * again would start another run); NULL in a pod, where the Job's restart resumes it. Static. */
const char *dlk_trainer_resume_hint(const struct dlk_trainer_opts *o);


/* Where the model bundle goes: bundle when not NULL, else NAME.dlk in dlk_trainer_output_dir()
 * (here: next to the project file). Caller frees. */
char *dlk_trainer_bundle_path(const char *bundle, const struct dlk_project *spec, const char *spec_file, int in_pod);

/* A run here keeps its own bundle beside its record, RUNS/ID.dlk (RUNS: dlk_runs_local_dir()), so
 * that what the history and `dlk impact` name stays there when a later run writes NAME.dlk; NULL
 * in a pod or for a run without an id. Caller frees. */
char *dlk_trainer_run_bundle_path(const struct dlk_project *spec, const char *spec_file, int in_pod, const char *run_id);

/* Makes path the same file as the run's bundle at run_bundle (a hard link, else a copy), replacing
 * what was there atomically: NAME.dlk is the newest run's. -1 with err. */
int dlk_trainer_publish_bundle(const char *run_bundle, const char *path, struct dlk_err *err);

/* Where relative outputs go: next to the project file here; in a pod the checkpoint volume when
 * the project has one, else the working directory ("."). Caller frees. */
char *dlk_trainer_output_dir(const struct dlk_project *spec, const char *spec_file, int in_pod);

/* Where the runs' checkpoint folders are (each run's is BASE/RUN-ID): training.checkpoint_dir,
 * relative to dlk_trainer_output_dir(). NULL when the project keeps no checkpoints. Caller frees. */
char *dlk_trainer_ckpt_base(const struct dlk_project *spec, const char *spec_file, int in_pod);

#endif
