/* What the cluster commands (train's submit path, status, logs, delete) share: a Kubernetes
 * client built from the global options, Ctrl-C, the one place where a Job's state is decided
 * from the Job and its pods, a watch of jobs and pods that runs in the background, merged log
 * streams, and deleting everything dlk created for a job. */
#ifndef DLK_COMMANDS_CLUSTER_H
#define DLK_COMMANDS_CLUSTER_H

#include <pthread.h>
#include <stdio.h>

#include <cJSON.h>

#include "commands/ctx.h"
#include "lib/kube/api.h"
#include "lib/kube/client.h"
#include "lib/train/progress.h"
#include "lib/util/duration.h"

/* The label every object and pod dlk renders carries (templates/_labels.yaml). */
#define DLK_LABEL_JOB "dlk.dev/job"
/* The Job annotation a worker publishes its progress in: a small JSON object (man dlk-status). */
#define DLK_ANNOT_PROGRESS DLK_PROGRESS_ANNOTATION
/* What a pod's completion index is called: a label (1.28+) and an annotation (all versions). */
#define DLK_LABEL_INDEX "batch.kubernetes.io/job-completion-index"
/* Exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it). */

/* ---- client and Ctrl-C ---- */

/* A client for the cluster that --kubeconfig/--context/-n name, with -vv request logging to
 * stderr and a cancel hook that fires on Ctrl-C (after dlk_interrupt_catch) or when *stop
 * (may be NULL) becomes nonzero. Prints the kubeconfig's own warning once. The caller frees
 * it with kube_client_free; NULL with err (DLK_EXIT_CONFIG, DLK_EXIT_AUTH...) on failure. */
struct kube_client *dlk_kube_client(const struct dlk_ctx *ctx, const int *stop, struct dlk_err *err);
/* Prints the API server's Warning headers collected so far as "warning: ..." lines. */
void dlk_kube_warnings(const struct dlk_ctx *ctx, struct kube_client *c);
/* Installs a SIGINT handler that only sets a flag (the first Ctrl-C stops waiting; a second
 * one kills the process the default way). */
void dlk_interrupt_catch(void);
int dlk_interrupted(void);

/* Shell completion of job names: prints the names of the dlk Jobs that start with cur, one a
 * line, from the cluster that --kubeconfig/--context/-n on the completion line (argv) name.
 * Quick (1 s to connect, 2 s in all, no retries) and silent: nothing at all on any failure. */
void dlk_complete_job_names(int argc, char **argv, const char *cur);

/* " -n NS" for the commands a hint suggests, when the namespace had to be named (-n was given,
 * or ns is not the client's default namespace), else "". Thread-local storage. */
const char *dlk_ns_flag(const struct dlk_ctx *ctx, const struct kube_client *c, const char *ns);

/* ---- job state ---- */

enum dlk_job_state {
	JOB_PENDING, JOB_RUNNING, JOB_SUCCEEDED, JOB_FAILED, JOB_SUSPENDED, JOB_TERMINATING,
};
const char *dlk_job_state_name(enum dlk_job_state s);

/* One rank: the newest pod of that completion index (a live pod beats a finished one). */
struct dlk_rank {
	int rank;
	const cJSON *pod;       /* borrowed; NULL when no pod exists for this rank yet */
	int pods;               /* how many pods this rank has had */
	int restarts;           /* container restarts of the newest pod, plus replaced pods */
	const char *phase;      /* "Pending", "Running", ..., "" when no pod */
	int ready;
	int terminated;         /* the container has terminated */
	int exit_code;
	char reason[64];        /* last exit reason (OOMKilled, Error) or waiting reason */
	char message[256];
	char finished[32];      /* finishedAt of the terminated state */
};

struct dlk_job_summary {
	char name[254];
	char ns[64];
	enum dlk_job_state state;
	int total, ready, succeeded, failed;
	int gpus_per_worker, gpus;
	double age_s;            /* -1 when unknown */
	const cJSON *progress;   /* parsed dlk.dev/progress (owned by the summary), or NULL */
	char progress_raw[64];   /* the annotation when it is not a JSON object */
	char reason[512];        /* why Pending/Suspended/Failed, one line; "" when nothing to say */
	int failed_rank;         /* -1 when no rank failed */
	struct dlk_rank *ranks;  /* total entries (owned) */
	cJSON *owned;            /* what progress points into */
};

/* Summarises a Job from the Job, the pods labelled with its name (an array; other jobs' pods
 * are ignored) and, when not NULL, the events of the Job and its pods (an array). Borrowed
 * inputs must outlive the summary. Release with dlk_job_summary_release. */
void dlk_job_summarize(const cJSON *job, const cJSON *pods, const cJSON *events, struct dlk_job_summary *s);
void dlk_job_summary_release(struct dlk_job_summary *s);
/* The events that explain a job: its own and those of (at most 8) pending ranks' pods, as a new
 * array the caller owns (empty when they cannot be read: they help, they are not needed). */
cJSON *dlk_job_events(struct kube_client *c, const char *ns, const char *name, const struct dlk_job_summary *pre);
/* "epoch 3/10 step 1200/6000" style text of the progress annotation ("" when none). */
void dlk_job_progress_text(const struct dlk_job_summary *s, char *out, size_t n);
/* The summary as a JSON object (for -o json/yaml); the caller owns it. */
cJSON *dlk_job_summary_json(const struct dlk_job_summary *s);

/* ---- watching jobs and their pods in the background ---- */

/* Two threads, each with its own client: one watches the Jobs (one by name, or every dlk Job
 * in the namespace), one their pods; both keep a current copy that the caller reads under the
 * lock. gen counts changes. */
struct dlk_jobwatch {
	const struct dlk_ctx *ctx;
	char *ns;
	char *name;              /* NULL: every dlk job */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	cJSON *jobs;             /* object: name -> Job */
	cJSON *pods;             /* object: name -> Pod */
	unsigned gen;
	int synced_jobs, synced_pods;
	int stop;
	int failed;              /* a watch gave up: err says why */
	struct dlk_err err;
	pthread_t threads[2];
	int started;
};

/* Starts watching. Returns 0, or -1 with err (the clients could not be built). */
int dlk_jobwatch_start(struct dlk_jobwatch *w, const struct dlk_ctx *ctx, const char *ns, const char *name,
		       struct dlk_err *err);
/* Waits until gen differs from *seen or timeout_s passes (or Ctrl-C); updates *seen. Call
 * without the lock held. */
void dlk_jobwatch_wait(struct dlk_jobwatch *w, unsigned *seen, double timeout_s);
void dlk_jobwatch_lock(struct dlk_jobwatch *w);
void dlk_jobwatch_unlock(struct dlk_jobwatch *w);
/* The pods of one job (a new array of borrowed items: free with cJSON_Delete). Lock held. */
cJSON *dlk_jobwatch_pods_of(struct dlk_jobwatch *w, const char *job);
/* Stops the threads and frees everything. */
void dlk_jobwatch_release(struct dlk_jobwatch *w);

/* ---- logs ---- */

struct dlk_logfollow;
struct dlk_log_opts {
	int rank;                /* -1: all */
	long tail, since_s;      /* -1 / 0: all */
	int timestamps, previous;
	int color;
};
/* Follows the logs of a job's pods as they start: every pod gets a stream thread once it runs;
 * a new pod for a rank (a restart) is picked up by calling dlk_logfollow_update again with the
 * current pods. Lines go to stdout prefixed "[rank N]". */
struct dlk_logfollow *dlk_logfollow_new(const struct dlk_ctx *ctx, const char *ns, const struct dlk_log_opts *o);
/* Starts streams for pods (an array) that run or ran and have none yet. */
void dlk_logfollow_update(struct dlk_logfollow *lf, const cJSON *pods);
/* Number of streams still open. */
int dlk_logfollow_active(struct dlk_logfollow *lf);
/* Stops (when stop) or waits for the open streams, then frees. */
void dlk_logfollow_free(struct dlk_logfollow *lf, int stop);

/* ---- delete ---- */

/* Deletes every object labelled dlk.dev/job=name of the kinds dlk renders (Jobs and CronJobs
 * first, Background propagation). *deleted counts them (0: nothing was there, not an error). */
int dlk_delete_job_objects(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name,
			   int *deleted, struct dlk_err *err);
/* Waits (watching) until the Job name is gone, or timeout_s passes (DLK_EXIT_TIMEOUT). */
int dlk_wait_job_gone(struct kube_client *c, const char *ns, const char *name, double timeout_s,
		      struct dlk_err *err);

/* ---- submit (train) ---- */
struct dlk_project;
/* Renders the spec's objects and applies them (then waits, with --wait/--follow/--timeout).
 * Returns the exit code; errors are reported. */
struct dlk_train_cli;
int dlk_train_submit(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec);

#endif
