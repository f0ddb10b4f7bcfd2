/* Why a worker failed, published where any user can read it without the run history: the
 * container's termination message (the file the Job template names; the kubelet keeps at most
 * 4096 bytes of it in the pod's status) and the Job's annotation dlk.dev/failure. Both hold the
 * same JSON object, written by the failing worker and read by lib/jobs/jobstate:
 *   {"rank": 1, "pod": "mnist-1-x7k2p", "class": "config", "exitCode": 3,
 *    "message": "...", "time": "2026-01-02T03:04:05Z"}
 * class is the exit code's name (lib/util/err.h). */
#ifndef DLK_JOBS_FAILURE_H
#define DLK_JOBS_FAILURE_H

#include <stddef.h>

#define DLK_FAILURE_ANNOTATION "dlk.dev/failure"
/* Kubernetes truncates a termination message at 4096 bytes: what is written stays below. */
#define DLK_FAILURE_MAX_BYTES 4096

struct dlk_failure {
	int rank;           /* -1: not known */
	char pod[254];
	char cls[32];       /* "config", "restartable", ...; "" when the code has no name */
	int exit_code;
	char message[1024]; /* one line */
	char time[32];      /* RFC 3339, "" when not known */
};

/* The JSON object of f, at most DLK_FAILURE_MAX_BYTES - 1 bytes (the message is shortened, at a
 * character's boundary, when it must be); the caller frees it. */
char *dlk_failure_json(const struct dlk_failure *f);
/* Reads a failure from s (a termination message or the annotation): 0 when s is such an
 * object (it needs at least exitCode or class, and a message), -1 otherwise (e.g. the tail of a
 * log, which FallbackToLogsOnError puts there when the worker wrote nothing). */
int dlk_failure_parse(const char *s, struct dlk_failure *f);
/* "rank 1 (pod P) failed: config (exit 3): MESSAGE", for status and --wait. */
void dlk_failure_text(const struct dlk_failure *f, char *out, size_t n);

/* How one rank of a gang ended, for dlk_failure_cause(). */
struct dlk_rank_end {
	int exit_code;        /* 0: it succeeded; 128 + N for a death by signal N */
	int signal;           /* the signal that killed it (0: it exited) */
	int signal_ours;      /* the supervisor sent that signal (stopping the gang) */
	long seq;             /* the order its end was seen in; -1: not known */
	const char *finished; /* when it ended, RFC 3339 ("" or NULL: not known) */
};

/* The rank whose failure explains a gang's: an exit code other than DLK_EXIT_RESTARTABLE first
 * (a rank that lost a peer may end before the peer that failed for good), then a death by a
 * signal the supervisor did not send, then a restartable end; among equals the earliest (by
 * finished when both say, else by seq when both say), then the lowest rank. -1 when no rank
 * failed. The judgement of a local gang's supervisor and of `dlk status` for a Job's pods. */
int dlk_failure_cause(const struct dlk_rank_end *ranks, int n);

#endif
