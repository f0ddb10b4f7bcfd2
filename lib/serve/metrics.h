/* Serving metrics, kept with atomics (no lock on the request path) and written in the Prometheus
 * text format (version 0.0.4) for /metrics.
 *
 * Durations are histograms, not summaries, so a p99 can be aggregated across replicas
 * (histogram_quantile over the sum of the buckets). Names follow Prometheus' conventions (base
 * unit seconds, counters end in _total) and mirror Triton's for familiarity:
 *   dlk_inference_request_success_total / _failure_total{reason}   requests answered
 *   dlk_inference_count_total       rows inferred      dlk_inference_exec_count_total  forward passes
 *   (their ratio is the average batch size), dlk_inference_pending_requests (gauge),
 *   dlk_inference_{request,queue,compute}_duration_seconds and dlk_inference_batch_size histograms. */
#ifndef DLK_SERVE_METRICS_H
#define DLK_SERVE_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "lib/util/buf.h"

#define DLK_HIST_MAX_BUCKETS 24

struct dlk_hist {
	const double *bounds;     /* upper bounds, increasing; +Inf is implicit */
	int n_bounds;
	_Atomic uint64_t counts[DLK_HIST_MAX_BUCKETS]; /* per bucket, not cumulative */
	_Atomic uint64_t inf;     /* above the last bound */
	_Atomic uint64_t sum_micro; /* sum in millionths of the unit */
};

/* Failure reasons, the label of dlk_inference_request_failure_total. */
enum dlk_fail_reason {
	DLK_FAIL_BAD_REQUEST,     /* 400: the request did not fit the protocol or the model */
	DLK_FAIL_TOO_LARGE,       /* 413 */
	DLK_FAIL_UNAVAILABLE,     /* 503: not ready or shutting down */
	DLK_FAIL_TIMEOUT,         /* the body did not arrive in time: connection closed */
	DLK_FAIL_INTERNAL,        /* 500 */
	DLK_FAIL_N
};

struct dlk_model_stats {
	_Atomic uint64_t success;
	_Atomic uint64_t failure[DLK_FAIL_N];
	_Atomic uint64_t inferences;   /* rows run */
	_Atomic uint64_t executions;   /* forward passes */
	_Atomic int64_t pending;       /* requests accepted by the batcher and not yet answered */
	struct dlk_hist request;       /* seconds, from the first byte handled to the answer */
	struct dlk_hist queue;         /* seconds a request waited for a compute worker */
	struct dlk_hist compute;       /* seconds of one forward pass */
	struct dlk_hist batch;         /* rows per forward pass */
};

/* Sets the bucket bounds: seconds from 100 us to 10 s for the durations, powers of two up to
 * max_batch for the batch size. */
void dlk_model_stats_init(struct dlk_model_stats *s, int max_batch);
/* A histogram with these bounds (bounds outlive h; n at most DLK_HIST_MAX_BUCKETS), all zero. */
void dlk_hist_init(struct dlk_hist *h, const double *bounds, int n);
void dlk_hist_observe(struct dlk_hist *h, double v);

/* The exposition's parts, for the series of other front ends (a stream's) beside these: a
 * family's HELP and TYPE lines; a label value, escaped; a histogram's _bucket, _sum and _count
 * lines with one label label="value". */
void dlk_metrics_family(struct dlk_buf *out, const char *name, const char *type, const char *help);
void dlk_metrics_label(struct dlk_buf *out, const char *value);
void dlk_hist_write(struct dlk_buf *out, const char *name, const char *label, const char *value,
                    const struct dlk_hist *h);

/* One model's series, labelled model="name", are appended by dlk_metrics_write. */
struct dlk_metrics_model {
	const char *name;
	const struct dlk_model_stats *stats;
	int ready;
};

struct dlk_metrics_server {
	int ready;                     /* dlk_server_ready */
	int draining;
	uint64_t http_requests[6];     /* by class: 1xx..5xx at [1..5] (index 0 unused) */
	double start_time;             /* Unix seconds: dlk_server_start_time_seconds */
};

/* The whole exposition: HELP and TYPE once per family, then every model's samples. */
void dlk_metrics_write(struct dlk_buf *out, const struct dlk_metrics_server *srv, const struct dlk_metrics_model *models,
                       int n_models);

#endif
