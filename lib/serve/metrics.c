/* Prometheus text exposition of the serving counters and histograms. */
#include "lib/serve/metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const double duration_bounds[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	                                  0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10 };
static const double batch_bounds[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536 };

static const char *const reason_names[DLK_FAIL_N] = { "bad_request", "too_large", "unavailable", "timeout", "internal" };

void dlk_hist_init(struct dlk_hist *h, const double *bounds, int n)
{
	h->bounds = bounds;
	h->n_bounds = n;
	for (int i = 0; i < DLK_HIST_MAX_BUCKETS; i++)
		atomic_init(&h->counts[i], 0);
	atomic_init(&h->inf, 0);
	atomic_init(&h->sum_micro, 0);
}

void dlk_model_stats_init(struct dlk_model_stats *s, int max_batch)
{
	int nb = 1;

	memset(s, 0, sizeof(*s));
	dlk_hist_init(&s->request, duration_bounds, (int)(sizeof(duration_bounds) / sizeof(double)));
	dlk_hist_init(&s->queue, duration_bounds, (int)(sizeof(duration_bounds) / sizeof(double)));
	dlk_hist_init(&s->compute, duration_bounds, (int)(sizeof(duration_bounds) / sizeof(double)));
	while (nb < (int)(sizeof(batch_bounds) / sizeof(double)) && batch_bounds[nb - 1] < max_batch)
		nb++;
	dlk_hist_init(&s->batch, batch_bounds, nb);
}

void dlk_hist_observe(struct dlk_hist *h, double v)
{
	int i = 0;
	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	if (i < h->n_bounds)
		atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&h->inf, 1, memory_order_relaxed);
	if (v > 0 && v < 1e12)
		atomic_fetch_add_explicit(&h->sum_micro, (uint64_t)llround(v * 1e6), memory_order_relaxed);
}

void dlk_metrics_family(struct dlk_buf *o, const char *name, const char *type, const char *help)
{
	dlk_buf_addf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* label values: model names are DNS labels, but escape as the format says anyway */
void dlk_metrics_label(struct dlk_buf *o, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			dlk_buf_addc(o, '\\'), dlk_buf_addc(o, *s);
		else if (*s == '\n')
			dlk_buf_adds(o, "\\n");
		else
			dlk_buf_addc(o, *s);
	}
}

static void sample_u(struct dlk_buf *o, const char *name, const char *model, const char *extra, uint64_t v)
{
	dlk_buf_addf(o, "%s{model=\"", name);
	dlk_metrics_label(o, model);
	dlk_buf_addf(o, "\"%s} %llu\n", extra ? extra : "", (unsigned long long)v);
}

void dlk_hist_write(struct dlk_buf *o, const char *name, const char *label, const char *value, const struct dlk_hist *h)
{
	uint64_t cum = 0;

	for (int i = 0; i < h->n_bounds; i++) {
		cum += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
		dlk_buf_addf(o, "%s_bucket{%s=\"", name, label);
		dlk_metrics_label(o, value);
		dlk_buf_addf(o, "\",le=\"%g\"} %llu\n", h->bounds[i], (unsigned long long)cum);
	}
	cum += atomic_load_explicit(&h->inf, memory_order_relaxed);
	dlk_buf_addf(o, "%s_bucket{%s=\"", name, label);
	dlk_metrics_label(o, value);
	dlk_buf_addf(o, "\",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
	dlk_buf_addf(o, "%s_sum{%s=\"", name, label);
	dlk_metrics_label(o, value);
	dlk_buf_addf(o, "\"} %.6f\n", (double)atomic_load_explicit(&h->sum_micro, memory_order_relaxed) / 1e6);
	/* _count equals the +Inf bucket: one read of each counter keeps them consistent */
	dlk_buf_addf(o, "%s_count{%s=\"", name, label);
	dlk_metrics_label(o, value);
	dlk_buf_addf(o, "\"} %llu\n", (unsigned long long)cum);
}

void dlk_metrics_write(struct dlk_buf *o, const struct dlk_metrics_server *srv, const struct dlk_metrics_model *m, int n)
{
	static const char *const classes[6] = { "", "1xx", "2xx", "3xx", "4xx", "5xx" };

	dlk_metrics_family(o, "dlk_server_ready", "gauge", "1 when every model is loaded and warmed up and the server is not draining");
	dlk_buf_addf(o, "dlk_server_ready %d\n", srv->ready && !srv->draining);
	dlk_metrics_family(o, "dlk_server_draining", "gauge", "1 after SIGTERM, while in-flight requests finish");
	dlk_buf_addf(o, "dlk_server_draining %d\n", srv->draining);
	dlk_metrics_family(o, "dlk_server_start_time_seconds", "gauge", "start time of the server since the Unix epoch");
	dlk_buf_addf(o, "dlk_server_start_time_seconds %.3f\n", srv->start_time);
	dlk_metrics_family(o, "dlk_http_responses_total", "counter", "HTTP responses sent, by status class");
	for (int c = 1; c <= 5; c++)
		dlk_buf_addf(o, "dlk_http_responses_total{code=\"%s\"} %llu\n", classes[c], (unsigned long long)srv->http_requests[c]);

	dlk_metrics_family(o, "dlk_model_ready", "gauge", "1 when the model is loaded and warmed up");
	for (int i = 0; i < n; i++) {
		dlk_buf_adds(o, "dlk_model_ready{model=\"");
		dlk_metrics_label(o, m[i].name);
		dlk_buf_addf(o, "\"} %d\n", m[i].ready);
	}
	dlk_metrics_family(o, "dlk_inference_request_success_total", "counter", "inference requests answered successfully");
	for (int i = 0; i < n; i++)
		sample_u(o, "dlk_inference_request_success_total", m[i].name, NULL, atomic_load(&m[i].stats->success));
	dlk_metrics_family(o, "dlk_inference_request_failure_total", "counter", "inference requests that failed, by reason");
	for (int i = 0; i < n; i++)
		for (int r = 0; r < DLK_FAIL_N; r++) {
			char extra[48];
			snprintf(extra, sizeof(extra), ",reason=\"%s\"", reason_names[r]);
			sample_u(o, "dlk_inference_request_failure_total", m[i].name, extra, atomic_load(&m[i].stats->failure[r]));
		}
	dlk_metrics_family(o, "dlk_inference_count_total", "counter", "rows (samples) inferred");
	for (int i = 0; i < n; i++)
		sample_u(o, "dlk_inference_count_total", m[i].name, NULL, atomic_load(&m[i].stats->inferences));
	dlk_metrics_family(o, "dlk_inference_exec_count_total", "counter",
	       "forward passes run; inference count / exec count is the average batch size");
	for (int i = 0; i < n; i++)
		sample_u(o, "dlk_inference_exec_count_total", m[i].name, NULL, atomic_load(&m[i].stats->executions));
	dlk_metrics_family(o, "dlk_inference_pending_requests", "gauge", "requests queued or running in the batcher");
	for (int i = 0; i < n; i++) {
		int64_t p = atomic_load(&m[i].stats->pending);
		sample_u(o, "dlk_inference_pending_requests", m[i].name, NULL, p > 0 ? (uint64_t)p : 0);
	}
	dlk_metrics_family(o, "dlk_inference_request_duration_seconds", "histogram",
	       "time from receiving an inference request to its answer");
	for (int i = 0; i < n; i++)
		dlk_hist_write(o, "dlk_inference_request_duration_seconds", "model", m[i].name, &m[i].stats->request);
	dlk_metrics_family(o, "dlk_inference_queue_duration_seconds", "histogram", "time a request waited for a compute worker");
	for (int i = 0; i < n; i++)
		dlk_hist_write(o, "dlk_inference_queue_duration_seconds", "model", m[i].name, &m[i].stats->queue);
	dlk_metrics_family(o, "dlk_inference_compute_duration_seconds", "histogram", "time of one forward pass");
	for (int i = 0; i < n; i++)
		dlk_hist_write(o, "dlk_inference_compute_duration_seconds", "model", m[i].name, &m[i].stats->compute);
	dlk_metrics_family(o, "dlk_inference_batch_size", "histogram", "rows per forward pass");
	for (int i = 0; i < n; i++)
		dlk_hist_write(o, "dlk_inference_batch_size", "model", m[i].name, &m[i].stats->batch);
}
