/* The inference server: models, one compute pool, the HTTP front end, health and drain.
 *
 * Life of a server:
 *   dlk_server_new()    binds the port and answers at once: live, not ready (so a startup
 *                       probe sees the process while bundles load)
 *   dlk_server_start()  reads and verifies every bundle, starts the compute pool, runs one warm-up
 *                       inference per model; only then is /v2/health/ready 200
 *   dlk_server_drain()  (on SIGTERM) readiness fails at once, new inferences get 503, queued and
 *                       in-flight requests finish, within a grace period
 *   dlk_server_free()
 * The struct is shared by server.c (life cycle) and http.c (the front end); callers use the
 * functions only. */
#ifndef DLK_SERVE_SERVER_H
#define DLK_SERVE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>

#include "lib/nn/backend.h"
#include "lib/project/project.h"
#include "lib/serve/batcher.h"
#include "lib/serve/jsondoc.h"
#include "lib/serve/model.h"
#include "lib/util/err.h"

struct dlk_server_opts {
	const struct dlk_serving *cfg;     /* batching, limits, timeouts, port (copied) */
	const char *host;                  /* address to listen on; NULL = every address */
	int port;                          /* -1: cfg->port; 0: any free port (see dlk_server_port) */
	const char *const *models;         /* "PATH" or "NAME=PATH", n_models of them */
	int n_models;
	int access_log_fd;                 /* one line per request written here; -1 = none */
	const struct dlk_backend *be;
	const char *version;               /* reported by GET /v2 */
	/* what a user should see in the log (model loaded, ready, draining); may be NULL */
	void (*event)(void *ctx, const char *msg);
	void *event_ctx;
	/* more series for /metrics (a stream front end's), appended after the server's; may be NULL */
	void (*metrics)(void *ctx, struct dlk_buf *out);
	void *metrics_ctx;
	/* for language models whose bundle has none; may be NULL; outlives the server */
	const struct dlk_chat_template *chat_template;
};

struct MHD_Daemon;

struct dlk_server {
	struct dlk_serving cfg;
	const struct dlk_backend *be;
	char *version;
	void (*event)(void *ctx, const char *msg);
	void *event_ctx;
	void (*metrics)(void *ctx, struct dlk_buf *out);
	void *metrics_ctx;
	char **model_names, **model_paths;  /* from the arguments; a NULL name: the bundle's */
	struct dlk_serve_model *models;
	int n_models;
	const struct dlk_chat_template *chat_template;
	atomic_int n_loaded;                /* models[0..n_loaded) are readable by the front end */
	struct dlk_pool *pool;
	int cores, workers, threads, http_threads;
	atomic_int ready;
	atomic_int draining;
	atomic_long in_flight;              /* HTTP requests begun and not completed */
	atomic_ulong http_class[6];         /* responses by status class */
	double start_time;                  /* Unix seconds */
	struct jd_limits lim;
	int access_log_fd;
	pthread_mutex_t log_mu;
	struct MHD_Daemon *daemon;
	int port;
};

/* Binds host:port and starts answering (live, not ready). Errors: DLK_EXIT_USAGE for bad
 * arguments, DLK_EXIT_FAIL when the port cannot be bound. */
struct dlk_server *dlk_server_new(const struct dlk_server_opts *opts, struct dlk_err *err);
/* The port bound (useful after asking for port 0). */
int dlk_server_port(const struct dlk_server *srv);
/* Loads and verifies every bundle, starts the compute pool, warms each model up, then reports
 * ready. cancel (may be NULL) is polled between models: non-zero stops with DLK_EXIT_INTERRUPTED. */
int dlk_server_start(struct dlk_server *srv, const volatile int *cancel, struct dlk_err *err);
/* Fails readiness; after serving.drain_delay_s (new requests still answered meanwhile) refuses
 * new inferences and waits up to timeout_s for every request in flight to be answered. Returns
 * the number of requests still unanswered when it gave up (0: a clean drain). */
long dlk_server_drain(struct dlk_server *srv, int timeout_s);
/* Stops the front end and the compute pool and frees everything. NULL is allowed. */
void dlk_server_free(struct dlk_server *srv);

/* For a front end other than HTTP (a stream consumer): the loaded model of that name (name NULL:
 * the one model of a server that serves one), NULL when none is. Decode records with its sig (lib/serve/tensor.h), run them with dlk_batcher_run() or
 * dlk_batcher_submit() on its batcher: they share the HTTP requests' batches, metrics and limits. */
struct dlk_serve_model *dlk_server_model(struct dlk_server *srv, const char *name);

/* The cores this process may use: its CPU affinity, lowered by a cgroup CPU quota (a container's
 * CPU limit), at least 1. */
int dlk_serve_cores(void);

/* The front end (http.c). */
int dlk_http_start(struct dlk_server *srv, const char *host, int port, struct dlk_err *err);
struct MHD_Connection;
/* 1 with msg filled when a request is framed two ways (RFC 9112 section 6.3: Content-Length
 * headers that disagree, Transfer-Encoding beside Content-Length, Transfer-Encoding twice): the
 * answer is 400 and the connection closes. 0 when its framing is unambiguous. */
int dlk_http_framing_bad(struct MHD_Connection *conn, char *msg, size_t len);
void dlk_http_stop(struct dlk_server *srv);

#endif
