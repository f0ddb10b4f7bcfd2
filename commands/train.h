/* dlk train's options, filled by its option table (train.c) and read by its parts: submitting
 * (train_submit.c), the view of a run here (train_report.c) and of a local gang of workers
 * (train_gang.c); a run itself is lib/trainer. */
#ifndef DLK_COMMANDS_TRAIN_H
#define DLK_COMMANDS_TRAIN_H

#include "lib/trainer/trainer.h"

/* What `dlk train` does: submit without a mode flag, or what --dry-run, --local, --worker say. */
enum dlk_train_mode { TRAIN_SUBMIT, TRAIN_DRY_RUN, TRAIN_LOCAL, TRAIN_WORKER };

struct dlk_train_cli {
	int mode;                /* enum dlk_train_mode */
	int wait, follow, replace;
	double timeout_s;        /* --timeout; 0 when not given */
	const char *templates;   /* NULL: the project's templates/, if any */
	const char *metrics;     /* NULL: no metrics file */
	const char *bundle;      /* NULL: NAME.dlk next to the project file (--worker: lib/trainer/trainer.h) */
	const char *report;      /* NULL: no report page (--report FILE: written when the run ends) */
	int workers, max_restarts;
	int fresh;               /* --fresh: a new run, even when the last one was interrupted */
	int if_data_changed;     /* --if-data-changed: train only when the data changed since the last successful run */
	int log_format;          /* --log-format: an enum dlk_log_format, -1: not given */
	const char *place;       /* --place-supervisor DIR (with --worker): copy a self-contained dlk there, and stop */
	int metrics_port;        /* --metrics-port: serve Prometheus metrics here (rank r on PORT + r); 0: not */
};

/* The trainer's options (lib/trainer) of cli, for the project file spec_file (borrowed). */
void dlk_train_trainer_opts(const struct dlk_train_cli *cli, const char *spec_file, struct dlk_trainer_opts *o);

#endif
