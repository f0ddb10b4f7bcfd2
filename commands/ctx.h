/* What every command receives: the global options, resolved once by dispatch, and the terminal. */
#ifndef DLK_COMMANDS_CTX_H
#define DLK_COMMANDS_CTX_H

#include <stddef.h>
#include <stdio.h>

#include "commands/options.h"
#include "lib/util/clock.h" /* dlk_now() */
#include "lib/util/err.h"

struct dlk_project;

/* -o: what a command prints. */
enum dlk_output { DLK_OUTPUT_TEXT, DLK_OUTPUT_JSON, DLK_OUTPUT_YAML, DLK_OUTPUT_WIDE };
/* The words of -o, indexed by enum dlk_output, NULL-terminated. */
extern const char *const dlk_output_names[];

/* The fields up to `help` are the variables of the global options (dlk_global_options). */
struct dlk_ctx {
	const struct dlk_command *cmd;
	const char *file;            /* -f, default "dlk.yaml" */
	struct dlk_strlist sets;     /* --set */
	const char *namespace_;      /* -n, NULL when not given */
	const char *kubeconfig;      /* --kubeconfig */
	const char *context;         /* --context */
	int output;                  /* -o: an enum dlk_output */
	int verbose;                 /* -v count */
	int quiet;                   /* -q */
	int help;                    /* -h */
	int tty_out, tty_err;        /* stdout / stderr are terminals */
	int color;                   /* colour allowed on stderr (tty and no NO_COLOR) */
};

/* Prints "error: MSG" and, when present, "hint: HINT" to stderr; returns err->code (or 1). */
int dlk_report(const struct dlk_ctx *ctx, const struct dlk_err *err);
/* printf-style warning to stderr ("warning: ..."), suppressed by nothing: warnings matter. */
void dlk_warn(const struct dlk_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* printf-style informational line to stderr, suppressed by -q. */
void dlk_info(const struct dlk_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Loads the project file named by -f with the --set overrides. NULL with err on failure. */
struct dlk_project *dlk_ctx_load_spec(const struct dlk_ctx *ctx, struct dlk_err *err);

/* A one-line progress display on stderr when it is a terminal (redrawn in place, at most ~10
 * times a second), nothing otherwise. */
struct dlk_progress {
	const struct dlk_ctx *ctx;
	double last_draw;
	int drawn;
};
void dlk_progress_draw(struct dlk_progress *p, int force, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Clears the line if something was drawn. */
void dlk_progress_clear(struct dlk_progress *p);

#endif
