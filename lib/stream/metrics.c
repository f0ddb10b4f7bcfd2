/* Prometheus text format for the stream's metrics. */
#include "lib/stream/metrics.h"

#include <stdio.h>
#include <string.h>

void dlk_stream_metrics_init(struct dlk_stream_metrics *m, const char *topic)
{
	static const double round_le[] = { 1, 4, 16, 64, 256, 1024, 2048, 4096, 16384, 65536 };
	static const double lat_le[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 };

	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	snprintf(m->topic, sizeof(m->topic), "%s", topic);
	dlk_hist_init(&m->round, round_le, (int)(sizeof(round_le) / sizeof(round_le[0])));
	dlk_hist_init(&m->latency, lat_le, (int)(sizeof(lat_le) / sizeof(lat_le[0])));
}

void dlk_stream_metrics_release(struct dlk_stream_metrics *m)
{
	pthread_mutex_destroy(&m->lock);
}

static void write_counter(struct dlk_buf *b, const char *name, const char *help, const char *topic, uint64_t v)
{
	dlk_metrics_family(b, name, "counter", help);
	dlk_buf_addf(b, "%s{topic=\"", name);
	dlk_metrics_label(b, topic);
	dlk_buf_addf(b, "\"} %llu\n", (unsigned long long)v);
}

static void write_hist(struct dlk_buf *b, const char *name, const char *help, const char *topic,
                       const struct dlk_hist *h)
{
	dlk_metrics_family(b, name, "histogram", help);
	dlk_hist_write(b, name, "topic", topic, h);
}

void dlk_stream_metrics_write(struct dlk_stream_metrics *m, struct dlk_buf *b)
{
	pthread_mutex_lock(&m->lock);
	write_counter(b, "dlk_stream_records_in_total", "records consumed from the input topic", m->topic,
	              m->records_in);
	write_counter(b, "dlk_stream_records_out_total", "scored records committed to the output topic",
	              m->topic, m->records_out);
	write_counter(b, "dlk_stream_records_failed_total",
	              "records that could not be decoded, committed to the dead-letter topic", m->topic,
	              m->records_failed);
	write_counter(b, "dlk_stream_transactions_committed_total", "rounds committed (transactions or offset commits)",
	              m->topic, m->txn_commit);
	write_counter(b, "dlk_stream_transactions_aborted_total",
	              "rounds aborted and rewound to be scored again", m->topic, m->txn_abort);
	write_counter(b, "dlk_stream_rebalances_total", "partition assignments and revocations", m->topic,
	              m->rebalances);
	dlk_metrics_family(b, "dlk_stream_consumer_lag", "gauge",
	                   "records in the partition not yet consumed (high watermark - position)");
	for (int i = 0; i < m->n_lag; i++) {
		if (m->lag[i].lag < 0)
			continue;
		dlk_buf_adds(b, "dlk_stream_consumer_lag{topic=\"");
		dlk_metrics_label(b, m->topic);
		dlk_buf_addf(b, "\",partition=\"%d\"} %lld\n", (int)m->lag[i].partition, (long long)m->lag[i].lag);
	}
	write_hist(b, "dlk_stream_round_records", "records per round (one transaction)", m->topic, &m->round);
	write_hist(b, "dlk_stream_latency_seconds",
	           "from the input record's timestamp to its output's commit", m->topic, &m->latency);
	pthread_mutex_unlock(&m->lock);
}
