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

/* Exit codes: documented in man dlk(1); scripts and the Job's podFailurePolicy rely on them. */
enum dlk_exit {
	DLK_EXIT_OK = 0,          /* success */
	DLK_EXIT_FAIL = 1,        /* the thing asked for failed (a job failed, a check failed) */
	DLK_EXIT_USAGE = 2,       /* bad command line */
	DLK_EXIT_CONFIG = 3,      /* bad project file, template, data or model: fix and re-run */
	DLK_EXIT_CONNECT = 4,     /* cannot reach the cluster or a data source */
	DLK_EXIT_AUTH = 5,        /* not authenticated or not authorised */
	DLK_EXIT_NOTFOUND = 6,    /* the named object does not exist */
	DLK_EXIT_TIMEOUT = 7,     /* --timeout ran out */
	DLK_EXIT_EXISTS = 8,      /* the object already exists (see --replace) */
	DLK_EXIT_RESTARTABLE = 75, /* a worker lost a peer or was preempted: restart the gang (EX_TEMPFAIL) */
	DLK_EXIT_INTERRUPTED = 130 /* Ctrl-C stopped waiting or following; the job itself keeps running */
};

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
