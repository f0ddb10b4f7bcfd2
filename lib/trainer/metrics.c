/* A training worker's Prometheus metrics (see lib/trainer/metrics.h). The loop's thread writes, the
 * endpoint's thread reads on a scrape: a mutex, taken once per step, keeps them consistent. */
#include "lib/trainer/metrics.h"
#include "lib/serve/metrics.h"
#include "lib/serve/metricsd.h"
#include "lib/util/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dlk_train_metrics {
	pthread_mutex_t mu;
	struct dlk_metricsd *http;
	int rank, world, restarts, up;
	char *job;
	long steps;
	int epoch;
	double loss, samples_per_sec;
	int have_loss;
	double ar_seconds, ar_bytes, ar_busbw;
	long ar_count;
	double data_load;
	double phase[DLK_PHASES];     /* seconds of the steps in each phase, this process's */
	/* the last evaluation: its loss and the task's metrics (lib/train/eval.h) */
	int have_test, have_test_loss, n_test;
	double test_loss;
	struct {
		char name[DLK_TRAIN_METRICS_MAX_NAME + 1];
		double value;
	} test[DLK_TRAIN_METRICS_MAX_TEST];
	/* the GPUs of its ranks (one; a program's supervisor: each of its processes'), last sampled */
	struct dlk_rank_gpu gpus[DLK_TRAIN_METRICS_MAX_GPUS];
	int n_gpus;
};

static void sample(struct dlk_buf *o, const char *name, const char *type, const char *help, double v)
{
	dlk_metrics_family(o, name, type, help);
	/* %.17g keeps a double exact; Prometheus reads it as Go's ParseFloat does */
	dlk_buf_addf(o, "%s %.17g\n", name, v);
}

static void write_metrics(void *ctx, struct dlk_buf *o)
{
	struct dlk_train_metrics *m = ctx;

	pthread_mutex_lock(&m->mu);
	dlk_metrics_family(o, "dlk_train_info", "gauge", "The training worker: its rank, the number of ranks and its job.");
	dlk_buf_addf(o, "dlk_train_info{rank=\"%d\",world_size=\"%d\",job=\"", m->rank, m->world);
	dlk_metrics_label(o, m->job ? m->job : "");
	dlk_buf_adds(o, "\"} 1\n");
	sample(o, "dlk_train_up", "gauge", "1 while the worker trains, 0 once training ended.", m->up);
	sample(o, "dlk_train_steps_total", "counter", "Optimizer steps done in this run.", (double)m->steps);
	sample(o, "dlk_train_epoch", "gauge", "The epoch in progress, from 1.", m->epoch);
	if (m->have_loss) {
		sample(o, "dlk_train_loss", "gauge", "The last step's training loss, averaged over the ranks.", m->loss);
		sample(o, "dlk_train_samples_per_second", "gauge", "Training throughput of the whole gang in the current epoch.",
		       m->samples_per_sec);
	}
	if (m->have_test && m->have_test_loss)
		sample(o, "dlk_train_test_loss", "gauge", "The test loss of the last evaluation.", m->test_loss);
	if (m->have_test && m->n_test) {
		dlk_metrics_family(o, "dlk_train_test_metric", "gauge",
		                   "The last evaluation's test metrics of the model's task (accuracy; r2, rmse, mae; "
		                   "f1_micro, f1_macro, subset_accuracy; psnr, ssim), or what a program reported.");
		for (int i = 0; i < m->n_test; i++) {
			dlk_buf_adds(o, "dlk_train_test_metric{metric=\"");
			dlk_metrics_label(o, m->test[i].name);
			dlk_buf_addf(o, "\"} %.17g\n", m->test[i].value);
		}
	}
	sample(o, "dlk_train_allreduce_seconds_total", "counter", "Seconds spent waiting for gradient all-reduces.",
	       m->ar_seconds);
	sample(o, "dlk_train_allreduce_bytes_total", "counter", "Bytes of gradients all-reduced.", m->ar_bytes);
	sample(o, "dlk_train_allreduce_count_total", "counter", "Gradient all-reduces done.", (double)m->ar_count);
	sample(o, "dlk_train_allreduce_bus_bandwidth_bytes_per_second", "gauge",
	       "Bus bandwidth of the last all-reduce: bytes / seconds * 2 (n - 1) / n.", m->ar_busbw);
	dlk_metrics_family(o, "dlk_train_step_seconds_total", "counter",
	                   "Seconds of this rank's training steps by phase: waiting for the batch (data), forward, "
	                   "backward and update (compute), waiting for the gradient all-reduce (allreduce).");
	for (int k = 0; k < DLK_PHASES; k++)
		dlk_buf_addf(o, "dlk_train_step_seconds_total{phase=\"%s\"} %.17g\n", dlk_step_phase_name(k), m->phase[k]);
	sample(o, "dlk_train_data_load_seconds", "gauge", "Seconds spent loading the data before the first step.",
	       m->data_load);
	sample(o, "dlk_train_restarts", "gauge", "How often the gang of workers was started again.", m->restarts);
	for (int i = 0; i < 5 && m->n_gpus; i++) {
		static const char *const gn[] = { "dlk_gpu_utilization", "dlk_gpu_memory_used_bytes",
			                          "dlk_gpu_memory_total_bytes", "dlk_gpu_power_watts", "dlk_gpu_sm_clock_hertz" };
		static const char *const gh[] = {
			"The rank's GPU's duty cycle over NVML's last sample period, from 0 to 1.",
			"Memory used on the rank's GPU (all its processes).", "Memory of the rank's GPU.",
			"Power drawn by the rank's GPU.", "The SM clock of the rank's GPU."
		};
		int family = 0;
		for (int k = 0; k < m->n_gpus; k++) {
			const struct dlk_rank_gpu *g = &m->gpus[k];
			double v[] = { g->util_percent / 100.0, g->mem_used, g->mem_total, g->power_w, g->sm_clock_mhz * 1e6 };
			if ((i == 3 && g->power_w < 0) || (i == 4 && !(g->sm_clock_mhz > 0)))
				continue; /* not reported by that GPU */
			if (!family++)
				dlk_metrics_family(o, gn[i], "gauge", gh[i]);
			dlk_buf_addf(o, "%s{rank=\"%d\",gpu=\"%d\"} %.17g\n", gn[i], g->rank, g->gpu, v[i]);
		}
	}
	pthread_mutex_unlock(&m->mu);
}

void dlk_train_metrics_gpu(struct dlk_train_metrics *m, int gpu, unsigned util_percent, double mem_used,
                           double mem_total, double power_w, unsigned sm_clock_mhz)
{
	struct dlk_rank_gpu g = { 0, gpu, util_percent, mem_used, mem_total, power_w, sm_clock_mhz };

	if (!m)
		return;
	g.rank = m->rank;
	dlk_train_metrics_rank_gpu(m, &g);
}

void dlk_train_metrics_rank_gpu(struct dlk_train_metrics *m, const struct dlk_rank_gpu *g)
{
	int k;

	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	for (k = 0; k < m->n_gpus; k++)
		if (m->gpus[k].rank == g->rank && m->gpus[k].gpu == g->gpu)
			break;
	if (k < DLK_TRAIN_METRICS_MAX_GPUS) {
		m->gpus[k] = *g;
		if (k == m->n_gpus)
			m->n_gpus++;
	}
	pthread_mutex_unlock(&m->mu);
}

static struct dlk_train_metrics *metrics_start(int port, int rank, int world, const char *job, int restarts, int polled,
                                               struct dlk_err *err)
{
	struct dlk_train_metrics *m = xcalloc(1, sizeof(*m));

	pthread_mutex_init(&m->mu, NULL);
	m->rank = rank;
	m->world = world;
	m->restarts = restarts;
	m->up = 1;
	m->job = job ? xstrdup(job) : NULL;
	m->http = polled ? dlk_metricsd_start_polled(NULL, port, write_metrics, m, err)
	                 : dlk_metricsd_start(NULL, port, write_metrics, m, err);
	if (!m->http) {
		dlk_train_metrics_stop(m);
		return NULL;
	}
	return m;
}

struct dlk_train_metrics *dlk_train_metrics_start(int port, int rank, int world, const char *job, int restarts,
                                                  struct dlk_err *err)
{
	return metrics_start(port, rank, world, job, restarts, 0, err);
}

struct dlk_train_metrics *dlk_train_metrics_start_polled(int port, int rank, int world, const char *job,
                                                         int restarts, struct dlk_err *err)
{
	return metrics_start(port, rank, world, job, restarts, 1, err);
}

void dlk_train_metrics_poll(struct dlk_train_metrics *m)
{
	if (m)
		dlk_metricsd_poll(m->http);
}

int dlk_train_metrics_port(const struct dlk_train_metrics *m)
{
	return dlk_metricsd_port(m->http);
}

void dlk_train_metrics_event(struct dlk_train_metrics *m, const struct dlk_train_event *ev)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->epoch = ev->epoch;
	m->steps = ev->global_step;
	memcpy(m->phase, ev->phase_total_sec, sizeof(m->phase));
	if (ev->kind == DLK_TRAIN_STEP) {
		m->loss = ev->loss;
		m->samples_per_sec = ev->samples_per_sec;
		m->have_loss = 1;
	}
	if (ev->eval && ev->eval->n) {
		m->have_test = m->have_test_loss = 1;
		m->test_loss = ev->eval->loss;
		m->n_test = 0;
		for (int i = 0; i < ev->eval->n_metrics && i < DLK_TRAIN_METRICS_MAX_TEST; i++) {
			snprintf(m->test[i].name, sizeof(m->test[i].name), "%s", ev->eval->metrics[i].name);
			m->test[i].value = ev->eval->metrics[i].value;
			m->n_test++;
		}
	}
	pthread_mutex_unlock(&m->mu);
}

void dlk_train_metrics_progress(struct dlk_train_metrics *m, long long steps, int epoch, const double *loss,
                                double samples_per_sec)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	if (steps >= 0)
		m->steps = (long)steps;
	if (epoch >= 0)
		m->epoch = epoch;
	if (loss) {
		m->loss = *loss;
		m->have_loss = 1;
	}
	if (samples_per_sec >= 0)
		m->samples_per_sec = samples_per_sec;
	pthread_mutex_unlock(&m->mu);
}

void dlk_train_metrics_test(struct dlk_train_metrics *m, const double *test_loss, const char *const *names,
                            const double *values, int n)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->have_test = 1;
	m->have_test_loss = test_loss != NULL;
	m->test_loss = test_loss ? *test_loss : 0;
	m->n_test = 0;
	for (int i = 0; i < n && m->n_test < DLK_TRAIN_METRICS_MAX_TEST; i++) {
		snprintf(m->test[m->n_test].name, sizeof(m->test[0].name), "%s", names[i]);
		m->test[m->n_test++].value = values[i];
	}
	pthread_mutex_unlock(&m->mu);
}

void dlk_train_metrics_restarts(struct dlk_train_metrics *m, int restarts)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->restarts = restarts;
	pthread_mutex_unlock(&m->mu);
}

void dlk_train_metrics_allreduce(struct dlk_train_metrics *m, double seconds, double bytes, int world)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->ar_seconds += seconds;
	m->ar_bytes += bytes;
	m->ar_count++;
	if (seconds > 0 && world > 1)
		m->ar_busbw = bytes / seconds * 2.0 * (world - 1) / world;
	pthread_mutex_unlock(&m->mu);
}

void dlk_train_metrics_data_load(struct dlk_train_metrics *m, double seconds)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->data_load += seconds;
	pthread_mutex_unlock(&m->mu);
}

void dlk_train_metrics_done(struct dlk_train_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->up = 0;
	pthread_mutex_unlock(&m->mu);
}

void dlk_train_metrics_stop(struct dlk_train_metrics *m)
{
	if (!m)
		return;
	dlk_metricsd_stop(m->http);
	pthread_mutex_destroy(&m->mu);
	free(m->job);
	free(m);
}
