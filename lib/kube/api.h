/* Kubernetes API operations dlk needs: apply, create, get, list, watch, delete, pod logs,
 * events, and a merge patch of annotations. Objects are cJSON trees; every function that returns
 * one hands ownership to the caller. Errors come from kube_status_error (message, hint, exit
 * code). */
#ifndef DLK_KUBE_API_H
#define DLK_KUBE_API_H

#include <cJSON.h>

#include "lib/kube/client.h"

/* The kinds dlk renders, and where they live in the API. */
struct kube_resource {
	const char *kind;        /* "Job" */
	const char *api_version; /* "batch/v1" */
	const char *plural;      /* "jobs" */
	int namespaced;
};

/* The mapping for kind (and apiVersion, when not NULL), or NULL for a kind dlk does not know. */
const struct kube_resource *kube_resource_for(const char *kind, const char *api_version);

/* metadata.FIELD of a Kubernetes object ("name", "namespace", ...) when it is a string, else
 * NULL. Borrowed from obj. */
const char *kube_meta(const cJSON *obj, const char *field);

/* "/apis/batch/v1/namespaces/NS/jobs/NAME/SUB" (name and sub may be NULL); the caller frees it. */
char *kube_path(const struct kube_resource *res, const char *ns, const char *name, const char *sub);

/* Server-side apply (PATCH application/apply-patch+yaml, fieldManager=dlk, force=true): creates
 * obj or merges it. The namespace is metadata.namespace, else the client's. *out (when not NULL)
 * receives the object as the server stored it. Retried like a GET: apply is idempotent. */
int kube_apply(struct kube_client *c, const cJSON *obj, cJSON **out, struct dlk_err *err);

/* POST to the collection; an existing object fails with DLK_EXIT_EXISTS. */
int kube_create(struct kube_client *c, const cJSON *obj, cJSON **out, struct dlk_err *err);

/* Whether the server serves kind (of the table above) at its apiVersion: its API group's
 * discovery document (/apis/GROUP/VERSION) lists the resource, as kubectl discovers it. A group
 * the server does not serve (404) is *served = 0, not an error. */
int kube_serves(struct kube_client *c, const char *kind, int *served, struct dlk_err *err);
/* GET one object. ns NULL: the client's namespace. */
int kube_get(struct kube_client *c, const char *kind, const char *ns, const char *name, cJSON **out,
	     struct dlk_err *err);

struct kube_list_opts {
	const char *label_selector;  /* may be NULL */
	const char *field_selector;  /* may be NULL */
	long limit;                  /* page size, 0: server default (no paging) */
	int all_namespaces;          /* every namespace (the ns argument is ignored) */
};
#define KUBE_LIST_OPTS_INIT { NULL, NULL, 0, 0 }

/* Lists all pages (following metadata.continue; an expired continue token starts the list over
 * once) into one List object whose "items" hold every item and whose metadata.resourceVersion is
 * the one to watch from. */
int kube_list(struct kube_client *c, const char *kind, const char *ns, const struct kube_list_opts *opts,
	      cJSON **out, struct dlk_err *err);

/* One watch event. type is ADDED, MODIFIED, DELETED or BOOKMARK, or RELIST after the server said
 * 410 Gone: obj is then the fresh List (its items replace what the caller knew). obj is borrowed
 * for the duration of the call. Return 0 to go on, 1 to stop watching, -1 to fail (set err). */
typedef int kube_watch_fn(const char *type, const cJSON *obj, void *ud, struct dlk_err *err);

struct kube_watch_opts {
	struct kube_list_opts list;  /* selectors (limit is ignored) */
	const char *resource_version;/* start here; NULL or "": list first and deliver RELIST */
	int timeout_s;               /* server-side timeoutSeconds for each watch request, 0: none */
	int max_reconnects;          /* consecutive connections failing without an event before
				      * giving up (a clean end by the server does not count); 0: 5 */
};
#define KUBE_WATCH_OPTS_INIT { KUBE_LIST_OPTS_INIT, NULL, 0, 0 }

/* Parses one line of a watch stream. Returns a new tree the caller owns (cJSON_Delete) with
 * *type and *obj pointing into it, or NULL with err when the line is not a watch event. */
cJSON *kube_watch_event_parse(const char *line, size_t len, const char **type, const cJSON **obj,
			      struct dlk_err *err);

/* Watches until the callback stops it, the cancel hook fires, or reconnecting fails. The stream
 * is parsed line by line as it arrives; dropped or ended streams are resumed from the last
 * resourceVersion seen (events and bookmarks); a 410 (HTTP or ERROR event) relists and resumes.
 * Returns 0 when stopped by the callback or cancelled, -1 with err. */
int kube_watch(struct kube_client *c, const char *kind, const char *ns, const struct kube_watch_opts *opts,
	       kube_watch_fn *fn, void *ud, struct dlk_err *err);

/* DELETE with propagationPolicy=Background (a Job's pods go with it). */
int kube_delete(struct kube_client *c, const char *kind, const char *ns, const char *name, struct dlk_err *err);

/* POST an Eviction (policy/v1) for a pod: the API server marks it DisruptionTarget before it is
 * deleted, which a Job's podFailurePolicy can ignore (a plain DELETE is counted as a failure). */
int kube_evict(struct kube_client *c, const char *ns, const char *pod, struct dlk_err *err);

/* Delivers complete lines (without the newline) to a callback; keeps a partial line across
 * chunks; kube_lines_finish delivers a final unterminated line. Lines longer than max are cut
 * into max-sized pieces. */
typedef int kube_line_fn(const char *line, size_t len, void *ud);
struct kube_lines {
	struct dlk_buf pending;
	size_t max;
	kube_line_fn *fn;
	void *ud;
};
#define KUBE_LINES_INIT(fn, ud) { DLK_BUF_INIT, 1u << 20, (fn), (ud) }
/* Returns the first nonzero callback result (stop), else 0. */
int kube_lines_feed(struct kube_lines *ls, const char *data, size_t len);
int kube_lines_finish(struct kube_lines *ls);
void kube_lines_release(struct kube_lines *ls);

struct kube_log_opts {
	const char *container;  /* NULL: the pod's only container */
	int follow, timestamps, previous;
	long since_seconds;     /* 0: from the start */
	long tail_lines;        /* -1: all */
};
#define KUBE_LOG_OPTS_INIT { NULL, 0, 0, 0, 0, -1 }

/* Streams a pod's log, one line per callback (return nonzero to stop). Returns 0 at the end of
 * the log (or when stopped by the callback or the cancel hook), -1 with err. A stream that
 * breaks delivers what arrived (a partial last line included) and fails with DLK_EXIT_CONNECT;
 * it is not resumed, since a log has no position to resume from without repeating lines. */
int kube_logs(struct kube_client *c, const char *ns, const char *pod, const struct kube_log_opts *opts,
	      kube_line_fn *fn, void *ud, struct dlk_err *err);

/* Events whose involvedObject is kind/name, as a List (oldest first as the server sends them). */
int kube_events_for(struct kube_client *c, const char *ns, const char *kind, const char *name, cJSON **out,
		    struct dlk_err *err);

/* Merge-patches (RFC 7386) the object kind/name of ns (NULL: the client's) with patch; *out
 * (when not NULL) receives the object as the server stored it. A patch that carries
 * metadata.resourceVersion applies only to that version of the object: *status (when not
 * NULL) is then 409 when someone else changed it first (read it again and retry). Retried like
 * a GET: a patch that landed but whose answer was lost, sent again, gives the same object or a
 * 409 that a re-read explains. */
int kube_merge_patch(struct kube_client *c, const char *kind, const char *ns, const char *name, const cJSON *patch,
		     cJSON **out, long *status, struct dlk_err *err);
/* Merge-patches metadata.annotations of a Job (a value NULL removes the key): keys[i]=values[i]
 * for i < n. Used by workers to publish progress. */
int kube_annotate_job(struct kube_client *c, const char *ns, const char *job, const char *const *keys,
		      const char *const *values, size_t n, struct dlk_err *err);

#endif
