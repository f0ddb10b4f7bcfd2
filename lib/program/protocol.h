/* The progress protocol a user's program speaks to dlk (docs/program.md): one line on stdout or
 * stderr, or appended to the file named by DLK_PROGRESS_FILE, made of the fixed prefix and one
 * JSON object:
 *
 *   DLK-PROGRESS {"step": 120, "epoch": 1, "epochs": 3, "loss": 0.41, "samples_per_s": 2210}
 *   DLK-PROGRESS {"event": "epoch", "epoch": 1, "epochs": 3, "loss": 0.38,
 *                 "metrics": {"accuracy": 0.86}, "confusion": [[50, 2], [3, 45]]}
 *   DLK-PROGRESS {"event": "done", "model": "/out/model.pt"}
 *
 * Every field is optional; unknown fields are ignored (a newer program, an older dlk). A line
 * with the prefix and anything wrong after it is refused whole, with why: dlk reports it once
 * and goes on (a program's bad line never stops its run). Bounded: a line of at most
 * PROGRAM_PROTOCOL_MAX_LINE bytes, PROGRAM_PROTOCOL_MAX_METRICS metrics,
 * PROGRAM_PROTOCOL_MAX_CLASSES classes. */
#ifndef DLK_PROGRAM_PROTOCOL_H
#define DLK_PROGRAM_PROTOCOL_H

#include <stddef.h>

#define PROGRAM_PROTOCOL_PREFIX "DLK-PROGRESS "
#define PROGRAM_PROTOCOL_MAX_LINE 65536 /* what the supervisor reads of one line (lib/trainer/gang.c) */
#define PROGRAM_PROTOCOL_MAX_METRICS 64
#define PROGRAM_PROTOCOL_MAX_NAME 64
#define PROGRAM_PROTOCOL_MAX_CLASSES 256
#define PROGRAM_PROTOCOL_MAX_PATH 4096

/* 1 when s can name a reported metric: 1 to PROGRAM_PROTOCOL_MAX_NAME letters, digits, '_', '.', '-', '/' */
int program_protocol_name_ok(const char *s);

enum program_event { PROGRAM_EV_STEP, PROGRAM_EV_EPOCH, PROGRAM_EV_DONE };

struct program_metric {
	char name[PROGRAM_PROTOCOL_MAX_NAME + 1]; /* letters, digits, '_', '.', '-', '/' */
	double value;                              /* finite */
};

struct program_report {
	enum program_event event;  /* "event": step (default), epoch, done */
	long long step, steps;     /* the global step and the run's total; -1 when not said */
	int epoch, epochs;         /* 1-based epoch and the run's total; -1 when not said */
	double loss;               /* finite; has_loss says whether given */
	int has_loss;
	double samples_per_s;      /* >= 0; -1 when not said */
	double lr;                 /* >= 0; -1 when not said */
	struct program_metric metrics[PROGRAM_PROTOCOL_MAX_METRICS];
	int n_metrics;
	int n_classes;             /* > 0 when a confusion matrix was given */
	long long *confusion;      /* n_classes x n_classes, row = true class, column = predicted; owned */
	char *model;               /* the path of the model the program wrote; owned, NULL when not said */
};
#define PROGRAM_REPORT_INIT { PROGRAM_EV_STEP, -1, -1, -1, -1, 0, 0, -1, -1, { { "", 0 } }, 0, 0, NULL, NULL }

/* line: one line without its newline (a trailing '\r' is allowed). Returns 0 when it is not a
 * protocol line (ordinary output), 1 with out filled (released first), -1 when it has the prefix
 * but is not a valid report, with why ("loss: expected a finite number"). */
int program_protocol_parse(const char *line, size_t len, struct program_report *out, char *why, size_t why_len);

/* metric NAME's value, or NULL */
const double *program_report_metric(const struct program_report *r, const char *name);

void program_report_release(struct program_report *r);

#endif
