/* A small HTTP endpoint that serves only GET /metrics (the Prometheus text format, version
 * 0.0.4), on libmicrohttpd as the inference server is: what a training worker exposes. The
 * exposition is written by a callback on each scrape, from the endpoint's thread. */
#ifndef DLK_SERVE_METRICSD_H
#define DLK_SERVE_METRICSD_H

#include "lib/util/buf.h"
#include "lib/util/err.h"

#define DLK_METRICS_PATH "/metrics"
#define DLK_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct dlk_metricsd;
typedef void (*dlk_metrics_write_fn)(void *ctx, struct dlk_buf *out);

/* Listens on host (NULL: every address) and port (0: any free one). NULL with err
 * (DLK_EXIT_FAIL) when the port cannot be bound. */
struct dlk_metricsd *dlk_metricsd_start(const char *host, int port, dlk_metrics_write_fn fn, void *ctx,
                                        struct dlk_err *err);
/* The same without a thread of its own: scrapes are answered when the caller runs
 * dlk_metricsd_poll, which it does often (every few tens of milliseconds). For a process that
 * forks children which run code before they exec: a second thread could hold a lock (the
 * allocator's, under the sanitizers) at the fork, which the child would then wait for forever. */
struct dlk_metricsd *dlk_metricsd_start_polled(const char *host, int port, dlk_metrics_write_fn fn, void *ctx,
                                               struct dlk_err *err);
/* Answers what is ready on a polled endpoint, without waiting (NULL is fine). */
void dlk_metricsd_poll(struct dlk_metricsd *d);
int dlk_metricsd_port(const struct dlk_metricsd *d);
/* Stops answering and frees d (NULL is fine). */
void dlk_metricsd_stop(struct dlk_metricsd *d);

#endif
