/* dlk serve: serve a model here (--local). With --stream it scores a Kafka topic into another
 * (lib/stream): every input record gets one output record, exactly once, and /metrics tells how
 * it goes. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "lib/project/project.h"
#include "lib/stream/scorer.h"
#include "lib/stream/stream.h"
#include "lib/util/mem.h"

#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	static const char msg[] = "error: stopped at once by a second signal\n";

	(void)sig;
	if (stop_flag) {
		ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)w;
		_exit(DLK_EXIT_INTERRUPTED);
	}
	stop_flag = 1;
}

struct http {
	struct dlk_stream_metrics *m;
	volatile int ready;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* /metrics and the health routes of the V2 protocol: live while the process runs, ready while
 * the stream is connected and consuming */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **state)
{
	struct http *h = cls;

	(void)version, (void)data, (void)data_size, (void)state;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(c, 405, "application/json", xstrdup("{\"error\":\"method not allowed\"}"), 30);
	if (!strcmp(url, "/metrics")) {
		struct dlk_buf b = DLK_BUF_INIT;
		size_t len;
		dlk_stream_metrics_write(h->m, &b);
		char *s = dlk_buf_detach(&b, &len);
		return reply(c, 200, "text/plain; version=0.0.4", s, len);
	}
	if (!strcmp(url, "/v2/health/live"))
		return reply(c, 200, "application/json", xstrdup("{\"live\":true}"), 13);
	if (!strcmp(url, "/v2/health/ready")) {
		int ok = h->ready && !stop_flag;
		return reply(c, ok ? 200 : 503, "application/json", xstrdup(ok ? "{\"ready\":true}" : "{\"ready\":false}"),
		             ok ? 14 : 15);
	}
	return reply(c, 404, "application/json", xstrdup("{\"error\":\"not found\"}"), 21);
}

struct stream_thread {
	const struct dlk_stream_config *cfg;
	const struct dlk_stream_scorer *sc;
	struct dlk_stream_metrics *m;
	struct dlk_err err;
	int rc;
	volatile int done;
};

static void *stream_main(void *arg)
{
	struct stream_thread *t = arg;

	t->rc = dlk_stream_run(t->cfg, t->sc, t->m, &t->err);
	t->done = 1;
	return NULL;
}

static void on_event(void *ctx, int level, const char *msg)
{
	if (level)
		dlk_warn(ctx, "%s", msg);
	else
		dlk_info(ctx, "%s", msg);
}

static int positive_opt(struct dlk_args *args, const char *name, long long max, int *out, struct dlk_err *err)
{
	if (!dlk_opt_isset(args, name))
		return 0;
	long long v = dlk_opt_num(args, name);
	if (v < 1 || v > max)
		return dlk_errf(err, DLK_EXIT_USAGE, "--%s: expected 1 to %lld, not %lld", name, max, v);
	*out = (int)v;
	return 0;
}

/* A flag, else the project file's serving.stream value, else NULL. */
static const char *pick(struct dlk_args *args, const char *flag, const char *from_spec)
{
	return dlk_opt_isset(args, flag) ? dlk_opt_str(args, flag) : from_spec;
}

static int run_stream(struct dlk_ctx *ctx, struct dlk_args *args, const char *bundle, const struct dlk_project *spec)
{
	const struct dlk_stream_spec *ss = spec ? &spec->serving.stream : NULL;
	const char **props = NULL;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_stream_config cfg = DLK_STREAM_CONFIG_INIT;
	struct dlk_net_scorer ns;
	struct dlk_stream_metrics m;
	struct stream_thread st = { 0 };
	struct http h = { 0 };
	struct MHD_Daemon *d = NULL;
	struct sigaction sa;
	char *brokers = NULL, *topic = NULL, host[256] = "";
	int rc = 0, threads = 0, port = 8080, opened = 0, fmt;
	pthread_t tid;

	if (dlk_opt_isset(args, "stream")) {
		if (dlk_stream_parse_url(dlk_opt_str(args, "stream"), &brokers, &topic, &err))
			goto fail;
	} else {
		brokers = xstrdup(ss->brokers);
		topic = xstrdup(ss->input);
	}
	if (!pick(args, "to", ss ? ss->output : NULL)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--stream needs --to TOPIC, the topic the scores go to");
		goto fail;
	}
	cfg.brokers = brokers;
	cfg.in_topic = topic;
	cfg.out_topic = pick(args, "to", ss ? ss->output : NULL);
	cfg.dlq_topic = pick(args, "dead-letter", ss ? ss->dead_letter : NULL);
	cfg.exactly_once = !dlk_opt_num(args, "at-least-once") && (!ss || ss->exactly_once);
	if (pick(args, "group", ss ? ss->group : NULL)) {
		cfg.group = xstrdup(pick(args, "group", ss ? ss->group : NULL));
	} else if (spec) {
		cfg.group = xasprintf("dlk-%s", spec->name);
	} else {
		/* the bundle's file name without .dlk: replicas of one model share a group */
		const char *b = strrchr(bundle, '/') ? strrchr(bundle, '/') + 1 : bundle;
		size_t n = strlen(b) > 4 && !strcmp(b + strlen(b) - 4, ".dlk") ? strlen(b) - 4 : strlen(b);
		cfg.group = xasprintf("dlk-%.*s", (int)n, b);
	}
	if (pick(args, "instance", ss ? ss->instance : NULL)) {
		cfg.instance = pick(args, "instance", ss ? ss->instance : NULL);
	} else {
		/* the pod's name in a cluster, which a restarted container keeps */
		if (gethostname(host, sizeof(host) - 1) || !host[0])
			snprintf(host, sizeof(host), "dlk");
		cfg.instance = host;
	}
	fmt = pick(args, "format", ss ? ss->format : NULL) ?
		dlk_record_format_parse(pick(args, "format", ss ? ss->format : NULL)) : DLK_RECORD_RAW;
	cfg.record.format = (enum dlk_record_format)fmt;
	if (pick(args, "datatype", ss ? ss->datatype : NULL)) {
		const char *s = pick(args, "datatype", ss ? ss->datatype : NULL);
		int t = dlk_dtype_parse(s, strlen(s));
		if (t < 0) {
			dlk_errf(&err, DLK_EXIT_USAGE, "--datatype '%s': expected FP32, FP64, INT8, UINT8, INT16, UINT16, "
			         "INT32, UINT32, INT64 or UINT64", s);
			goto fail;
		}
		cfg.record.dtype = (enum dlk_dtype)t;
	}
	cfg.record.max_bytes = 64u << 20;
	if (ss) {
		cfg.max_records = ss->max_records;
		cfg.commit_ms = ss->commit_ms;
	}
	if (positive_opt(args, "max-batch", 65536, &cfg.max_batch, &err) ||
	    positive_opt(args, "max-records", 1 << 20, &cfg.max_records, &err) ||
	    positive_opt(args, "commit-ms", 600000, &cfg.commit_ms, &err))
		goto fail;
	if (dlk_opt_isset(args, "threads"))
		threads = (int)dlk_opt_num(args, "threads");
	if (dlk_opt_isset(args, "port")) {
		long long p = dlk_opt_num(args, "port");
		if (p < 0 || p > 65535) {
			dlk_errf(&err, DLK_EXIT_USAGE, "--port: expected 0 to 65535, not %lld", p);
			goto fail;
		}
		port = (int)p;
	}
	/* the project file's properties, then the flags' (the later setting wins) */
	{
		const struct dlk_optval *ks = dlk_opt(args, "kafka-set");
		size_t n = ss ? (size_t)ss->n_properties : 0;
		props = xcalloc(n + ks->n_list + 1, sizeof(*props));
		for (size_t i = 0; i < n; i++)
			props[i] = xasprintf("%s=%s", ss->properties[i].key, ss->properties[i].value);
		for (size_t i = 0; i < ks->n_list; i++)
			props[n + i] = xstrdup(ks->list[i]);
		cfg.props = props;
		cfg.n_props = n + ks->n_list;
	}
	cfg.stop = &stop_flag;
	cfg.event = on_event;
	cfg.event_ctx = ctx;

	if (dlk_net_scorer_open(&ns, bundle, cfg.max_batch, threads, &err))
		goto fail;
	opened = 1;
	cfg.record.input_size = ns.sc.input_size;
	memcpy(cfg.record.shape, ns.sc.shape, sizeof(cfg.record.shape));
	dlk_stream_metrics_init(&m, topic);
	h.m = &m;
	if (port) {
		d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL,
		                     on_request, &h, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
		if (!d) {
			dlk_errf(&err, DLK_EXIT_FAIL, "cannot listen on port %d for /metrics", port);
			dlk_err_hint(&err, "choose another with --port (0: no HTTP listener)");
			goto fail_m;
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	st.cfg = &cfg;
	st.sc = &ns.sc;
	st.m = &m;
	st.err = (struct dlk_err)DLK_ERR_INIT;
	if (pthread_create(&tid, NULL, stream_main, &st)) {
		dlk_errf(&err, DLK_EXIT_FAIL, "cannot start the stream's thread");
		goto fail_m;
	}
	if (port)
		dlk_info(ctx, "metrics on http://0.0.0.0:%d/metrics", port);
	h.ready = 1;
	{
		struct dlk_progress bar = { ctx, 0, 0 };
		while (!st.done) {
			usleep(100 * 1000);
			pthread_mutex_lock(&m.lock);
			unsigned long long in = m.records_in, out = m.records_out, failed = m.records_failed;
			pthread_mutex_unlock(&m.lock);
			dlk_progress_draw(&bar, 0, "%llu records in, %llu scored, %llu dead-lettered", in, out, failed);
		}
		dlk_progress_clear(&bar);
	}
	pthread_join(tid, NULL);
	h.ready = 0;
	if (st.rc) {
		err = st.err;
		goto fail_m;
	}
	dlk_info(ctx, "stopped: %llu records in, %llu scored, %llu dead-lettered", (unsigned long long)m.records_in,
	         (unsigned long long)m.records_out, (unsigned long long)m.records_failed);
	goto out;
fail_m:
	rc = dlk_report(ctx, &err);
out:
	if (d)
		MHD_stop_daemon(d);
	dlk_stream_metrics_release(&m);
	goto done;
fail:
	rc = dlk_report(ctx, &err);
done:
	if (opened)
		dlk_net_scorer_close(&ns);
	free((char *)cfg.group);
	for (size_t i = 0; props && props[i]; i++)
		free((char *)props[i]);
	free(props);
	free(brokers);
	free(topic);
	return rc;
}

static int run_serve(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	int rc;

	if (!dlk_opt_num(args, "local")) {
		dlk_errf(&err, DLK_EXIT_USAGE, "dlk serve needs --local (serving here)");
		return dlk_report(ctx, &err);
	}
	/* the project file, when there is one, may describe the stream (serving.stream) */
	if (!access(ctx->file, F_OK) && !(spec = dlk_ctx_load_spec(ctx, &err)))
		return dlk_report(ctx, &err);
	if (!dlk_opt_isset(args, "stream") && !(spec && spec->serving.stream.brokers)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "this build serves streams only: give --stream kafka://BROKERS/TOPIC");
		dlk_err_hint(&err, "or describe the stream in the project file's serving.stream section");
		rc = dlk_report(ctx, &err);
	} else if (args->n_pos != 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, "a stream is scored by one model: give one bundle, not %d", args->n_pos);
		rc = dlk_report(ctx, &err);
	} else {
		rc = run_stream(ctx, args, args->pos[0], spec);
	}
	project_free(spec);
	return rc;
}

static const struct dlk_option serve_options[] = {
	{ OPT_BOOL, 0, "local", NULL, "serve here, on this machine", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "stream", "URL", "score the records of a Kafka topic: kafka://HOST:PORT[,HOST:PORT]/TOPIC", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "to", "TOPIC", "with --stream: the topic the output records go to", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "dead-letter", "TOPIC", "with --stream: where records that cannot be decoded go", COMPLETE_NONE, NULL, "INPUT.dlq" },
	{ OPT_STRING, 0, "group", "NAME", "with --stream: the consumer group the replicas share", COMPLETE_NONE, NULL, "dlk-MODEL" },
	{ OPT_STRING, 0, "instance", "NAME", "with --stream: this replica's name, kept across its restarts", COMPLETE_NONE, NULL, "the host name" },
	{ OPT_BOOL, 0, "at-least-once", NULL, "with --stream: no transactions (for brokers without them); a crash may score records twice", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "format", "FORMAT", "with --stream: records without a content-type header are raw tensor bytes or V2 JSON", COMPLETE_WORDS, "raw json", "raw" },
	{ OPT_STRING, 0, "datatype", "TYPE", "with --stream: the datatype of raw records without a dlk-datatype header", COMPLETE_WORDS, "FP32 FP64 INT8 UINT8 INT16 UINT16 INT32 UINT32 INT64 UINT64", "FP32" },
	{ OPT_INT, 0, "max-batch", "N", "most examples in one forward pass", COMPLETE_NONE, NULL, "64" },
	{ OPT_INT, 0, "max-records", "N", "with --stream: most records in one transaction", COMPLETE_NONE, NULL, "2000" },
	{ OPT_INT, 0, "commit-ms", "MS", "with --stream: longest a transaction gathers records before it commits", COMPLETE_NONE, NULL, "100" },
	{ OPT_LIST, 0, "kafka-set", "NAME=VALUE", "with --stream: a librdkafka property for both clients (repeatable)", COMPLETE_NONE, NULL, NULL },
	{ OPT_INT, 0, "threads", "N", "BLAS threads (0: all cores)", COMPLETE_NONE, NULL, "0" },
	{ OPT_INT, 'p', "port", "PORT", "HTTP port for /metrics and the health routes (0: none)", COMPLETE_NONE, NULL, "8080" },
	{ OPT_END, 0, NULL, NULL, NULL, 0, NULL, NULL },
};

const struct dlk_command_def dlk_cmd_serve = {
	.name = "serve",
	.summary = "serve a model: score a Kafka topic into another, here",
	.usage = "MODEL.dlk",
	.description = "Load a model bundle (verified) and serve it on this machine (--local). With --stream,\n"
	               "consume a Kafka topic, score each record and produce one output record per input to\n"
	               "the --to topic, in transactions that also commit the consumed offsets, so that nothing\n"
	               "is lost or doubled when a replica dies. Replicas in one consumer group share the\n"
	               "topic's partitions.",
	.options = serve_options,
	.min_pos = 1,
	.max_pos = -1,
	.complete_pos = COMPLETE_FILE,
	.run = run_serve,
	.examples = "  $ dlk serve --local fashion.dlk --stream kafka://localhost:9092/images --to scores\n"
	            "  $ dlk serve --local fashion.dlk --stream kafka://k1:9092,k2:9092/images --to scores --instance a\n",
};
