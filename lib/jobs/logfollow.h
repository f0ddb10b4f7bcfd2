/* Following the logs of a job's pods as they start: every pod that runs or ran gets a stream in a
 * thread of its own (with a client of its own), and a new pod for a rank (a restart) gets one as
 * soon as dlk_logfollow_update is told about it. The lines go to a callback, whole and tagged
 * with their rank; what to print, and where, is the caller's. */
#ifndef DLK_JOBS_LOGFOLLOW_H
#define DLK_JOBS_LOGFOLLOW_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/kube/client.h"

struct dlk_log_opts {
	int rank;                /* -1: all */
	long tail, since_s;      /* -1 / 0: all */
	int timestamps, previous;
};

/* One line of rank's log (without its newline). Called from the stream threads, one call at a
 * time per stream but several streams at once: the callback serialises its output. */
typedef void dlk_log_line_fn(void *ud, int rank, const char *line, size_t len);
/* A stream that could not start or ended early, in words ("log of rank 1 (pod 'x') ended: ..."). */
typedef void dlk_log_note_fn(void *ud, const char *msg);

struct dlk_logfollow;
/* A follower for the pods of namespace ns, with clients made from open (borrowed strings must
 * outlive it); --tail and --since (o) apply to the pods known at the first update only: a pod
 * that starts later is shown from its first line. */
struct dlk_logfollow *dlk_logfollow_new(const struct kube_open_opts *open, const char *ns, const struct dlk_log_opts *o,
					dlk_log_line_fn *line, dlk_log_note_fn *note, void *ud);
/* Starts streams for the pods (an array) that run or ran and have none yet. */
void dlk_logfollow_update(struct dlk_logfollow *lf, const cJSON *pods);
/* Number of streams still open. */
int dlk_logfollow_active(struct dlk_logfollow *lf);
/* Stops (when stop) or waits for the open streams, then frees. NULL is fine. */
void dlk_logfollow_free(struct dlk_logfollow *lf, int stop);

#endif
