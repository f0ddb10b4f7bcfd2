/* What a served model's Deployments and pods say: one line of `dlk status`, and whether a
 * rollout finished, goes on, or failed (and which pod, why) for `dlk serve --wait`. The rules are
 * kubectl rollout status's: the controller has seen the latest spec (observedGeneration), every
 * replica runs the new template (updatedReplicas), none of the old ones is left, all are
 * available; a Progressing condition with reason ProgressDeadlineExceeded is a failure. A pod
 * whose container cannot start (image pull, configuration) or keeps crashing fails it at once,
 * rather than after the deadline. */
#ifndef DLK_JOBS_SERVESTATE_H
#define DLK_JOBS_SERVESTATE_H

#include <cJSON.h>

#define DLK_LABEL_SERVE "dlk.dev/serve" /* the served model's name, on all its objects */
#define DLK_LABEL_TRACK "dlk.dev/track" /* "stable" or "canary" */
#define DLK_ANN_MODEL_SHA256 "dlk.dev/model-sha256"
#define DLK_ANN_MODEL_SOURCE "dlk.dev/model-source"
#define DLK_ANN_ACCURACY "dlk.dev/accuracy"
#define DLK_ANN_CANARY_PERCENT "dlk.dev/canary-percent"

enum dlk_rollout { ROLLOUT_PROGRESSING, ROLLOUT_DONE, ROLLOUT_FAILED };

struct dlk_serve_track {
	char name[128];          /* the served model (label dlk.dev/serve) */
	char deployment[128];
	char track[16];          /* stable, canary */
	int desired, ready, updated, available, total;
	char sha256[72], accuracy[16], source[512];
	int canary_percent;
	enum dlk_rollout rollout;
	char pod[256];           /* the pod that failed the rollout, or that holds it up */
	char reason[600];        /* why it failed, or what it waits for */
};

/* Reads a Deployment and its pods (the items of a pod list, any of the model's; only the
 * track's count) into t. */
void dlk_serve_track_summarize(const cJSON *deploy, const cJSON *pods, struct dlk_serve_track *t);

/* "dlk.dev/serve=NAME" or, with track, "dlk.dev/serve=NAME,dlk.dev/track=TRACK"; caller frees. */
char *dlk_serve_selector(const char *name, const char *track);

struct kube_client;
struct dlk_err;

/* The tracks of the models `dlk serve` deployed in namespace ns (NULL: the client's) that serve
 * one of the n weights digests weights[] (64 hex, with or without "sha256:"), as their
 * annotation dlk.dev/model-sha256 says: a new array of {"name", "track", "deployment",
 * "namespace", "weights_sha256", "ready", "desired"}, ordered by name then track; NULL with err
 * when the API cannot be read. What `dlk impact --downstream` lists as served. */
cJSON *dlk_served_with_weights(struct kube_client *c, const char *ns, const char *const *weights, size_t n,
                               struct dlk_err *err);

#endif
