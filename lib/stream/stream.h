/* Scoring a Kafka topic: consume records, score them with a model, produce one output record per
 * input to another topic, with nothing lost and nothing doubled.
 *
 * Exactly-once (the default) follows Kafka's consume-transform-produce pattern (KIP-98, KIP-447):
 * the producer is transactional, and the consumed offsets are committed inside the same
 * transaction as the outputs (send_offsets_to_transaction with the consumer's group metadata, so a
 * zombie from an older group generation is fenced). Records are taken in rounds: gather up to
 * max_records or for commit_ms, score them, then begin, produce, send offsets, commit. A
 * transaction that fails is aborted and the consumer rewound to the round's first offsets, so the
 * same records are scored again. Nothing is produced while records are gathered, so a rebalance
 * that takes partitions away only drops the gathered records (their new owner starts from the
 * committed offsets). At-least-once mode (brokers without transactions) produces, waits for every
 * delivery, then commits the offsets: a crash between the two scores those records again.
 *
 * A record that cannot be decoded goes to the dead-letter topic (its key and value unchanged,
 * headers dlk-error, dlk-topic, dlk-partition, dlk-offset) in the same transaction, and the
 * stream goes on. Stopping (the `stop` flag, set by SIGTERM) finishes the open round, commits it,
 * and leaves the group (the consumer's close), so the partitions move at once. */
#ifndef DLK_STREAM_STREAM_H
#define DLK_STREAM_STREAM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/stream/metrics.h"
#include "lib/stream/record.h"
#include "lib/util/err.h"

/* What scores: the model behind the server's batcher. score() takes n examples (x: n * in_size
 * network inputs) and writes n * n_classes logits; it blocks until they are done, and is called
 * from the stream's thread only. */
struct dlk_stream_scorer {
	int (*score)(void *ctx, const float *x, int n, float *logits, struct dlk_err *err);
	void *ctx;
	const struct dlk_serve_sig *sig; /* input size and scaling, classes */
	const char *digest;       /* "sha256:HEX" of the model's weights */
};

/* A `kafka://BROKERS/TOPIC` URL: brokers (host:port, comma-separated) and the topic. Returns
 * malloc'd strings the caller frees, or -1 with a message (code DLK_EXIT_USAGE). */
int dlk_stream_parse_url(const char *url, char **brokers, char **topic, struct dlk_err *err);

struct dlk_stream_config {
	const char *brokers;
	const char *in_topic, *out_topic;
	const char *dlq_topic;        /* NULL = IN_TOPIC.dlq */
	const char *group;            /* consumer group; replicas that share it share the partitions */
	const char *instance;         /* this replica's name, stable across its restarts (the pod
	                                 name): the transactional id is GROUP-INSTANCE */
	int exactly_once;             /* 1: transactions; 0: at-least-once */
	struct dlk_record_spec record;
	int max_records;              /* most records in one round (transaction) */
	int commit_ms;                /* longest a round gathers before it commits */
	int transaction_timeout_ms;   /* how long the broker keeps a dead replica's transaction open */
	const char *const *props;     /* extra librdkafka properties "name=value", both clients */
	size_t n_props;
	volatile sig_atomic_t *stop;  /* non-zero: finish the open round and return */
	/* what happened, for the command to show: level 0 info, 1 warning */
	void (*event)(void *ctx, int level, const char *msg);
	void *event_ctx;
};
#define DLK_STREAM_CONFIG_INIT { .exactly_once = 1, .max_records = 2000, .commit_ms = 100, \
	.transaction_timeout_ms = 10000 }

/* Runs until *stop (returns 0) or an error that retrying cannot cure (returns -1 with a message;
 * code DLK_EXIT_CONNECT when the brokers cannot be reached or refuse, DLK_EXIT_CONFIG when the
 * topics do not exist, DLK_EXIT_FAIL when this replica was fenced by another with its name). */
int dlk_stream_run(const struct dlk_stream_config *cfg, const struct dlk_stream_scorer *sc,
                   struct dlk_stream_metrics *m, struct dlk_err *err);

#endif
