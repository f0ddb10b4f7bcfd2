/* What the runs here are doing (`dlk top`): for each project trained on this machine whose run
 * lock is held, the holding process and its children (a local gang's workers), their CPU use
 * over an interval and their resident memory, read from /proc; and the training Jobs of a
 * namespace with their pods and published progress (cluster.c). */
#ifndef DLK_TOP_TOP_H
#define DLK_TOP_TOP_H

#include <cJSON.h>

#include "lib/kube/client.h"
#include "lib/util/err.h"

/* The CPU seconds (user + system) and resident bytes of pid and its children, from /proc;
 * -1 when pid is gone. */
int dlk_top_proc(long pid, double *cpu_seconds, unsigned long long *rss_bytes, int *n_procs);

/* The runs going on here (dlk_runs_local_each beside spec_file), sampled over interval_s
 * seconds: a new array [{"project", "run", "pid", "host", "since", "processes", "cpu_percent"
 * (100 = one core), "rss_bytes"}], sorted by cpu_percent, highest first, and, once the run's
 * rank 0 wrote its progress (lib/train/progress.h, DLK_PROGRESS_FILE), "progress" (epoch,
 * step, loss, samplesPerSec, ... and "phases": each rank's share of its step time) and
 * "warnings" (dlk_top_phase_warnings). An empty array when none runs. */
cJSON *dlk_top_local(const char *spec_file, double interval_s, struct dlk_err *err);

/* A rank starved by input: it waits for its batches at least DLK_TOP_STARVED_SHARE of its step
 * time, and at least DLK_TOP_STARVED_RATIO times what the other ranks wait (their median). A
 * rank alone is input-bound when it waits DLK_TOP_INPUT_BOUND_SHARE of its step time. */
#define DLK_TOP_STARVED_SHARE 0.3
#define DLK_TOP_STARVED_RATIO 2.0
#define DLK_TOP_INPUT_BOUND_SHARE 0.5
/* Ranks idle while another computes: the other ranks wait in the all-reduce at least
 * DLK_TOP_IDLE_SHARE of their step time (their median), and this rank waits there at most
 * DLK_TOP_SLOWEST_RATIO of that, without being starved by input: it is the slowest, the others
 * idle for it. */
#define DLK_TOP_IDLE_SHARE 0.3
#define DLK_TOP_SLOWEST_RATIO 0.25

/* The warnings a progress's "phases" ([{"rank", "data", "compute", "allreduce"}], shares of the
 * step time) call for: a new array of strings ("rank 1 waits for its input 52% of its step
 * time, the other ranks 4%"; "the other ranks idle 55% of their step time in the all-reduce,
 * waiting for rank 1 ..."), empty when none; entries that are not such objects are skipped. */
cJSON *dlk_top_phase_warnings(const cJSON *phases);

/* The keys `dlk top --sort` takes: for the runs "cpu" (the default: most CPU first), "rss"
 * (most memory first), "project" (by name), "since" (oldest first); for the lines of ranks
 * "rank" (the default), "data", "compute", "allreduce" (the largest share first). */
#define DLK_TOP_SORT_KEYS "cpu, rss, project, since, rank, data, compute, allreduce"
/* 1 when key is one of DLK_TOP_SORT_KEYS. */
int dlk_top_sort_key_ok(const char *key);
/* Sorts rows (dlk_top_local's array) by key: the runs by a run key, else each run's
 * progress "phases" (its ranks) by a rank key; ties keep their order. */
void dlk_top_sort(cJSON *rows, const char *key);
/* Sorts the pods of each job of dlk_top_cluster's document by a rank key (their step time's
 * shares); -1 when key is not a rank key. */
int dlk_top_sort_cluster(cJSON *doc, const char *key);

/* The training Jobs of namespace ns that have not ended (only: the one of that name), through c:
 * {"namespace", "jobs": [{"job", "state" (pending, running, ...), "progress": what its rank 0
 * published (dlk.dev/progress: epoch, step, loss, samplesPerSec, "phases", ...) or null,
 * "warnings" (dlk_top_phase_warnings), "pods": [{"pod", "rank", "phase", "node", "restarts",
 * "ready", "terminating", and "step_time": {"data", "compute", "allreduce"}, the rank's shares,
 * when the progress has them}] by rank}]}. NULL with err when
 * the API cannot be read. */
cJSON *dlk_top_cluster(struct kube_client *c, const char *ns, const char *only, struct dlk_err *err);

#endif
