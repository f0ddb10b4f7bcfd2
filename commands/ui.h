/* What the commands say on the terminal: errors with their hints, warnings, notes that -q
 * silences, and a progress line redrawn in place. Colour follows ctx->color (NO_COLOR). */
#ifndef DLK_COMMANDS_UI_H
#define DLK_COMMANDS_UI_H

#include <cJSON.h>

#include "commands/ctx.h"

/* Prints "error: MSG" and, when present, "hint: HINT" to stderr; returns err->code (or 1). */
int dlk_report(const struct dlk_ctx *ctx, const struct dlk_err *err);
/* printf-style warning to stderr ("warning: ..."), suppressed by nothing: warnings matter. */
void dlk_warn(const struct dlk_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* printf-style informational line to stderr, suppressed by -q. */
void dlk_info(const struct dlk_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints objects (an array of Kubernetes objects) on stdout as one v1 List in JSON, as `kubectl
 * get -o json` prints several objects (and `kubectl apply -f` takes). -1 with err when it cannot. */
int dlk_print_json_list(cJSON *objects, struct dlk_err *err);

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
