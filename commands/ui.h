/* What the commands say on the terminal: errors with their hints, warnings, notes that -q
 * silences, and a progress line redrawn in place. Colour follows ctx->color (NO_COLOR). */
#ifndef DLK_COMMANDS_UI_H
#define DLK_COMMANDS_UI_H

#include <cJSON.h>
#include <stdio.h>

#include "commands/ctx.h"
#include "lib/util/buf.h"

/* Prints "error: MSG" and, when present, "hint: HINT" to stderr; returns err->code (or 1). */
int dlk_report(const struct dlk_ctx *ctx, const struct dlk_err *err);
/* printf-style warning to stderr ("warning: ..."), suppressed by nothing: warnings matter. */
void dlk_warn(const struct dlk_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* printf-style informational line to stderr, suppressed by -q. */
void dlk_info(const struct dlk_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --log-format: how diagnostics are written on stderr. The words, indexed by the enum. */
enum dlk_log_format { DLK_LOG_TEXT, DLK_LOG_JSON };
extern const char *const dlk_log_format_names[];
/* Chooses the format: opt (an enum dlk_log_format, -1: not given), else $DLK_LOG_FORMAT (what
 * the Job and a gang pass their workers), else text. With json every line written on stderr is
 * one JSON object (lib/jobs/logline.h) and nothing is redrawn in place. -1 with err for a
 * $DLK_LOG_FORMAT that is neither. */
int dlk_log_format_set(struct dlk_ctx *ctx, int opt, struct dlk_err *err);
/* One line of --log-format json: level ("info", "warning", "error"), msg and the members of
 * fields (an object, or NULL; not taken). */
void dlk_log_json(const struct dlk_ctx *ctx, const char *level, const char *msg, const cJSON *fields);

/* Writes text (len bytes) to f with every control character but '\n' and '\t' made visible
 * (lib/util/utf8.h): for views that hold names, reasons and log lines from the cluster, a bundle
 * or a store, so that no escape sequence in one reaches the terminal. */
void dlk_put_text(FILE *f, const char *text, size_t len);

/* Prints objects (an array of Kubernetes objects) on stdout as one v1 List in JSON, as `kubectl
 * get -o json` prints several objects (and `kubectl apply -f` takes). -1 with err when it cannot. */
int dlk_print_json_list(cJSON *objects, struct dlk_err *err);
/* --dry-run: prints objects on stdout as YAML documents (the default, and -o yaml) or as one v1
 * List (-o json). -1 with err (DLK_EXIT_USAGE) for any other -o. */
int dlk_print_objects(const struct dlk_ctx *ctx, cJSON *objects, struct dlk_err *err);
/* After objects were applied: -o json prints applied (what the API server returned) as one v1
 * List, -q prints name alone; returns 1 then. 0 when the caller says its own sentence (text). */
int dlk_print_applied(const struct dlk_ctx *ctx, cJSON *applied, const char *name);

/* A table as kubectl's printers lay one out: rows[0] is the header, each column as wide as its
 * widest cell, three spaces between columns, no trailing blanks. A cell holds at most
 * DLK_TABLE_CELL - 1 bytes (snprintf it, sizeof included). */
#define DLK_TABLE_COLS 16
#define DLK_TABLE_CELL 200
struct dlk_table_row {
	char c[DLK_TABLE_COLS][DLK_TABLE_CELL];
};
/* Appends the table to b. Widths count characters, not bytes; a control character or a byte
 * that is not UTF-8 (a reason or a name read from a cluster or a record) is shown escaped
 * ("\x1b") and so cannot move the cursor or break the columns. On a terminal (ctx->tty_out) a
 * row wider than the terminal is cut to its width and ends in "…": the last column, the free
 * text (a reason, a path), goes first. Piped output is never cut, so a script reads every byte. */
void dlk_table_print(const struct dlk_ctx *ctx, struct dlk_buf *b, const struct dlk_table_row *rows, int nrows,
                     int ncols);
/* The width of the terminal stdout is, in columns: its window size, else $COLUMNS, else 80. */
int dlk_term_width(void);

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

/* "54.1 MB": a byte count as people read it (powers of 1000) */
void dlk_fmt_bytes(char *buf, size_t n, unsigned long long bytes);
/* FLOP/s with an SI prefix: "1.30 GFLOP/s", "66.9 TFLOP/s" */
void dlk_fmt_flops(char *buf, size_t n, double flops);

#endif
