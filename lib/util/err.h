/* Errors that library code returns instead of printing.
 *
 * Library functions (lib/, gpu/) never print and never exit. They fill a
 * `struct dlk_err` and return -1 (or NULL); the command decides what the user
 * sees and which exit code follows. Messages are in git's voice: lowercase,
 * no trailing full stop, the failing thing first and quoted. */
#ifndef DLK_UTIL_ERR_H
#define DLK_UTIL_ERR_H

#include <stdarg.h>
#include <stddef.h>

/* Exit codes, described once: this list makes the enum and man dlk(1)'s EXIT STATUS. Scripts
 * and the Job's podFailurePolicy rely on the numbers. X(NAME, code, what it means) */
#define DLK_EXIT_CODES(X)                                                                          \
	X(OK, 0, "success")                                                                       \
	X(FAIL, 1, "the thing asked for failed: a job failed, a check failed, a worker crashed")  \
	X(USAGE, 2, "usage error: unknown command or option, bad option value")                   \
	X(CONFIG, 3, "invalid input: the project file, a template, the data or the model is wrong; fix it and re-run") \
	X(CONNECT, 4, "cannot connect: the API server or a data source could not be reached")    \
	X(AUTH, 5, "not authenticated or not authorised by the API server")                       \
	X(NOTFOUND, 6, "the named job or object does not exist")                                  \
	X(TIMEOUT, 7, "the time given with --timeout ran out")                                    \
	X(EXISTS, 8, "the job already exists (see --replace)")                                    \
	X(REFUSED, 9, "the promotion gate refused the model: its test accuracy or a class's recall is below the minimum (see --force)") \
	X(UNCHANGED, 10, "--if-data-changed: the data is what the last successful run trained on; nothing was trained") \
	X(INTERRUPTED, 130, "stopped with Ctrl-C (128 + SIGINT): a training run here, which the same command (without --fresh) resumes from its checkpoint; or waiting or following, and the job keeps running") \
	X(RESTARTABLE, 75, "a worker lost a peer or was asked to stop (SIGTERM, also of a run here: it is resumable, not 143); restarting the gang resumes from the last checkpoint (the Job's podFailurePolicy relies on it)") \
	X(RESIZED, 76, "a worker stopped with a checkpoint because its job was resized (dlk scale); the gang re-forms at the new size (the Job's podFailurePolicy ignores it)")

enum dlk_exit {
#define X(name, code, text) DLK_EXIT_##name = code,
	DLK_EXIT_CODES(X)
#undef X
};

/* The name of an exit code in lowercase ("config", "restartable"), NULL for a code not listed:
 * what a run record and a published failure call the class of an exit. */
const char *dlk_exit_name(int code);

#define DLK_ERR_MSG_MAX 2048

struct dlk_err {
	int code;                   /* one of enum dlk_exit; 0 when no error */
	char msg[DLK_ERR_MSG_MAX];  /* the message, without "error: " */
	char hint[512];             /* optional: what to do next, without "hint: " */
};
#define DLK_ERR_INIT { 0, "", "" }

/* Sets code and message (printf-style); returns -1 so callers can `return dlk_errf(...)`.
 * A NULL err is allowed and ignored. */
int dlk_errf(struct dlk_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sets the hint (what the user should do); returns -1. */
int dlk_err_hint(struct dlk_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to the current message, keeping code and hint; returns -1. */
int dlk_err_prefix(struct dlk_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void dlk_err_clear(struct dlk_err *err);

#endif
