/* dlk_stream_run(): the consume-score-produce loop on librdkafka. See stream.h for the contract;
 * the comments here say why each step is where it is.
 *
 * Two threads: the stream's thread gathers and scores round k+1 while the committer thread
 * produces and commits round k (a transaction spends most of its time waiting for the broker,
 * scoring spends it computing). They meet between rounds: round k+1 is handed over only once
 * round k is settled, and when round k was aborted, both rounds' records are read again. */
#include "lib/stream/stream.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/util/mem.h"

#define TIMEOUT_MS 30000     /* for the transactional calls and metadata */
#define COMMIT_RETRIES 10

struct item {
	rd_kafka_message_t *msg;
	int row;                 /* into x / logits; -1 for a record that failed to decode */
	char *error;             /* why it failed, owned */
};

/* the first and next offset of each partition a round read */
struct span {
	int32_t partition;
	int64_t first, next;
};

/* one round: the records gathered, their network inputs and logits */
struct round {
	struct item *items;
	int n_items;
	int n_rows;
	float *x, *logits;
	struct span *spans;
	int n_spans;
};

struct run {
	const struct dlk_stream_config *cfg;
	const struct dlk_stream_scorer *sc;
	struct dlk_stream_metrics *m;
	rd_kafka_t *cons, *prod;
	struct round rounds[2];
	struct round *cur;       /* the round being gathered and scored (stream's thread) */
	int dropped;             /* a rebalance took partitions while cur gathered */
	int delivery_failed;     /* at-least-once: deliveries that failed in the round */
	char delivery_error[256];
	char *dlq;
	char *txn_id;
	/* the committer thread and what it was handed */
	pthread_t committer;
	int committer_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct round *handed;    /* given to the committer; NULL when it is idle */
	struct round *prev;      /* the last round handed over, until settled */
	int result;              /* of prev: 0 committed, 1 aborted (read again), -1 fatal */
	struct dlk_err cerr;     /* with result -1 */
	int quit;
	int fatal;               /* a rebalance settled prev and found a fatal error (in cerr) */
};

static void event(struct run *r, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void event(struct run *r, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!r->cfg->event)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->cfg->event(r->cfg->event_ctx, level, msg);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int dlk_stream_parse_url(const char *url, char **brokers, char **topic, struct dlk_err *err)
{
	const char *p, *slash;

	*brokers = *topic = NULL;
	if (strncmp(url, "kafka://", 8))
		return dlk_errf(err, DLK_EXIT_USAGE, "'%s': expected kafka://BROKERS/TOPIC", url);
	p = url + 8;
	slash = strchr(p, '/');
	if (!slash || slash == p || !slash[1] || strchr(slash + 1, '/'))
		return dlk_errf(err, DLK_EXIT_USAGE, "'%s': expected kafka://HOST:PORT[,HOST:PORT...]/TOPIC", url);
	for (const char *t = slash + 1; *t; t++)
		if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') ||
		      *t == '.' || *t == '_' || *t == '-'))
			return dlk_errf(err, DLK_EXIT_USAGE, "'%s': a topic name has only letters, digits, '.', '_' "
			                "and '-'", url);
	if (strlen(slash + 1) > 249)
		return dlk_errf(err, DLK_EXIT_USAGE, "'%s': a topic name has at most 249 characters", url);
	*brokers = xstrndup(p, (size_t)(slash - p));
	*topic = xstrdup(slash + 1);
	return 0;
}

static int set_prop(rd_kafka_conf_t *conf, const char *name, const char *value, struct dlk_err *err)
{
	char errstr[512];

	if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
		return dlk_errf(err, DLK_EXIT_CONFIG, "kafka property '%s': %s", name, errstr);
	return 0;
}

/* the user's "name=value" properties, after dlk's own, so they win */
static int set_user_props(const struct dlk_stream_config *cfg, rd_kafka_conf_t *conf, int consumer,
                          struct dlk_err *err)
{
	for (size_t i = 0; i < cfg->n_props; i++) {
		const char *eq = strchr(cfg->props[i], '=');
		char errstr[512];
		if (!eq || eq == cfg->props[i])
			return dlk_errf(err, DLK_EXIT_USAGE, "kafka property '%s': expected NAME=VALUE", cfg->props[i]);
		char *name = xstrndup(cfg->props[i], (size_t)(eq - cfg->props[i]));
		rd_kafka_conf_res_t res = rd_kafka_conf_set(conf, name, eq + 1, errstr, sizeof(errstr));
		/* a property of the other client only (isolation.level, linger.ms ...) is ignored here */
		if (res == RD_KAFKA_CONF_INVALID) {
			dlk_errf(err, DLK_EXIT_CONFIG, "kafka property '%s' (%s): %s", name,
			         consumer ? "consumer" : "producer", errstr);
			free(name);
			return -1;
		}
		if (res == RD_KAFKA_CONF_UNKNOWN) {
			dlk_errf(err, DLK_EXIT_CONFIG, "kafka property '%s': %s", name, errstr);
			free(name);
			return -1;
		}
		free(name);
	}
	return 0;
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	struct run *r = rd_kafka_opaque(rk);

	/* librdkafka's own warnings (syslog levels: 4 warning and worse), through the command */
	if (r && level <= 4)
		event(r, 1, "kafka %s: %s", fac, buf);
}

static void error_cb(rd_kafka_t *rk, int e, const char *reason, void *opaque)
{
	struct run *r = opaque;

	(void)rk;
	/* transport errors are retried by librdkafka itself; say so once per occurrence */
	if (e != RD_KAFKA_RESP_ERR__TRANSPORT || !strstr(reason, "Disconnected"))
		event(r, 1, "kafka: %s", reason);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
	struct run *r = opaque;

	(void)rk;
	if (msg->err) {
		if (!r->delivery_failed++)
			snprintf(r->delivery_error, sizeof(r->delivery_error), "%s", rd_kafka_err2str(msg->err));
	}
}

static int span_index(const struct round *rd, int32_t partition)
{
	for (int i = 0; i < rd->n_spans; i++)
		if (rd->spans[i].partition == partition)
			return i;
	return -1;
}

static void round_free(struct round *rd)
{
	for (int i = 0; i < rd->n_items; i++) {
		rd_kafka_message_destroy(rd->items[i].msg);
		free(rd->items[i].error);
	}
	rd->n_items = rd->n_rows = rd->n_spans = 0;
}

/* Seeks every partition of the rounds a and b (either may be NULL) back to the first offset
 * either read from it, so their records come again. */
static int rewind_rounds(struct run *r, const struct round *a, const struct round *b, struct dlk_err *err)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
	rd_kafka_error_t *e;
	int rc = 0;

	for (int k = 0; k < 2; k++) {
		const struct round *rd = k ? b : a;
		for (int i = 0; rd && i < rd->n_spans; i++) {
			rd_kafka_topic_partition_t *p =
				rd_kafka_topic_partition_list_find(l, r->cfg->in_topic, rd->spans[i].partition);
			if (!p)
				rd_kafka_topic_partition_list_add(l, r->cfg->in_topic, rd->spans[i].partition)->offset =
					rd->spans[i].first;
			else if (rd->spans[i].first < p->offset)
				p->offset = rd->spans[i].first;
		}
	}
	if (l->cnt && (e = rd_kafka_seek_partitions(r->cons, l, TIMEOUT_MS))) {
		rc = dlk_errf(err, DLK_EXIT_CONNECT, "cannot rewind '%s' to the rounds' first offsets: %s",
		              r->cfg->in_topic, rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
	}
	for (int i = 0; !rc && i < l->cnt; i++)
		if (l->elems[i].err) {
			rc = dlk_errf(err, DLK_EXIT_CONNECT, "cannot rewind '%s' [%d] to offset %lld: %s", r->cfg->in_topic,
			              (int)l->elems[i].partition, (long long)l->elems[i].offset, rd_kafka_err2str(l->elems[i].err));
		}
	rd_kafka_topic_partition_list_destroy(l);
	return rc;
}

static void list_partitions(const rd_kafka_topic_partition_list_t *parts, char *buf, size_t len)
{
	size_t j = 0;

	buf[0] = 0;
	for (int i = 0; i < parts->cnt && j + 16 < len; i++)
		j += (size_t)snprintf(buf + j, len - j, "%s%d", i ? "," : "", (int)parts->elems[i].partition);
}

static int settle(struct run *r, int rewind, struct dlk_err *err);

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t e, rd_kafka_topic_partition_list_t *parts,
                         void *opaque)
{
	struct run *r = opaque;
	char list[512];

	list_partitions(parts, list, sizeof(list));
	pthread_mutex_lock(&r->m->lock);
	r->m->rebalances++;
	pthread_mutex_unlock(&r->m->lock);
	if (e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		event(r, 0, "assigned '%s' partitions %s", r->cfg->in_topic, list);
		rd_kafka_assign(rk, parts);
	} else {
		/* The eager protocol takes every partition away. The round the committer has settles
		 * first, under the generation that read it (aborted, its offsets stay uncommitted and the
		 * new owner reads its records). Nothing of the round being gathered is produced yet, so
		 * dropping it loses nothing. */
		event(r, 0, "revoked '%s' partitions %s%s", r->cfg->in_topic, list,
		      r->cur && r->cur->n_items ? " (the records gathered for the open round are dropped: their new "
		                                  "owner scores them)" : "");
		if (settle(r, 0, &r->cerr) < 0)
			r->fatal = 1;
		if (r->cur && r->cur->n_items)
			r->dropped = 1;
		rd_kafka_assign(rk, NULL);
	}
}

static int check_topics(struct run *r, struct dlk_err *err)
{
	const struct rd_kafka_metadata *md = NULL;
	const char *need[3] = { r->cfg->in_topic, r->cfg->out_topic, r->dlq };
	rd_kafka_resp_err_t e = rd_kafka_metadata(r->prod, 1, NULL, &md, TIMEOUT_MS);

	if (e)
		return dlk_errf(err, DLK_EXIT_CONNECT, "cannot reach Kafka at '%s': %s", r->cfg->brokers,
		                rd_kafka_err2str(e));
	for (int k = 0; k < 3; k++) {
		int found = 0;
		for (int i = 0; i < md->topic_cnt; i++)
			if (!strcmp(md->topics[i].topic, need[k]) && !md->topics[i].err)
				found = 1;
		if (!found) {
			dlk_errf(err, DLK_EXIT_CONFIG, "topic '%s' does not exist on '%s'", need[k], r->cfg->brokers);
			dlk_err_hint(err, "create it (dlk does not create topics: their partitions and retention are "
			             "yours to choose), or name another with %s", k == 0 ? "--stream" : k == 1 ? "--to" :
			             "--dead-letter");
			rd_kafka_metadata_destroy(md);
			return -1;
		}
	}
	rd_kafka_metadata_destroy(md);
	return 0;
}

static int setup(struct run *r, struct dlk_err *err)
{
	const struct dlk_stream_config *cfg = r->cfg;
	rd_kafka_conf_t *pc = rd_kafka_conf_new(), *cc = rd_kafka_conf_new();
	char errstr[512], num[32];
	rd_kafka_error_t *e;

	/* producer: transactional (idempotent, acks=all) or idempotent alone */
	snprintf(num, sizeof(num), "%d", cfg->transaction_timeout_ms);
	if (set_prop(pc, "bootstrap.servers", cfg->brokers, err) || set_prop(pc, "linger.ms", "5", err) ||
	    set_prop(pc, "enable.idempotence", "true", err) ||
	    (cfg->exactly_once && (set_prop(pc, "transactional.id", r->txn_id, err) ||
	                           set_prop(pc, "transaction.timeout.ms", num, err))) ||
	    set_user_props(cfg, pc, 0, err))
		goto fail;
	rd_kafka_conf_set_opaque(pc, r);
	rd_kafka_conf_set_log_cb(pc, log_cb);
	rd_kafka_conf_set_error_cb(pc, error_cb);
	if (!cfg->exactly_once)
		rd_kafka_conf_set_dr_msg_cb(pc, dr_cb);
	/* consumer: offsets are committed by dlk only (in the transaction, or after delivery);
	 * read_committed so a transactional upstream's aborted records are never scored */
	if (set_prop(cc, "bootstrap.servers", cfg->brokers, err) || set_prop(cc, "group.id", cfg->group, err) ||
	    set_prop(cc, "enable.auto.commit", "false", err) || set_prop(cc, "enable.auto.offset.store", "false", err) ||
	    set_prop(cc, "auto.offset.reset", "earliest", err) ||
	    set_prop(cc, "isolation.level", "read_committed", err) ||
	    set_prop(cc, "session.timeout.ms", "10000", err) || set_prop(cc, "heartbeat.interval.ms", "1000", err) ||
	    set_prop(cc, "queued.max.messages.kbytes", "32768", err) ||
	    set_prop(cc, "client.id", cfg->instance, err) ||
	    set_user_props(cfg, cc, 1, err))
		goto fail;
	{
		char strat[256];
		size_t len = sizeof(strat);
		if (rd_kafka_conf_get(cc, "partition.assignment.strategy", strat, &len) == RD_KAFKA_CONF_OK &&
		    strstr(strat, "cooperative")) {
			dlk_errf(err, DLK_EXIT_CONFIG, "kafka property 'partition.assignment.strategy': '%s' is cooperative; "
			         "the stream hands partitions over with the eager protocol (range, roundrobin)", strat);
			goto fail;
		}
	}
	rd_kafka_conf_set_opaque(cc, r);
	rd_kafka_conf_set_log_cb(cc, log_cb);
	rd_kafka_conf_set_error_cb(cc, error_cb);
	rd_kafka_conf_set_rebalance_cb(cc, rebalance_cb);

	if (!(r->prod = rd_kafka_new(RD_KAFKA_PRODUCER, pc, errstr, sizeof(errstr)))) {
		dlk_errf(err, DLK_EXIT_CONFIG, "kafka producer: %s", errstr);
		goto fail;
	}
	pc = NULL;
	if (!(r->cons = rd_kafka_new(RD_KAFKA_CONSUMER, cc, errstr, sizeof(errstr)))) {
		dlk_errf(err, DLK_EXIT_CONFIG, "kafka consumer: %s", errstr);
		goto fail;
	}
	cc = NULL;
	rd_kafka_poll_set_consumer(r->cons);
	if (check_topics(r, err))
		return -1;
	if (cfg->exactly_once && (e = rd_kafka_init_transactions(r->prod, TIMEOUT_MS))) {
		dlk_errf(err, DLK_EXIT_CONNECT, "kafka: cannot start transactions as '%s': %s", r->txn_id,
		         rd_kafka_error_string(e));
		dlk_err_hint(err, "a broker without transactions needs at-least-once mode (--at-least-once)");
		rd_kafka_error_destroy(e);
		return -1;
	}
	rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(topics, cfg->in_topic, RD_KAFKA_PARTITION_UA);
	rd_kafka_resp_err_t se = rd_kafka_subscribe(r->cons, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	if (se)
		return dlk_errf(err, DLK_EXIT_CONNECT, "kafka: cannot subscribe to '%s': %s", cfg->in_topic,
		                rd_kafka_err2str(se));
	return 0;
fail:
	if (pc)
		rd_kafka_conf_destroy(pc);
	if (cc)
		rd_kafka_conf_destroy(cc);
	return -1;
}

static const void *header(const rd_kafka_message_t *msg, const char *name, size_t *len)
{
	rd_kafka_headers_t *h = NULL;
	const void *v = NULL;

	if (rd_kafka_message_headers(msg, &h) || rd_kafka_header_get_last(h, name, &v, len))
		return NULL;
	return v ? v : "";
}

/* Takes one consumed record into the round: decoded into the next row, or marked failed. */
static void gather(struct run *r, struct round *rd, rd_kafka_message_t *msg)
{
	struct item *it = &rd->items[rd->n_items++];
	struct dlk_err e = DLK_ERR_INIT;
	size_t ctl = 0, dtl = 0;
	const char *ct = header(msg, "content-type", &ctl), *dt = header(msg, "dlk-datatype", &dtl);
	int s = span_index(rd, msg->partition);

	it->msg = msg;
	it->row = -1;
	it->error = NULL;
	if (dlk_record_decode(&r->cfg->record, msg->payload, msg->len, ct, ctl, dt, dtl,
	                      rd->x + (size_t)rd->n_rows * r->sc->sig->in_size, &e))
		it->error = xstrdup(e.msg);
	else
		it->row = rd->n_rows++;
	if (s < 0) {
		s = rd->n_spans++;
		rd->spans[s].partition = msg->partition;
		rd->spans[s].first = msg->offset;
	}
	rd->spans[s].next = msg->offset + 1;
}

static int score_round(struct run *r, struct round *rd, struct dlk_err *err)
{
	pthread_mutex_lock(&r->m->lock);
	dlk_hist_observe(&r->m->round, rd->n_items);
	pthread_mutex_unlock(&r->m->lock);
	if (!rd->n_rows)
		return 0;
	if (r->sc->score(r->sc->ctx, rd->x, rd->n_rows, rd->logits, err))
		return -1;
	/* a record whose row overflowed is refused like one that does not decode (to the
	 * dead-letter topic, with why), never written as an answer of nan */
	for (int i = 0; i < rd->n_items; i++) {
		struct item *it = &rd->items[i];
		if (it->row >= 0 &&
		    dlk_serve_nonfinite_row(rd->logits + (size_t)it->row * r->sc->sig->n_classes, 1, (size_t)r->sc->sig->n_classes) >= 0) {
			it->row = -1;
			it->error = xstrdup("the forward pass gave a value that is not finite (the weights overflow on this input)");
		}
	}
	return 0;
}

/* Queues one record on the producer, waiting while its queue is full. */
static rd_kafka_resp_err_t produce(struct run *r, const char *topic, const void *key, size_t key_len,
                                   const void *val, size_t len, rd_kafka_headers_t *hdrs)
{
	rd_kafka_resp_err_t e;

	for (;;) {
		e = rd_kafka_producev(r->prod, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, key_len),
		                      RD_KAFKA_V_VALUE((void *)val, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		                      RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		rd_kafka_poll(r->prod, 50);
	}
	if (e && hdrs)
		rd_kafka_headers_destroy(hdrs);
	return e;
}

static rd_kafka_resp_err_t produce_round(struct run *r, const struct round *rd)
{
	struct dlk_buf b = DLK_BUF_INIT;
	rd_kafka_resp_err_t e = 0;

	for (int i = 0; i < rd->n_items && !e; i++) {
		const struct item *it = &rd->items[i];
		const rd_kafka_message_t *msg = it->msg;
		if (it->row >= 0) {
			struct dlk_record_origin o = { r->cfg->in_topic, msg->partition, msg->offset, msg->key, msg->key_len };
			dlk_buf_reset(&b);
			dlk_record_encode(&b, rd->logits + (size_t)it->row * r->sc->sig->n_classes, r->sc->sig->n_classes,
			                  r->sc->sig->classes, r->sc->digest, &o);
			e = produce(r, r->cfg->out_topic, msg->key, msg->key_len, b.data, b.len, NULL);
		} else {
			/* the record as it came (key, value, headers), and why it was refused */
			rd_kafka_headers_t *orig = NULL, *h;
			char num[32];
			h = rd_kafka_message_headers(msg, &orig) ? rd_kafka_headers_new(4) : rd_kafka_headers_copy(orig);
			rd_kafka_header_add(h, "dlk-error", -1, it->error, -1);
			rd_kafka_header_add(h, "dlk-topic", -1, r->cfg->in_topic, -1);
			snprintf(num, sizeof(num), "%d", (int)msg->partition);
			rd_kafka_header_add(h, "dlk-partition", -1, num, -1);
			snprintf(num, sizeof(num), "%lld", (long long)msg->offset);
			rd_kafka_header_add(h, "dlk-offset", -1, num, -1);
			e = produce(r, r->dlq, msg->key, msg->key_len, msg->payload, msg->len, h);
		}
	}
	dlk_buf_release(&b);
	return e;
}

static rd_kafka_topic_partition_list_t *round_offsets(struct run *r, const struct round *rd)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(rd->n_spans);

	for (int i = 0; i < rd->n_spans; i++)
		rd_kafka_topic_partition_list_add(l, r->cfg->in_topic, rd->spans[i].partition)->offset = rd->spans[i].next;
	return l;
}

static void count_committed(struct run *r, const struct round *rd)
{
	double t = wall_ms();

	pthread_mutex_lock(&r->m->lock);
	r->m->txn_commit++;
	for (int i = 0; i < rd->n_items; i++) {
		rd_kafka_timestamp_type_t tt;
		int64_t ts = rd_kafka_message_timestamp(rd->items[i].msg, &tt);
		if (rd->items[i].row >= 0)
			r->m->records_out++;
		else
			r->m->records_failed++;
		if (ts > 0 && tt != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE)
			dlk_hist_observe(&r->m->latency, t > (double)ts ? (t - (double)ts) / 1e3 : 0);
	}
	pthread_mutex_unlock(&r->m->lock);
}

/* Exactly-once: one transaction with the outputs and the offsets. Returns 0 committed, 1 aborted
 * (its records must be read again), -1 on a fatal error. In the committer thread. */
static int commit_txn(struct run *r, const struct round *rd, struct dlk_err *err)
{
	rd_kafka_error_t *e = NULL;
	rd_kafka_resp_err_t pe;
	rd_kafka_consumer_group_metadata_t *cgmd;
	rd_kafka_topic_partition_list_t *offsets;
	const char *step = "begin";

	if ((e = rd_kafka_begin_transaction(r->prod)))
		goto failed;
	step = "produce";
	if ((pe = produce_round(r, rd))) {
		e = rd_kafka_error_new(pe, "%s", rd_kafka_err2str(pe));
		goto failed;
	}
	step = "send offsets";
	offsets = round_offsets(r, rd);
	cgmd = rd_kafka_consumer_group_metadata(r->cons);
	e = rd_kafka_send_offsets_to_transaction(r->prod, offsets, cgmd, TIMEOUT_MS);
	rd_kafka_consumer_group_metadata_destroy(cgmd);
	rd_kafka_topic_partition_list_destroy(offsets);
	if (e)
		goto failed;
	step = "commit";
	for (int tries = 0;; tries++) {
		if (!(e = rd_kafka_commit_transaction(r->prod, TIMEOUT_MS))) {
			count_committed(r, rd);
			return 0;
		}
		if (!rd_kafka_error_is_retriable(e) || tries == COMMIT_RETRIES)
			break;
		rd_kafka_error_destroy(e);
	}
failed:
	if (rd_kafka_error_is_fatal(e) ||
	    (!rd_kafka_error_txn_requires_abort(e) && strcmp(step, "commit") && !rd_kafka_error_is_retriable(e))) {
		rd_kafka_resp_err_t code = rd_kafka_error_code(e);
		char why[512];
		snprintf(why, sizeof(why), "%s", rd_kafka_error_string(e));
		/* a produce refused because the producer already failed: say what made it fail */
		if (code == RD_KAFKA_RESP_ERR__FATAL)
			code = rd_kafka_fatal_error(r->prod, why, sizeof(why));
		int fenced = code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
		             code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
		dlk_errf(err, fenced ? DLK_EXIT_FAIL : DLK_EXIT_CONNECT, "kafka transaction (%s) as '%s': %s", step,
		         r->txn_id, why);
		if (fenced)
			dlk_err_hint(err, "another replica uses the instance name '%s': give each replica its own "
			             "(--instance, or serving.stream.instance)", r->cfg->instance);
		rd_kafka_error_destroy(e);
		return -1;
	}
	event(r, 1, "transaction aborted at %s (%s): its %d records are scored again", step,
	      rd_kafka_error_string(e), rd->n_items);
	rd_kafka_error_destroy(e);
	if ((e = rd_kafka_abort_transaction(r->prod, TIMEOUT_MS))) {
		dlk_errf(err, DLK_EXIT_CONNECT, "kafka: cannot abort the transaction as '%s': %s", r->txn_id,
		         rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		return -1;
	}
	pthread_mutex_lock(&r->m->lock);
	r->m->txn_abort++;
	pthread_mutex_unlock(&r->m->lock);
	return 1;
}

/* At-least-once: every output delivered, then the offsets committed. In the committer thread. */
static int commit_plain(struct run *r, const struct round *rd, struct dlk_err *err)
{
	rd_kafka_resp_err_t e;
	rd_kafka_topic_partition_list_t *offsets;

	(void)err;
	r->delivery_failed = 0;
	e = produce_round(r, rd);
	if (!e)
		e = rd_kafka_flush(r->prod, TIMEOUT_MS);
	if (e || r->delivery_failed) {
		event(r, 1, "%d records not delivered (%s): they are scored again", rd->n_items,
		      e ? rd_kafka_err2str(e) : r->delivery_error);
		rd_kafka_purge(r->prod, RD_KAFKA_PURGE_F_QUEUE);
		rd_kafka_flush(r->prod, TIMEOUT_MS);
		pthread_mutex_lock(&r->m->lock);
		r->m->txn_abort++;
		pthread_mutex_unlock(&r->m->lock);
		return 1;
	}
	offsets = round_offsets(r, rd);
	e = rd_kafka_commit(r->cons, offsets, 0);
	rd_kafka_topic_partition_list_destroy(offsets);
	if (e) {
		/* the outputs are out; a later commit (or the next owner) covers these offsets, and the
		 * records in between are scored again: at least once */
		event(r, 1, "cannot commit offsets: %s", rd_kafka_err2str(e));
		return 0;
	}
	count_committed(r, rd);
	return 0;
}

static void *committer_main(void *arg)
{
	struct run *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->handed && !r->quit)
			pthread_cond_wait(&r->cv, &r->mu);
		if (!r->handed)
			break;
		struct round *rd = r->handed;
		pthread_mutex_unlock(&r->mu);
		struct dlk_err err = DLK_ERR_INIT;
		int res = r->cfg->exactly_once ? commit_txn(r, rd, &err) : commit_plain(r, rd, &err);
		pthread_mutex_lock(&r->mu);
		r->result = res;
		if (res < 0)
			r->cerr = err;
		r->handed = NULL;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Waits until the committer has settled the round last handed to it, frees that round and returns
 * its result (0 when there was none). An aborted round (1) is rewound when `rewind` says so,
 * together with the round being gathered, which the caller then drops. */
static int settle(struct run *r, int rewind, struct dlk_err *err)
{
	int res;

	if (!r->prev)
		return 0;
	pthread_mutex_lock(&r->mu);
	while (r->handed)
		pthread_cond_wait(&r->cv, &r->mu);
	res = r->result;
	if (res < 0)
		*err = r->cerr;
	pthread_mutex_unlock(&r->mu);
	if (res == 1 && rewind && rewind_rounds(r, r->prev, r->cur, err))
		res = -1;
	round_free(r->prev);
	r->prev = NULL;
	return res;
}

static int committer_failed(struct run *r)
{
	int failed;

	if (!r->prev)
		return 0;
	pthread_mutex_lock(&r->mu);
	failed = !r->handed && r->result < 0;
	pthread_mutex_unlock(&r->mu);
	return failed;
}

static void hand_over(struct run *r, struct round *rd)
{
	pthread_mutex_lock(&r->mu);
	r->handed = r->prev = rd;
	r->result = 0;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void update_lag(struct run *r)
{
	rd_kafka_topic_partition_list_t *a = NULL;

	if (rd_kafka_assignment(r->cons, &a))
		return;
	rd_kafka_position(r->cons, a);
	pthread_mutex_lock(&r->m->lock);
	r->m->n_lag = 0;
	for (int i = 0; i < a->cnt && r->m->n_lag < DLK_STREAM_MAX_LAG; i++) {
		int64_t lo = -1, hi = -1, pos = a->elems[i].offset, lag = -1;
		if (!rd_kafka_get_watermark_offsets(r->cons, a->elems[i].topic, a->elems[i].partition, &lo, &hi) &&
		    hi >= 0 && pos >= 0)
			lag = hi > pos ? hi - pos : 0;
		r->m->lag[r->m->n_lag].partition = a->elems[i].partition;
		r->m->lag[r->m->n_lag++].lag = lag;
	}
	pthread_mutex_unlock(&r->m->lock);
	rd_kafka_topic_partition_list_destroy(a);
}

static int loop(struct run *r, struct dlk_err *err)
{
	const struct dlk_stream_config *cfg = r->cfg;
	double last_lag = 0;

	for (;;) {
		struct round *rd = r->cur;
		double deadline = 0;
		int stopping = 0, res;
		/* gather: up to max_records, for at most commit_ms after the round's first record */
		while (rd->n_items < cfg->max_records) {
			if (*cfg->stop) {
				stopping = 1;
				break;
			}
			double t = now_ms();
			if (rd->n_items && t >= deadline)
				break;
			int wait = rd->n_items ? (int)(deadline - t) + 1 : 100;
			rd_kafka_message_t *msg = rd_kafka_consumer_poll(r->cons, wait > 100 ? 100 : wait);
			/* a round the committer could not commit for good (this replica was fenced, the
			 * brokers went away) ends the stream now, not when the next round is full */
			if (!r->fatal && committer_failed(r) && settle(r, 0, &r->cerr) < 0)
				r->fatal = 1;
			if (r->fatal) {
				*err = r->cerr;
				if (msg)
					rd_kafka_message_destroy(msg);
				return -1;
			}
			if (r->dropped) {
				round_free(rd);
				r->dropped = 0;
				deadline = 0;
			}
			if (!msg)
				continue;
			if (msg->err) {
				if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
					if (msg->err == RD_KAFKA_RESP_ERR__FATAL ||
					    msg->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
					    msg->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
						dlk_errf(err, DLK_EXIT_CONNECT, "kafka consumer: %s", rd_kafka_message_errstr(msg));
						rd_kafka_message_destroy(msg);
						return -1;
					}
					event(r, 1, "kafka consumer: %s", rd_kafka_message_errstr(msg));
				}
				rd_kafka_message_destroy(msg);
				continue;
			}
			if (!rd->n_items)
				deadline = now_ms() + cfg->commit_ms;
			gather(r, rd, msg);
			pthread_mutex_lock(&r->m->lock);
			r->m->records_in++;
			pthread_mutex_unlock(&r->m->lock);
		}
		/* score while the committer still works on the previous round */
		if (rd->n_items && score_round(r, rd, err))
			return -1;
		res = settle(r, 1, err);
		if (res < 0)
			return -1;
		if (res == 1) {
			/* the previous round was aborted and both were rewound: this one comes again */
			round_free(rd);
		} else if (rd->n_items) {
			hand_over(r, rd);
			r->cur = rd == &r->rounds[0] ? &r->rounds[1] : &r->rounds[0];
		}
		if (now_ms() - last_lag > 1000) {
			update_lag(r);
			last_lag = now_ms();
		}
		if (stopping)
			return settle(r, 0, err) < 0 ? -1 : 0;
	}
}

static void round_alloc(struct round *rd, const struct dlk_stream_config *cfg, const struct dlk_stream_scorer *sc)
{
	rd->items = xcalloc((size_t)cfg->max_records, sizeof(*rd->items));
	rd->spans = xcalloc((size_t)cfg->max_records, sizeof(*rd->spans));
	rd->x = xmalloc(sizeof(float) * (size_t)cfg->max_records * sc->sig->in_size);
	rd->logits = xmalloc(sizeof(float) * (size_t)cfg->max_records * (size_t)sc->sig->n_classes);
}

static void round_release(struct round *rd)
{
	round_free(rd);
	free(rd->items);
	free(rd->spans);
	free(rd->x);
	free(rd->logits);
}

int dlk_stream_run(const struct dlk_stream_config *cfg, const struct dlk_stream_scorer *sc,
                   struct dlk_stream_metrics *m, struct dlk_err *err)
{
	struct run r = { .cfg = cfg, .sc = sc, .m = m };
	int rc = -1;

	if (cfg->max_records < 1 || cfg->commit_ms < 1)
		return dlk_errf(err, DLK_EXIT_USAGE, "stream: max_records and commit_ms must be positive");
	if (cfg->record.sig != sc->sig)
		return dlk_errf(err, DLK_EXIT_USAGE, "stream: records are decoded for another model than the scorer's");
	if (cfg->record.format == DLK_RECORD_TEXT && !sc->sig->tokenizer)
		return dlk_errf(err, DLK_EXIT_USAGE, "stream: format text: the model '%s' takes no texts (it has no "
		                "tokenizer); its records are raw tensor bytes or V2 requests (format raw or json)",
		                sc->sig->name);
	r.dlq = cfg->dlq_topic ? xstrdup(cfg->dlq_topic) : xasprintf("%s.dlq", cfg->in_topic);
	r.txn_id = xasprintf("%s-%s", cfg->group, cfg->instance);
	round_alloc(&r.rounds[0], cfg, sc);
	round_alloc(&r.rounds[1], cfg, sc);
	r.cur = &r.rounds[0];
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	if (setup(&r, err))
		goto out;
	if (pthread_create(&r.committer, NULL, committer_main, &r)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot start the stream's committer thread");
		goto out;
	}
	r.committer_started = 1;
	event(&r, 0, "scoring '%s' into '%s' (dead letters: '%s'), group '%s', %s as '%s'", cfg->in_topic,
	      cfg->out_topic, r.dlq, cfg->group, cfg->exactly_once ? "exactly once" : "at least once", r.txn_id);
	rc = loop(&r, err);
out:
	if (r.committer_started) {
		struct dlk_err ignored = DLK_ERR_INIT;
		settle(&r, 0, &ignored);
		pthread_mutex_lock(&r.mu);
		r.quit = 1;
		pthread_cond_broadcast(&r.cv);
		pthread_mutex_unlock(&r.mu);
		pthread_join(r.committer, NULL);
	}
	r.cur = NULL;
	if (r.cons) {
		/* leaves the group now (the revocation runs the rebalance callback), so the partitions
		 * move to the other replicas at once instead of after the session timeout */
		rd_kafka_consumer_close(r.cons);
		rd_kafka_destroy(r.cons);
	}
	if (r.prod) {
		/* every round that counts was delivered (committed, or flushed in at-least-once mode);
		 * what is left belongs to a round that failed and is read again, so it is dropped rather
		 * than waited for (a fenced producer would never deliver it) */
		rd_kafka_purge(r.prod, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_flush(r.prod, 1000);
		rd_kafka_destroy(r.prod);
	}
	round_release(&r.rounds[0]);
	round_release(&r.rounds[1]);
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv);
	free(r.dlq);
	free(r.txn_id);
	return rc;
}
