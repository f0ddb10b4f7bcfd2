/* The server's life cycle: sizing the compute pool, loading and warming models, draining. */
#include "lib/serve/server.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lib/util/machine.h"
#include "lib/util/mem.h"

static void event(struct dlk_server *srv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(struct dlk_server *srv, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	if (!srv->event)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srv->event(srv->event_ctx, msg);
}

int dlk_serve_cores(void)
{
	return dlk_machine_cores();
}

struct dlk_server *dlk_server_new(const struct dlk_server_opts *o, struct dlk_err *err)
{
	struct dlk_server *srv;
	struct timeval tv;

	if (o->n_models < 1) {
		dlk_errf(err, DLK_EXIT_USAGE, "no model to serve");
		return NULL;
	}
	srv = xcalloc(1, sizeof(*srv));
	srv->cfg = *o->cfg;
	srv->cfg.cpu = srv->cfg.memory = NULL; /* not ours; the server needs neither */
	srv->be = o->be ? o->be : dlk_backend_cpu();
	srv->version = xstrdup(o->version ? o->version : "unknown");
	srv->event = o->event;
	srv->event_ctx = o->event_ctx;
	srv->metrics = o->metrics;
	srv->metrics_ctx = o->metrics_ctx;
	srv->chat_template = o->chat_template;
	srv->access_log_fd = o->access_log_fd;
	pthread_mutex_init(&srv->log_mu, NULL);
	gettimeofday(&tv, NULL);
	srv->start_time = (double)tv.tv_sec + tv.tv_usec * 1e-6;
	srv->lim.max_depth = srv->cfg.max_json_depth;
	srv->lim.max_values = 0; /* bounded by the body limit: a value takes at least one byte */

	srv->n_models = o->n_models;
	srv->models = xcalloc((size_t)o->n_models, sizeof(*srv->models));
	srv->model_names = xcalloc((size_t)o->n_models, sizeof(char *));
	srv->model_paths = xcalloc((size_t)o->n_models, sizeof(char *));
	for (int i = 0; i < o->n_models; i++)
		if (dlk_serve_model_arg(o->models[i], &srv->model_names[i], &srv->model_paths[i], err))
			goto fail;
	for (int i = 0; i < o->n_models; i++)
		for (int j = 0; j < i; j++)
			if (srv->model_names[i] && srv->model_names[j] && !strcmp(srv->model_names[i], srv->model_names[j])) {
				dlk_errf(err, DLK_EXIT_USAGE, "two models are named '%s'", srv->model_names[i]);
				goto fail;
			}

	/* workers x BLAS threads <= cores: a request never makes the machine oversubscribed */
	srv->cores = dlk_serve_cores();
	if (strcmp(srv->be->name, "cpu")) {
		srv->workers = srv->cfg.workers > 0 ? srv->cfg.workers : 1; /* one stream per device */
		srv->threads = 1;
	} else {
		srv->workers = srv->cfg.workers > 0 ? srv->cfg.workers : 0;
		srv->threads = srv->cfg.threads > 0 ? srv->cfg.threads : 0;
		if (!srv->workers && !srv->threads)
			srv->workers = srv->cores, srv->threads = 1;
		else if (!srv->workers)
			srv->workers = srv->threads >= srv->cores ? 1 : srv->cores / srv->threads;
		else if (!srv->threads)
			srv->threads = srv->workers >= srv->cores ? 1 : srv->cores / srv->workers;
		if ((long)srv->workers * srv->threads > srv->cores) {
			dlk_errf(err, DLK_EXIT_USAGE, "%d compute workers x %d BLAS threads is more than the %d cores this process may use",
			         srv->workers, srv->threads, srv->cores);
			dlk_err_hint(err, "lower serving.workers or serving.threads (0 sizes them to the cores)");
			goto fail;
		}
	}
	srv->http_threads = srv->cfg.http_threads > 0 ? srv->cfg.http_threads : srv->cores;
	if (dlk_http_start(srv, o->host, o->port >= 0 ? o->port : srv->cfg.port, err))
		goto fail;
	return srv;
fail:
	dlk_server_free(srv);
	return NULL;
}

struct dlk_serve_model *dlk_server_model(struct dlk_server *srv, const char *name)
{
	int n = atomic_load(&srv->n_loaded);
	if (!name)
		return n == 1 && srv->n_models == 1 ? &srv->models[0] : NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(srv->models[i].name, name))
			return &srv->models[i];
	return NULL;
}

int dlk_server_port(const struct dlk_server *srv)
{
	return srv->port;
}

int dlk_server_start(struct dlk_server *srv, const volatile int *cancel, struct dlk_err *err)
{
	for (int i = 0; i < srv->n_models; i++) {
		struct dlk_serve_model *m = &srv->models[i];
		if (cancel && *cancel)
			return dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while loading the models");
		if (dlk_serve_model_load(m, srv->model_names[i], srv->model_paths[i], srv->be, err))
			return -1;
		for (int j = 0; j < i; j++)
			if (!strcmp(srv->models[j].name, m->name)) {
				dlk_errf(err, DLK_EXIT_USAGE, "'%s' and '%s' are both named '%s'", srv->models[j].path, m->path, m->name);
				/* the hint names the path the release frees: written first */
				dlk_err_hint(err, "name one on the command line: NAME=%s", m->path);
				dlk_serve_model_release(m);
				return -1;
			}
		int lowered;
		if (dlk_serve_model_fit(m, srv->cfg.max_batch, srv->cfg.max_memory, &lowered, err)) {
			dlk_serve_model_release(m);
			return -1;
		}
		if (lowered)
			event(srv, "model '%s': batches of at most %d rows, not %d: a larger one needs more than "
			      "serving.max_memory (%lld MiB) for its activations", m->name, m->max_batch, srv->cfg.max_batch,
			      srv->cfg.max_memory >> 20);
		dlk_model_stats_init(&m->stats, srv->cfg.max_batch);
		/* published: the front end reads models[0..n_loaded) without a lock */
		atomic_store(&srv->n_loaded, i + 1);
		event(srv, "model '%s' from %s: %d classes, input %dx%dx%d, weights sha256 %.12s%s", m->name, m->path,
		      m->sig.n_classes, m->sig.dims[0], m->sig.dims[1], m->sig.dims[2], m->bundle.weights_sha256,
		      m->bundle.has_scaling ? "" : " (the bundle records no input scaling: inputs are used as they come)");
	}
	srv->be->set_threads(srv->threads);
	srv->pool = dlk_pool_new(srv->workers);
	for (int i = 0; i < srv->n_models; i++) {
		struct dlk_serve_model *m = &srv->models[i];
		struct dlk_engine e = dlk_serve_model_engine(m);
		m->batcher = dlk_pool_add(srv->pool, &e, m->max_batch, srv->cfg.max_delay_us, &m->stats);
	}
	if (dlk_pool_start(srv->pool, err)) {
		dlk_pool_free(srv->pool);
		srv->pool = NULL;
		return -1;
	}
	for (int i = 0; i < srv->n_models; i++) {
		struct dlk_serve_model *m = &srv->models[i];
		if (cancel && *cancel)
			return dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while warming the models up");
		if (dlk_serve_model_warmup(m, err))
			return -1;
		if (m->is_lm) {
			dlk_gen_stats_init(&m->gen_stats);
			m->gen = dlk_gen_sched_new(&m->lm, m->batcher, m->max_batch, &m->gen_stats, &m->bundle, m->be);
			event(srv, "model '%s' is a language model: context %d, vocabulary %d, %s; up to %d sequences %s; "
			      "chat template: %s", m->name, m->lm.context, m->lm.vocab,
			      m->lm.per_position ? "logits at every position" : "logits after the window", m->max_batch,
			      dlk_gen_sched_kv(m->gen) ? "each decoded with its key/value cache"
			                               : "per forward pass over their windows",
			      m->lm.has_chat ? "the bundle's" : srv->chat_template ? "--chat-template" : "none");
		}
		atomic_store(&m->ready, 1);
	}
	atomic_store(&srv->ready, 1);
	event(srv, "ready: %d model%s on port %d; %d compute worker%s x %d BLAS thread%s (%d core%s), %d HTTP threads, max_batch %d, max_delay %d us",
	      srv->n_models, srv->n_models == 1 ? "" : "s", srv->port, srv->workers, srv->workers == 1 ? "" : "s",
	      srv->threads, srv->threads == 1 ? "" : "s", srv->cores, srv->cores == 1 ? "" : "s", srv->http_threads,
	      srv->cfg.max_batch, srv->cfg.max_delay_us);
	return 0;
}

long dlk_server_drain(struct dlk_server *srv, int timeout_s)
{
	double deadline;
	long left;

	atomic_store(&srv->ready, 0);
	if (srv->cfg.drain_delay_s > 0) {
		/* not ready, still answering: a load balancer takes a moment to notice */
		event(srv, "not ready; still answering new requests for %d s (serving.drain_delay_s)", srv->cfg.drain_delay_s);
		struct timespec ts = { srv->cfg.drain_delay_s, 0 };
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	/* new requests are refused from now on (http.c); the ones already begun, whose headers came
	 * before this, still go to the batchers and are answered */
	deadline = dlk_now() + timeout_s;
	atomic_store(&srv->draining, 1);
	event(srv, "draining: %ld request%s in flight, up to %d s", (long)atomic_load(&srv->in_flight),
	      atomic_load(&srv->in_flight) == 1 ? "" : "s", timeout_s);
	while ((left = atomic_load(&srv->in_flight)) > 0 && dlk_now() < deadline) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return left > 0 ? left : 0;
}

void dlk_server_free(struct dlk_server *srv)
{
	if (!srv)
		return;
	/* New requests are refused; the pool stops and answers what is still queued (after a drain
	 * that timed out), which resumes every suspended connection, as libmicrohttpd needs before it
	 * stops; the batchers stay valid (closed) for a request thread still on its way to them; the
	 * pool's memory goes last, when no request thread is left. */
	atomic_store(&srv->draining, 1);
	dlk_pool_stop(srv->pool);
	/* generation fails what is left and resumes its connections, before the front end stops */
	for (int i = 0; i < srv->n_models; i++) {
		dlk_gen_sched_free(srv->models[i].gen);
		srv->models[i].gen = NULL;
	}
	dlk_http_stop(srv);
	dlk_pool_free(srv->pool);
	for (int i = 0; i < srv->n_models; i++) {
		dlk_serve_model_release(&srv->models[i]);
		free(srv->model_names[i]);
		free(srv->model_paths[i]);
	}
	free(srv->models);
	free(srv->model_names);
	free(srv->model_paths);
	free(srv->version);
	pthread_mutex_destroy(&srv->log_mu);
	free(srv);
}
