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
 * step, loss, samplesPerSec, ... "phases": each rank's share of its step time, "gpus": each
 * rank's GPU sample) and "warnings" (dlk_top_warnings). An empty array when none runs. */
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
/* A rank's GPU is idle when it is used at most DLK_TOP_GPU_IDLE_PERCENT while the other ranks'
 * are used at least DLK_TOP_GPU_BUSY_PERCENT (their median). */
#define DLK_TOP_GPU_IDLE_PERCENT 5
#define DLK_TOP_GPU_BUSY_PERCENT 30
/* dlk_top_phase_warnings, and with the progress's "gpus" ([{"rank", "gpu", "utilization", ...}],
 * lib/train/progress.h) of two ranks or more, the idle ranks from their GPUs' utilisation
 * ("rank 1's GPU 0 is idle (2% used) while the other rank's is 87% used: ...") in place of the
 * step split's judgement of idle ranks. */
cJSON *dlk_top_warnings(const cJSON *phases, const cJSON *gpus);

/* ---- model servers here (lib/top/served.c) ---- */
/* The directory where the servers of this user register: $XDG_RUNTIME_DIR/dlk, else
 * /tmp/dlk-UID. A new string. */
char *dlk_top_runtime_dir(void);
/* Registers this process as a model server listening on host:port with models[0..n-1] (their
 * names): DIR/serve-PID.json ({"pid", "host", "port", "since", "models"}), mode 0600 in a 0700
 * directory of this user. *path is the file (for dlk_serve_unregister). */
int dlk_serve_register(const char *host, int port, const char *const *models, int n, char **path, struct dlk_err *err);
/* Removes the registration and frees path (NULL: nothing). */
void dlk_serve_unregister(char *path);
/* A registration file's text: the document when it is one ("pid" 1..1e9, "port" 1..65535, a
 * "host" of at most 200 bytes, "models" an array of at most 1024 names of at most 200 bytes),
 * else NULL. */
cJSON *dlk_top_served_parse(const char *text, size_t len);
/* The sum of the samples of Prometheus family name (in the text exposition format) whose label
 * model is model (NULL: all the family's samples); NAN when none. */
double dlk_top_metric_sum(const char *text, const char *name, const char *model);
/* The first sample of every registered server whose process lives (stale files are removed):
 * its counters read from its /metrics, its CPU time. Pass to dlk_top_served_end. */
cJSON *dlk_top_served_begin(void);
/* The second sample, at least interval_s after the first (it waits the rest): a new array
 * [{"pid", "address", "since", "up" (its /metrics answered), "cpu_percent", "rss_bytes",
 * "models": [{"model", "requests_per_s", "errors_per_s", "rows_per_s", "latency_ms" (the mean of
 * the requests answered in the interval; null with none)}]}]. Frees begun. */
cJSON *dlk_top_served_end(cJSON *begun, double interval_s);

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
 * when the progress has them, and "gpu": {"index", "utilization_percent", "memory_used_bytes",
 * "memory_total_bytes", "power_watts", "sm_clock_mhz"}, its GPU's sample, when it has one}] by
 * rank}]}; the warnings with dlk_top_warnings. NULL with err when
 * the API cannot be read. */
cJSON *dlk_top_cluster(struct kube_client *c, const char *ns, const char *only, struct dlk_err *err);

/* The models `dlk serve` deployed in namespace ns (their Deployments labelled dlk.dev/serve;
 * only: that model's), an entry a track: {"name", "track", "deployment", "ready", "desired",
 * "rollout" ("Complete", "Progressing", "Failed"), "reason" (what a rollout waits for or why it
 * failed), "pods_scraped", and from the /metrics of its ready pods, read through the API
 * server's pod proxy (GET /api/v1/namespaces/NS/pods/POD:PORT/proxy/metrics, PORT the
 * container's port named http) twice interval_s apart, summed over the pods: "requests_per_s",
 * "errors_per_s", "rows_per_s", "latency_ms" (the mean of the requests answered; null with
 * none); when no pod's could be read, "metrics": why, and the rates null}. NULL with err when
 * the API cannot be read. Waits interval_s when a pod's metrics were read. */
cJSON *dlk_top_cluster_served(struct kube_client *c, const char *ns, const char *only, double interval_s,
                              struct dlk_err *err);

#endif
