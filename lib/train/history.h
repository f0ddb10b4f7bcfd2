/* What a run records as it goes, for reports and audits: the metrics of every epoch, the
 * training loss of every step (averaged over buckets of steps, so that any run fits in at most
 * DLK_HISTORY_MAX_POINTS numbers), and each start and resume with the world size it ran at.
 *
 * The training loop keeps it; checkpoints carry it (history.json), so a run resumed after a
 * crash or a preemption keeps what came before; the bundle's model.json and the Job's
 * dlk.dev/metrics annotation hold it as JSON, in the one shape dlk_history_json() writes:
 *
 *   {"epochs": [{"epoch", "step", "train_loss", "test_loss", "test_accuracy",
 *                "samples_per_sec", "elapsed_sec", "lr", "world", "time"}],
 *    "step_loss": {"every", "steps", "values": [...]},
 *    "events": [{"event": "start"|"resume", "epoch", "step", "elapsed_sec", "world", "time"}]}
 *
 * test_loss and test_accuracy are absent for an epoch without an evaluation; a model of another
 * task than classification has "test_metric_name" (its headline metric) and "test_metric" in
 * place of test_accuracy. Losses are rank
 * 0's share of each global batch (what the run's train loss has always been); samples_per_sec
 * is the whole job's (rank 0's pace times the world size); elapsed_sec counts training time
 * from the run's first start, across restarts (the time lost between a crash and the resume is
 * not in it; the wall-clock "time" of each entry shows it). */
#ifndef DLK_TRAIN_HISTORY_H
#define DLK_TRAIN_HISTORY_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/util/err.h"

#define DLK_HISTORY_MAX_POINTS 1024     /* step-loss buckets kept (even: buckets merge in pairs) */
#define DLK_HISTORY_MAX_EPOCHS 100000   /* entries a history may hold when read back */
#define DLK_HISTORY_MAX_EVENTS 10000

struct dlk_history_epoch {
	int epoch;                 /* 1-based */
	long step;                 /* optimizer steps done, in all, at its end */
	double train_loss;         /* mean over the epoch's steps */
	int have_test;             /* test_loss and test_accuracy (or test_metric) are set */
	double test_loss, test_accuracy;
	double samples_per_sec;    /* the job's, over the epoch */
	double elapsed_sec;        /* training time since the run's first start */
	double lr;                 /* at the epoch's last step */
	int world;                 /* ranks that trained it */
	char time[32];             /* RFC 3339 UTC, at its end */
	/* a task other than classification: its headline metric ("r2", "f1_micro", "psnr") and
	 * value instead of test_accuracy; "" for a classifier */
	char test_metric[24];
	double test_metric_value;
};

enum dlk_history_event_kind { DLK_HISTORY_START, DLK_HISTORY_RESUME };

struct dlk_history_event {
	enum dlk_history_event_kind kind;
	int epoch;                 /* 0-based epoch in progress at that moment */
	long step;                 /* steps done when it happened (a resume: the checkpoint's) */
	double elapsed_sec;
	int world;
	char time[32];
};

struct dlk_history {
	struct dlk_history_epoch *epochs;  /* owned */
	size_t n_epochs, cap_epochs;
	struct dlk_history_event *events;  /* owned */
	size_t n_events, cap_events;
	/* step_loss[i] is the mean loss of steps i*every+1 .. (i+1)*every */
	long every;
	double *step_loss;                 /* owned, DLK_HISTORY_MAX_POINTS once allocated */
	size_t n_step_loss;
	double pending_sum;                /* the bucket being filled */
	long pending_n;
	long steps;                        /* steps recorded in all */
	double epoch_sum;                  /* losses of the epoch in progress, so that an epoch */
	long epoch_n;                      /* interrupted and resumed has the mean of all its steps */
	double elapsed_sec;                /* training time so far (the loop keeps it current) */
};
#define DLK_HISTORY_INIT { NULL, 0, 0, NULL, 0, 0, 1, NULL, 0, 0, 0, 0, 0, 0, 0 }

/* Records one step's loss. */
void dlk_history_add_step(struct dlk_history *h, double loss);
/* The mean loss of the steps of the epoch in progress (0 when none). */
double dlk_history_epoch_loss(const struct dlk_history *h);
/* Appends an epoch's entry and starts the next epoch's loss sum. */
void dlk_history_add_epoch(struct dlk_history *h, const struct dlk_history_epoch *e);
void dlk_history_add_event(struct dlk_history *h, const struct dlk_history_event *e);
/* The run's training time, the one every view shows (the terminal at the end, the report page,
 * the run history): the clock at the end of its last epoch, the time of every process that
 * trained it summed (resumes included, the pauses between them not); 0 before an epoch ends. */
double dlk_history_training_sec(const struct dlk_history *h);
/* The world size of the newest start or resume (0 when none). */
int dlk_history_world(const struct dlk_history *h);

/* The history as JSON (the shape above; a new tree the caller owns). With for_checkpoint the
 * unfinished bucket of step losses is kept too ("step_loss": {"pending_sum", "pending_steps"}),
 * the epoch in progress ("epoch_loss": {"sum", "steps"}) and "elapsed_sec", so that a resumed
 * run continues the same buckets, epoch mean and clock; its numbers are printed exactly. */
cJSON *dlk_history_json(const struct dlk_history *h, int for_checkpoint);
/* Reads back what dlk_history_json wrote, checking every field (types, ranges, counts, the
 * bucket arithmetic); h is replaced. Errors name `who` and the field; code DLK_EXIT_CONFIG. */
int dlk_history_from_json(const cJSON *j, const char *who, struct dlk_history *h, struct dlk_err *err);
void dlk_history_copy(struct dlk_history *dst, const struct dlk_history *src);
void dlk_history_release(struct dlk_history *h);

#endif
