/* The stream's Prometheus metrics: counters, per-partition lag, and histograms (not summaries, so
 * quantiles aggregate across replicas) of records per round and end-to-end latency. The forward
 * passes' batch sizes are the server's (dlk_inference_batch_size): stream records and HTTP
 * requests share the batcher. Updated by the
 * stream's thread, read by whatever serves /metrics; a mutex keeps the two apart. */
#ifndef DLK_STREAM_METRICS_H
#define DLK_STREAM_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "lib/serve/metrics.h" /* the histograms and the exposition's parts */
#include "lib/util/buf.h"

#define DLK_STREAM_MAX_LAG 1024     /* partitions whose lag is exported */

struct dlk_stream_lag {
	int32_t partition;
	int64_t lag;                    /* high watermark - position; -1 when unknown */
};

struct dlk_stream_metrics {
	pthread_mutex_t lock;
	char topic[256];                /* the input topic (a label) */
	uint64_t records_in, records_out, records_failed;
	uint64_t txn_commit, txn_abort, rebalances;
	struct dlk_hist round, latency;  /* records per round; seconds */
	struct dlk_stream_lag lag[DLK_STREAM_MAX_LAG];
	int n_lag;
};

void dlk_stream_metrics_init(struct dlk_stream_metrics *m, const char *topic);
void dlk_stream_metrics_release(struct dlk_stream_metrics *m);
/* Appends the metrics in the Prometheus text exposition format (version 0.0.4). */
void dlk_stream_metrics_write(struct dlk_stream_metrics *m, struct dlk_buf *b);

#endif
