/* dlk serve: the inference server. --local serves bundles on this machine; --worker is what a
 * serving pod runs. The server itself is lib/serve; this file turns options and the project
 * file's serving section into its settings, shows its events, and maps SIGTERM to a drain.
 * With a stream (--stream, or serving.stream in the project file) the same server also scores a
 * Kafka topic (lib/stream) through the model's batcher: SIGTERM then first finishes the stream's
 * open transaction and leaves its group, then drains HTTP. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "lib/nn/backend.h"
#include "lib/nn/gpu.h"
#include "lib/project/project.h"
#include "lib/serve/server.h"
#include "lib/stream/served.h"
#include "lib/stream/stream.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct stopper {
	sigset_t set;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	volatile int sig;        /* the signal that asked us to stop; 0 = none yet */
	volatile int exiting;    /* set before the SIGUSR1 that ends signal_thread */
};

/* Signals are blocked in every thread and taken here, so a handler never runs inside the HTTP
 * or compute threads and the main thread can wait for "stop" like any other event. */
static void *signal_thread(void *arg)
{
	struct stopper *s = arg;
	int sig = 0;

	while (sigwait(&s->set, &sig) == 0) {
		if (sig == SIGUSR1) {
			if (s->exiting)
				break; /* our own wake-up at exit */
			continue;
		}
		pthread_mutex_lock(&s->mu);
		int second = s->sig != 0;
		s->sig = sig;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		/* a second Ctrl-C or SIGTERM does not wait for the drain */
		if (second)
			_exit(DLK_EXIT_INTERRUPTED);
	}
	return NULL;
}

/* Threads that began before the signals were blocked (OpenBLAS starts its own when the library
 * loads) would take a SIGTERM with its default action, ending the process mid-transaction and
 * mid-drain. With this handler such a thread hands the signal on to the one that waits for it. */
static pthread_t signal_waiter;
static void forward_signal(int sig)
{
	pthread_kill(signal_waiter, sig);
}

static void show_event(void *ctx, const char *msg)
{
	dlk_info(ctx, "%s", msg);
}

/* ---- the stream ---- */

struct stream_run {
	struct dlk_ctx *ctx;
	struct dlk_stream_config cfg;
	struct dlk_stream_metrics m;
	struct dlk_stream_served served;
	struct stopper *stop;
	volatile sig_atomic_t stop_flag;
	char *brokers, *topic, *group, **props;
	char host[256];
	pthread_t tid;
	int started, metrics_ready;
	int rc;
	struct dlk_err err;
};

static void stream_event(void *ctx, int level, const char *msg)
{
	if (level)
		dlk_warn(ctx, "%s", msg);
	else
		dlk_info(ctx, "%s", msg);
}

static void stream_metrics(void *ctx, struct dlk_buf *out)
{
	dlk_stream_metrics_write(ctx, out);
}

/* A flag, else the project file's serving.stream value (NULL when neither says). */
static const char *pick(struct dlk_args *args, const char *flag, const char *from_spec)
{
	return dlk_opt_isset(args, flag) ? dlk_opt_str(args, flag) : from_spec;
}

/* The stream's settings from the flags and serving.stream; 0 when there is no stream, 1 when there
 * is one, -1 on a usage error. */
static int stream_settings(struct dlk_args *args, const struct dlk_serving *cfg, const struct dlk_project *spec,
                           struct stream_run *st, struct dlk_err *err)
{
	const struct dlk_stream_spec *ss = &cfg->stream;
	struct dlk_stream_config *c = &st->cfg;
	const struct dlk_optval *ks = dlk_opt(args, "kafka-set");
	static const char *const stream_only[] = { "to", "dead-letter", "group", "instance", "at-least-once", "format",
		"datatype", "kafka-set", NULL };
	const char *v;
	size_t n;

	if (!dlk_opt_isset(args, "stream") && !ss->brokers) {
		for (int i = 0; stream_only[i]; i++)
			if (dlk_opt_isset(args, stream_only[i]))
				return dlk_errf(err, DLK_EXIT_USAGE, "--%s goes with --stream", stream_only[i]);
		return 0;
	}
	if (dlk_opt_isset(args, "stream")) {
		if (dlk_stream_parse_url(dlk_opt_str(args, "stream"), &st->brokers, &st->topic, err))
			return -1;
	} else {
		st->brokers = xstrdup(ss->brokers);
		st->topic = xstrdup(ss->input);
	}
	c->brokers = st->brokers;
	c->in_topic = st->topic;
	if (!(c->out_topic = pick(args, "to", ss->output)))
		return dlk_errf(err, DLK_EXIT_USAGE, "--stream needs --to TOPIC, the topic the scores go to");
	c->dlq_topic = pick(args, "dead-letter", ss->dead_letter);
	c->exactly_once = !dlk_opt_num(args, "at-least-once") && (ss->brokers ? ss->exactly_once : 1);
	if ((v = pick(args, "group", ss->group)))
		st->group = xstrdup(v);
	else if (spec)
		st->group = xasprintf("dlk-%s", spec->name);
	else
		st->group = NULL; /* the model's name, once it is loaded */
	c->group = st->group;
	if (!(c->instance = pick(args, "instance", ss->instance))) {
		/* the pod's name in a cluster, which a restarted container keeps */
		if (gethostname(st->host, sizeof(st->host) - 1) || !st->host[0])
			snprintf(st->host, sizeof(st->host), "dlk");
		c->instance = st->host;
	}
	v = pick(args, "format", ss->format);
	c->record.format = v ? (enum dlk_record_format)dlk_record_format_parse(v) : DLK_RECORD_RAW;
	v = pick(args, "datatype", ss->datatype);
	c->record.dtype = v ? dlk_dtype_parse(v, strlen(v)) : DLK_DT_FP32;
	if (!dlk_dtype_numeric(c->record.dtype))
		return dlk_errf(err, DLK_EXIT_USAGE, "--datatype '%s': expected UINT8, INT8, UINT16, INT16, UINT32, INT32, "
		                "UINT64, INT64, FP16, FP32 or FP64", v);
	c->record.max_bytes = (size_t)cfg->max_request_bytes;
	c->record.lim.max_depth = cfg->max_json_depth;
	if (ss->max_records)
		c->max_records = ss->max_records;
	if (ss->commit_ms)
		c->commit_ms = ss->commit_ms;
	if (dlk_opt_isset(args, "max-records"))
		c->max_records = (int)dlk_opt_num(args, "max-records");
	if (dlk_opt_isset(args, "commit-ms"))
		c->commit_ms = (int)dlk_opt_num(args, "commit-ms");
	if (c->max_records < 1 || c->max_records > (1 << 20) || c->commit_ms < 1 || c->commit_ms > 600000)
		return dlk_errf(err, DLK_EXIT_USAGE, "--max-records: 1 to 1048576, --commit-ms: 1 to 600000");
	/* the project file's properties, then the flags' (the later setting wins) */
	n = (size_t)ss->n_properties;
	st->props = xcalloc(n + ks->n_list + 1, sizeof(*st->props));
	for (size_t i = 0; i < n; i++)
		st->props[i] = xasprintf("%s=%s", ss->properties[i].key, ss->properties[i].value);
	for (size_t i = 0; i < ks->n_list; i++)
		st->props[n + i] = xstrdup(ks->list[i]);
	c->props = (const char *const *)st->props;
	c->n_props = n + ks->n_list;
	c->stop = &st->stop_flag;
	c->event = stream_event;
	c->event_ctx = st->ctx;
	return 1;
}

/* The stream's thread: when it ends (an error, or after the stop flag), it wakes the main thread */
static void *stream_main(void *arg)
{
	struct stream_run *st = arg;

	st->rc = dlk_stream_run(&st->cfg, &st->served.sc, &st->m, &st->err);
	pthread_mutex_lock(&st->stop->mu);
	if (!st->stop->sig)
		st->stop->sig = -1; /* not a signal: the stream ended by itself */
	pthread_cond_broadcast(&st->stop->cv);
	pthread_mutex_unlock(&st->stop->mu);
	return NULL;
}

static void stream_release(struct stream_run *st)
{
	for (size_t i = 0; st->props && st->props[i]; i++)
		free(st->props[i]);
	free(st->props);
	free(st->brokers);
	free(st->topic);
	free(st->group);
}

/* The serving settings: the project file's section when there is a project (-f given, or a
 * dlk.yaml here), else the defaults; --set serving.KEY=VALUE applies either way. */
static int serving_settings(struct dlk_ctx *ctx, struct dlk_args *args, int worker, struct dlk_serving *cfg,
                            struct dlk_project **spec, struct dlk_err *err)
{
	struct stat st;

	*spec = NULL;
	if (worker || dlk_opt_isset(args, "file") || stat(ctx->file, &st) == 0) {
		*spec = dlk_ctx_load_spec(ctx, err);
		if (!*spec)
			return -1;
		*cfg = (*spec)->serving; /* strings stay owned by the project */
		return 0;
	}
	return project_serving_load(ctx->sets, ctx->n_sets, cfg, err);
}

static int run_serve(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_serving cfg;
	struct dlk_project *spec = NULL;
	struct dlk_server *srv = NULL;
	struct stopper stop;
	pthread_t sig_thread;
	int local = (int)dlk_opt_num(args, "local"), worker = (int)dlk_opt_num(args, "worker");
	int rc = 0, have_cfg = 0, have_thread = 0, log_fd = -1;
	const char *log_path = dlk_opt_str(args, "access-log");
	const char *host = dlk_opt_str(args, "host");
	long long port = dlk_opt_isset(args, "port") ? dlk_opt_num(args, "port") : -1;
	struct stream_run *st = xcalloc(1, sizeof(*st));
	int streaming = 0;

	memset(&cfg, 0, sizeof(cfg));
	st->ctx = ctx;
	st->cfg = (struct dlk_stream_config)DLK_STREAM_CONFIG_INIT;
	st->err = (struct dlk_err)DLK_ERR_INIT;
	if (local + worker != 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, local ? "--local and --worker exclude each other"
		                                     : "deploying a model to the cluster is not available yet");
		if (!local)
			dlk_err_hint(&err, "serve bundles on this machine: dlk serve --local MODEL.dlk");
		return dlk_report(ctx, &err);
	}
	if (args->n_pos < 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, "no model to serve: name one or more bundles (MODEL.dlk or NAME=MODEL.dlk)");
		return dlk_report(ctx, &err);
	}
	if (port < -1 || port > 65535) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--port: expected 0 to 65535, not %lld", port);
		return dlk_report(ctx, &err);
	}
	if (serving_settings(ctx, args, worker, &cfg, &spec, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	have_cfg = !spec;
	if ((streaming = stream_settings(args, &cfg, spec, st, &err)) < 0) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (streaming && args->n_pos != 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, "a stream is scored by one model: give one bundle, not %d", args->n_pos);
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (streaming) {
		dlk_stream_metrics_init(&st->m, st->topic);
		st->metrics_ready = 1;
	}
	if (log_path) {
		log_fd = strcmp(log_path, "-") ? open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : STDOUT_FILENO;
		if (log_fd < 0) {
			dlk_errf(&err, DLK_EXIT_USAGE, "--access-log: cannot open '%s': %s", log_path, strerror(errno));
			rc = dlk_report(ctx, &err);
			goto out;
		}
	} else if (cfg.access_log) {
		log_fd = STDOUT_FILENO;
	}

	/* every thread inherits the blocked signals; only signal_thread takes them */
	memset(&stop, 0, sizeof(stop));
	sigemptyset(&stop.set);
	sigaddset(&stop.set, SIGTERM);
	sigaddset(&stop.set, SIGINT);
	sigaddset(&stop.set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &stop.set, NULL);
	pthread_mutex_init(&stop.mu, NULL);
	pthread_cond_init(&stop.cv, NULL);
	if (pthread_create(&sig_thread, NULL, signal_thread, &stop) == 0) {
		struct sigaction sa;
		have_thread = 1;
		signal_waiter = sig_thread;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = forward_signal;
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}

	/* the CUDA backend when a GPU is here (gpus > 0 in a pod asks for one), else the CPU */
	struct dlk_err cerr = DLK_ERR_INIT;
	const struct dlk_backend *be = cfg.gpus > 0 ? dlk_backend_cuda(NULL, &cerr) : NULL;
	if (cfg.gpus > 0 && !be)
		dlk_warn(ctx, "serving.gpus is %d but the CUDA backend is unavailable (%s): serving on the CPU", cfg.gpus, cerr.msg);
	struct dlk_server_opts so = {
		.cfg = &cfg,
		.host = host ? host : worker ? NULL : "127.0.0.1",
		.port = (int)port,
		.models = args->pos,
		.n_models = args->n_pos,
		.access_log_fd = log_fd,
		.be = be ? be : dlk_backend_cpu(),
		.version = DLK_VERSION,
		.event = show_event,
		.event_ctx = ctx,
		.metrics = streaming ? stream_metrics : NULL,
		.metrics_ctx = &st->m,
	};
	srv = dlk_server_new(&so, &err);
	if (!srv) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	dlk_info(ctx, "listening on http://%s:%d (live; ready once every model is loaded and warmed up)",
	         so.host ? so.host : "0.0.0.0", dlk_server_port(srv));
	if (dlk_server_start(srv, &stop.sig, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (streaming) {
		struct dlk_serve_model *m = &srv->models[0];
		dlk_stream_served_init(&st->served, m, cfg.max_batch);
		st->cfg.record.sig = &m->sig;
		if (!st->group)
			st->cfg.group = st->group = xasprintf("dlk-%s", m->name);
		st->stop = &stop;
		if (pthread_create(&st->tid, NULL, stream_main, st)) {
			dlk_errf(&err, DLK_EXIT_FAIL, "cannot start the stream's thread");
			rc = dlk_report(ctx, &err);
			goto out;
		}
		st->started = 1;
	}
	pthread_mutex_lock(&stop.mu);
	while (!stop.sig)
		pthread_cond_wait(&stop.cv, &stop.mu);
	pthread_mutex_unlock(&stop.mu);
	if (st->started) {
		/* the stream first: its open transaction commits through the batcher, which the drain
		 * below would close */
		st->stop_flag = 1;
		pthread_join(st->tid, NULL);
		st->started = 0;
		if (st->rc) {
			rc = dlk_report(ctx, &st->err);
			dlk_server_drain(srv, cfg.drain_timeout_s);
			goto out;
		}
		dlk_info(ctx, "stream stopped: %llu records in, %llu scored, %llu dead-lettered",
		         (unsigned long long)st->m.records_in, (unsigned long long)st->m.records_out,
		         (unsigned long long)st->m.records_failed);
	}
	dlk_info(ctx, "%s: draining (readiness fails now; in-flight requests get up to %d s)",
	         stop.sig == SIGTERM ? "SIGTERM" : stop.sig == SIGINT ? "interrupted" : "stream ended", cfg.drain_timeout_s);
	long left = dlk_server_drain(srv, cfg.drain_timeout_s);
	if (left) {
		dlk_errf(&err, DLK_EXIT_FAIL, "%ld request%s still unanswered after %d s of draining", left, left == 1 ? "" : "s",
		         cfg.drain_timeout_s);
		dlk_err_hint(&err, "raise serving.drain_timeout_s (and the pod's terminationGracePeriodSeconds)");
		rc = dlk_report(ctx, &err);
	} else {
		dlk_info(ctx, "drained: every request answered");
	}
out:
	if (st->started) {
		st->stop_flag = 1;
		pthread_join(st->tid, NULL);
	}
	dlk_server_free(srv);
	if (st->served.batcher)
		dlk_stream_served_release(&st->served);
	if (st->metrics_ready)
		dlk_stream_metrics_release(&st->m);
	stream_release(st);
	free(st);
	if (have_thread) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		stop.exiting = 1;
		pthread_kill(sig_thread, SIGUSR1);
		pthread_join(sig_thread, NULL);
		pthread_mutex_destroy(&stop.mu);
		pthread_cond_destroy(&stop.cv);
	}
	if (log_fd >= 0 && log_fd != STDOUT_FILENO)
		close(log_fd);
	if (have_cfg)
		project_serving_release(&cfg);
	project_free(spec);
	return rc;
}

static const struct dlk_option serve_options[] = {
	{ OPT_BOOL, 0, "local", NULL, "serve the bundles on this machine", COMPLETE_NONE, NULL, NULL },
	{ OPT_BOOL, 0, "worker", NULL, "be a serving pod (what the rendered Deployment runs)", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "host", "ADDR", "the address to listen on", COMPLETE_NONE, NULL, "127.0.0.1 with --local, every address with --worker" },
	{ OPT_INT, 0, "port", "N", "the port to listen on (0: any free port, shown when listening)", COMPLETE_NONE, NULL, "serving.port, 8080" },
	{ OPT_STRING, 0, "access-log", "FILE", "append one line per request to FILE ('-': standard output)", COMPLETE_FILE, NULL, NULL },
	{ OPT_STRING, 0, "stream", "URL", "also score the records of a Kafka topic: kafka://HOST:PORT[,HOST:PORT]/TOPIC", COMPLETE_NONE, NULL, "serving.stream" },
	{ OPT_STRING, 0, "to", "TOPIC", "with --stream: the topic the output records go to", COMPLETE_NONE, NULL, "serving.stream.output" },
	{ OPT_STRING, 0, "dead-letter", "TOPIC", "with --stream: where records that cannot be decoded go", COMPLETE_NONE, NULL, "INPUT.dlq" },
	{ OPT_STRING, 0, "group", "NAME", "with --stream: the consumer group the replicas share", COMPLETE_NONE, NULL, "dlk-NAME" },
	{ OPT_STRING, 0, "instance", "NAME", "with --stream: this replica's name, kept across its restarts", COMPLETE_NONE, NULL, "the host name" },
	{ OPT_BOOL, 0, "at-least-once", NULL, "with --stream: no transactions (brokers without them); a crash may score records twice", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "format", "FORMAT", "with --stream: records without a content-type header are raw tensor bytes or V2 JSON", COMPLETE_WORDS, "raw json", "raw" },
	{ OPT_STRING, 0, "datatype", "TYPE", "with --stream: the datatype of raw records without a dlk-datatype header", COMPLETE_WORDS, "UINT8 INT8 UINT16 INT16 UINT32 INT32 UINT64 INT64 FP16 FP32 FP64", "FP32" },
	{ OPT_INT, 0, "max-records", "N", "with --stream: most records in one transaction", COMPLETE_NONE, NULL, "2000" },
	{ OPT_INT, 0, "commit-ms", "MS", "with --stream: longest a transaction gathers records before it commits", COMPLETE_NONE, NULL, "100" },
	{ OPT_LIST, 0, "kafka-set", "NAME=VALUE", "with --stream: a librdkafka property for both clients (repeatable)", COMPLETE_NONE, NULL, NULL },
	{ OPT_END, 0, NULL, NULL, NULL, 0, NULL, NULL },
};

const struct dlk_command_def dlk_cmd_serve = {
	.name = "serve",
	.summary = "serve trained models over HTTP (KServe V2, TF Serving REST) or on a Kafka topic",
	.usage = "MODEL.dlk|NAME=MODEL.dlk...",
	.description = "Serve model bundles over HTTP on this machine (--local) or as a serving pod (--worker):\n"
	               "the KServe V2 inference protocol with binary tensors and classification, TensorFlow\n"
	               "Serving's REST API and Prometheus /metrics, with dynamic batching. Settings come from\n"
	               "the project file's serving section (when there is one) and --set serving.KEY=VALUE.\n"
	               "SIGTERM drains: readiness fails, in-flight requests finish, then dlk exits 0.\n"
	               "With --stream, the model also scores a Kafka topic into another, exactly once.",
	.options = serve_options,
	.min_pos = 0,
	.max_pos = -1,
	.complete_pos = COMPLETE_FILE,
	.run = run_serve,
	.examples = "  $ dlk serve --local fashion.dlk\n"
	            "  $ dlk serve --local --port 9000 mlp=mlp.dlk cnn=cnn.dlk\n"
	            "  $ dlk serve --local fashion.dlk --set serving.max_batch=32 --set serving.max_delay_us=500\n"
	            "  $ dlk serve --local fashion.dlk --access-log -\n"
	            "  $ dlk serve --local fashion.dlk --stream kafka://localhost:9092/images --to scores\n",
};
