/* Log lines of several ranks (or pods) merged in time order: what `dlk logs` prints of a job's
 * pods or of a run's archive, and `dlk pipeline logs` of a stage's archive. Each line comes
 * "TIME text" (the kubelet's timestamps=true, or an archive's line: RFC 3339 with
 * nanoseconds), is kept with the rank it was read for, and the lines sort by time, then rank,
 * then the order they came in. */
#ifndef DLK_JOBS_LOGMERGE_H
#define DLK_JOBS_LOGMERGE_H

#include <stddef.h>

struct dlk_log_line {
	char *ts;   /* RFC 3339 with nanoseconds, "" when the line has none */
	char *text; /* the rest, without the time */
	int rank;
	size_t seq; /* the order it came in */
};

struct dlk_log_merge {
	struct dlk_log_line *v;
	size_t n, cap, bytes;
	size_t max_bytes; /* 0: no bound; else adding stops at it and sets full */
	int rank;         /* the rank the next lines are read for: the caller sets it */
	int full;
};

/* A line reader's callback (kube_logs, dlk_log_archive_read): adds line (len bytes, no
 * newline) to the merge ud for its current rank. Returns 1 (stop reading) when max_bytes is
 * reached, else 0. */
int dlk_log_merge_add(const char *line, size_t len, void *ud);
/* Sorts the lines: time, rank, then arrival. */
void dlk_log_merge_sort(struct dlk_log_merge *m);
/* Frees the lines and their text; m is empty again (its max_bytes kept). */
void dlk_log_merge_release(struct dlk_log_merge *m);

#endif
