/* The one place where the state of a dlk job is decided, from the Job object, its pods and (for
 * why it is pending) the events that explain it. `dlk status`, `dlk train --wait` and `dlk logs`
 * all read it here, so they can never disagree about whether a job is Pending or Running. */
#ifndef DLK_JOBS_JOBSTATE_H
#define DLK_JOBS_JOBSTATE_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/jobs/failure.h"
#include "lib/kube/client.h"

/* The label every object and pod dlk renders carries (templates/_labels.yaml). */
#define DLK_LABEL_JOB "dlk.dev/job"
/* The Job controller's label on a Job's pods: the Job's name (1.27+; "job-name" before). */
#define DLK_LABEL_JOB_NAME "batch.kubernetes.io/job-name"
/* What a pod's completion index is called: a label (1.28+) and an annotation (all versions). */
#define DLK_LABEL_INDEX "batch.kubernetes.io/job-completion-index"

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
	/* a failed job's cause as its worker published it (lib/jobs/failure.h): the termination
	 * message of the failing pod, else the Job's annotation when the pods are gone */
	int have_failure;
	struct dlk_failure failure;
	struct dlk_rank *ranks;  /* total entries (owned) */
	cJSON *owned;            /* what progress points into */
};

/* Summarises a Job from the Job, the pods labelled with its name (an array; other jobs' pods
 * are ignored) and, when not NULL, the events of the Job and its pods (an array). Borrowed
 * inputs must outlive the summary. Release with dlk_job_summary_release. */
void dlk_job_summarize(const cJSON *job, const cJSON *pods, const cJSON *events, struct dlk_job_summary *s);
/* The same from the Job alone, for lists that must not read every pod of every job: the Job's
 * status counts (ready, succeeded or completedIndexes, failed: what the Job controller counts
 * from the pods) stand for the ranks, by the same rule; ranks is NULL, and a Failed job's reason
 * is its condition's. Release with dlk_job_summary_release. */
void dlk_job_summarize_job(const cJSON *job, struct dlk_job_summary *s);
void dlk_job_summary_release(struct dlk_job_summary *s);
/* How many of an Indexed Job's indexes other than `self` have completed (its
 * status.completedIndexes, bounded by spec.completions): a gang that needs them cannot form again. */
int dlk_job_peers_done(const cJSON *job, int self);
/* The events that explain a job: its own and those of (at most 8) pending ranks' pods, as a new
 * array the caller owns (empty when they cannot be read: they help, they are not needed). */
cJSON *dlk_job_events(struct kube_client *c, const char *ns, const char *name, const struct dlk_job_summary *pre);
/* Lists the pods labelled as job name's in ns (a new PodList in *pods), or -1 with err. */
int dlk_job_list_pods(struct kube_client *c, const char *ns, const char *name, cJSON **pods, struct dlk_err *err);
/* "epoch 3/10 step 1200/6000 loss 0.41" style text of the progress annotation ("" when none). */
void dlk_job_progress_text(const struct dlk_job_summary *s, char *out, size_t n);
/* The summary as a JSON object (for -o json/yaml); the caller owns it. */
cJSON *dlk_job_summary_json(const struct dlk_job_summary *s);

/* The rank a pod runs (its completion index), -1 when it has none or a malformed one. */
int dlk_pod_rank(const cJSON *pod);
/* The pods in pods (an array) labelled as job's (dlk.dev/job, or the Job controller's job-name
 * label for a CronJob's run), of namespace ns when ns is not NULL, as a new
 * array of borrowed items (free it with cJSON_Delete; the items stay pods'). */
cJSON *dlk_job_pods(const cJSON *pods, const char *ns, const char *job);
/* "dlk.dev/job=NAME": the label selector of a job's objects; the caller frees it. */
char *dlk_job_selector(const char *name);

#endif
