/* One HTTP layer for the Kubernetes API: a reusable libcurl handle per client (connections are
 * reused), authentication (certificates, tokens, token files that rotate, basic auth, exec
 * plugins, impersonation), timeouts, retries with backoff, Warning headers, a verbose log with
 * secrets redacted, and Status errors turned into messages, hints and dlk exit codes. */
#ifndef DLK_KUBE_CLIENT_H
#define DLK_KUBE_CLIENT_H

#include <stddef.h>

#include "lib/kube/exec.h"
#include "lib/kube/kubeconfig.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

#define KUBE_BODY_MAX (64u << 20) /* a buffered response larger than this is an error */

/* Receives verbose lines (no trailing newline), kubectl -v=6 style:
 * "GET https://host/api/v1/namespaces/x/pods 200 OK in 12 milliseconds". */
typedef void kube_log_fn(void *ud, const char *line);
/* Polled during transfers and waits: return nonzero to stop (Ctrl-C, a deadline). */
typedef int kube_cancel_fn(void *ud);
/* Streamed response data (2xx only). Return 0 to go on, nonzero to stop the stream. */
typedef int kube_data_fn(const char *data, size_t len, void *ud);

/* How a client talks: timeouts, retries, the request log, the cancel hook. */
struct kube_client_opts {
	long connect_timeout_ms;      /* default 10 s */
	long timeout_ms;              /* whole request, buffered requests only; default 60 s */
	int max_retries;              /* for safe requests; default 4 */
	long backoff_ms;              /* first backoff, doubled each time; default 200 ms */
	long max_wait_ms;             /* cap on one backoff or Retry-After; default 30 s */
	int verbosity;                /* 0 silent, 6 one line per request, 8 also request headers */
	kube_log_fn *log;
	void *log_ud;
	kube_cancel_fn *cancel;
	void *cancel_ud;
};
#define KUBE_CLIENT_OPTS_INIT { 10000, 60000, 4, 200, 30000, 0, NULL, NULL, NULL, NULL }

/* A connection to one API server as one user (opaque: lib/kube/client_impl.h). Not shared
 * between threads: a thread that watches or streams makes its own. */
struct kube_client;

/* Takes over cfg's contents (cfg is left KUBE_CONFIG_INIT) and returns a client with the settings
 * o (NULL: KUBE_CLIENT_OPTS_INIT) the caller frees with kube_client_free, or NULL with err set. */
struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o, struct dlk_err *err);
void kube_client_free(struct kube_client *c);

/* Where the cluster is and how to talk to it: what kube_client_open takes. */
struct kube_open_opts {
	struct kube_config_opts config; /* the kubeconfig, context and namespace kubectl would use */
	int in_cluster;                 /* only the pod's service account (config.sa_dir, config.namespace) */
	struct kube_client_opts client;
};
#define KUBE_OPEN_OPTS_INIT { KUBE_CONFIG_OPTS_INIT, 0, KUBE_CLIENT_OPTS_INIT }

/* The one way to a client: loads the configuration o names (kube_config_load, or
 * kube_config_in_cluster) and returns a client as kube_client_new does, or NULL with err
 * (DLK_EXIT_CONFIG for the configuration, DLK_EXIT_AUTH, ...). */
struct kube_client *kube_client_open(const struct kube_open_opts *o, struct dlk_err *err);

/* The namespace requests go to when they name none (-n, else the context's, else "default"). */
const char *kube_client_namespace(const struct kube_client *c);
/* What the configuration warns about (TLS verification turned off...), or NULL. */
const char *kube_client_config_warning(const struct kube_client *c);
/* The hook polled during transfers and waits (kube_client_opts.cancel), to read and replace. */
void kube_client_cancel_hook(const struct kube_client *c, kube_cancel_fn **fn, void **ud);
void kube_client_set_cancel(struct kube_client *c, kube_cancel_fn *fn, void *ud);

struct kube_request {
	const char *method;           /* GET, POST, PATCH, PUT, DELETE */
	const char *path;             /* "/api/v1/...?query", already escaped */
	const char *content_type;     /* for a body */
	const char *accept;           /* NULL: application/json */
	const char *body;
	size_t body_len;
	int retry_safe;               /* may be retried on connection errors, 429 and 5xx */
	kube_data_fn *on_data;        /* stream 2xx bodies here instead of buffering them */
	void *ud;
	int stream;                   /* no overall timeout (watch, follow) */
	const char *const *headers;   /* more "Name: value" lines, NULL-terminated, or NULL; their
	                                 values are masked in -vv output (they may carry tokens) */
};

struct kube_response {
	long status;                  /* HTTP status, 0 when none arrived */
	struct dlk_buf body;          /* the buffered body (non-2xx bodies always buffered) */
	int stopped;                  /* on_data or the cancel hook asked to stop */
	int delivered;                /* on_data received data */
};
#define KUBE_RESPONSE_INIT { 0, DLK_BUF_INIT, 0, 0 }
void kube_response_release(struct kube_response *r);

/* Sends one request (with retries and an exec-credential refresh on 401, as allowed). Returns
 * 0 when a response arrived (any status: check r->status) or the stream was stopped, -1 with
 * DLK_EXIT_CONNECT (or DLK_EXIT_AUTH when credentials could not be had) otherwise. */
int kube_send(struct kube_client *c, const struct kube_request *req, struct kube_response *r, struct dlk_err *err);

/* What an error was about, for the message and hint. */
struct kube_what {
	const char *verb;      /* get, list, watch, create, apply, delete, patch */
	const char *resource;  /* plural, e.g. "jobs" */
	const char *ns;        /* may be NULL for cluster-scoped */
	const char *name;      /* may be NULL */
};

/* Turns a non-2xx response into err (always returns -1): the Status reason and message, the
 * causes' fields, a hint (401 re-authenticate naming the user, 403 naming user and
 * verb/resource, 404 naming the namespace, 409 AlreadyExists suggesting --replace, 422 the
 * field) and the exit code (AUTH 401/403, NOTFOUND 404, EXISTS 409 AlreadyExists, CONFIG 422,
 * CONNECT 502-504, FAIL otherwise). */
int kube_status_error(const struct kube_client *c, const struct kube_what *what, long status, const char *body,
		      struct dlk_err *err);

/* The server's Warning headers seen since the last call, as a NULL-terminated list the caller
 * frees (each string and the array); NULL when there were none. */
char **kube_client_take_warnings(struct kube_client *c);

/* Percent-escapes s for a URL query value or path segment; the caller frees the result. */
char *kube_escape(const char *s);

#endif
