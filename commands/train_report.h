/* What a training run here shows, on rank 0 only: the progress of loading the data, a line
 * saying what is trained, the loop's progress (a line redrawn in place on a terminal, a plain
 * line every quarter of an epoch elsewhere), a line per epoch, the metrics file (--metrics: a
 * JSON line per step and per epoch), and at the end the test report (accuracy, confusion matrix)
 * and the bundle written, or with -o json the result as one object. */
#ifndef DLK_COMMANDS_TRAIN_REPORT_H
#define DLK_COMMANDS_TRAIN_REPORT_H

#include <stdio.h>

#include "commands/train.h"
#include "commands/ui.h"
#include "lib/project/project.h"
#include "lib/train/train.h"
#include "lib/trainer/trainer.h"

struct dlk_train_report {
	const struct dlk_ctx *ctx;
	struct dlk_progress bar;
	FILE *metrics;            /* NULL: no metrics file */
	const char *phase;        /* what the data progress is about: "loading training data" */
	int last_plain_pct, last_plain_epoch;
};

/* Reports on ctx's terminal, and appends to the metrics file metrics_path when not NULL.
 * Returns 0, or -1 with err when the file cannot be opened. */
int dlk_train_report_open(struct dlk_train_report *r, const struct dlk_ctx *ctx, const char *metrics_path,
                          struct dlk_err *err);
/* Closes the metrics file. */
void dlk_train_report_close(struct dlk_train_report *r);
/* Clears the progress line, if one is drawn. */
void dlk_train_report_clear(struct dlk_train_report *r);
/* Loading the data: "loading training data FILE: 40% of 26.4 MB" (total 0: unknown). */
void dlk_train_report_data(struct dlk_train_report *r, const char *what, unsigned long long done,
                           unsigned long long total);
/* "training 'NAME' on N samples (E epochs, batch B, OPTIMIZER)", unless -q. */
void dlk_train_report_start(struct dlk_train_report *r, const struct dlk_project *spec, const struct dlk_training *tr,
                            size_t n_train, size_t n_test, int world);
/* A step, an epoch's end or the end of the loop. */
void dlk_train_report_event(struct dlk_train_report *r, const struct dlk_train_event *ev);
/* A finished run: the report on stdout (or its -o json object) naming the bundle written. */
void dlk_train_report_result(struct dlk_train_report *r, const struct dlk_project *spec,
                             const struct dlk_train_result *res, const char *bundle, int world);

/* `dlk train --local` (worker 0), one worker process of a local gang or `dlk train --worker` in
 * a pod (worker 1): the run of lib/trainer/here.h, shown here (rank 0's progress, its lines, the
 * metrics file of --metrics, the result). Returns the exit code; errors are reported. */
int dlk_train_here(struct dlk_ctx *ctx, const struct dlk_train_cli *cli, const struct dlk_project *spec, int worker);

/* The trainer's notes (a struct dlk_trainer_sink's note) on the terminal of ctx (a const
 * struct dlk_ctx *): an info as dlk_info (-q silences it), a warning as dlk_warn. */
void dlk_train_note(void *ctx, enum dlk_trainer_level level, const char *msg);

#endif
