/* Whether a project is being trained here: one lock per project's local run history
 * (<project dir>/.dlk/runs/NAME/lock), held by the process that keeps the run's record for the
 * whole run and released by the kernel when that process ends, however it ends (SIGKILL, a
 * crash, a zombie that nobody reaps). A pid says nothing of the kind: a zombie still has one,
 * and an unrelated process may have it again.
 *
 * The lock is an open file description's (an OFD lock, or flock where the kernel has none): the
 * workers a run forks share it and hold it with their parent, so it is free only when the last
 * process of the run is gone; a program the run executes does not get it (O_CLOEXEC). */
#ifndef DLK_RUNS_LOCK_H
#define DLK_RUNS_LOCK_H

#include <stddef.h>

#include "lib/runs/runs.h"
#include "lib/util/err.h"

/* Who holds the lock, as the holder wrote it into the lock file. Read from outside: every field
 * is checked, text with its control characters made visible (\xNN); empty or 0 when unknown. */
struct dlk_run_holder {
	long pid;
	char host[256];
	char run[DLK_RUNS_ID_MAX + 1];
	char since[32]; /* RFC 3339, UTC */
};

struct dlk_run_lock {
	int fd; /* -1: not held */
};
#define DLK_RUN_LOCK_INIT { -1 }

/* Takes the lock of the run history in dir (created, with dir, when missing) without waiting.
 * 0: taken, held until dlk_run_lock_release or the end of this process and of the children it
 * forks. 1: another process holds it; *holder says who, as far as its file tells. -1 with err
 * when the lock file cannot be made, opened (a link or a special file is refused) or locked. */
int dlk_run_lock_take(struct dlk_run_lock *l, const char *dir, struct dlk_run_holder *holder, struct dlk_err *err);
/* Writes who holds a taken lock (this process, on this host, run `run`, since `since`) into its
 * file, for the refusals of others. -1 with err when it cannot be written. */
int dlk_run_lock_say(struct dlk_run_lock *l, const char *run, const char *since, struct dlk_err *err);
/* Lets the lock go (nothing when not held). */
void dlk_run_lock_release(struct dlk_run_lock *l);

/* Parses the text of a lock file (len bytes) into *h: 0, or -1 when it is not a holder's JSON
 * object ({"pid", "host", "run", "since"}); a member that is missing or does not check is left
 * unknown. */
int dlk_run_holder_parse(const char *text, size_t len, struct dlk_run_holder *h);
/* "run 0123abcd (pid 42 on 'host', since 2026-01-01T00:00:00Z)", what is unknown left out. */
void dlk_run_holder_describe(const struct dlk_run_holder *h, char *buf, size_t n);

#endif
