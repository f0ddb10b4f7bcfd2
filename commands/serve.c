/* dlk serve: the inference server. --local serves bundles on this machine; --worker is what a
 * serving pod runs. The server itself is lib/serve; this file turns options and the project
 * file's serving section into its settings, shows its events, and maps SIGTERM to a drain.
 * With a stream (--stream, or serving.stream in the project file) the same server also scores a
 * Kafka topic (lib/stream) through the model's batcher: SIGTERM then first finishes the stream's
 * open transaction and leaves its group, then drains HTTP.
 * Without a mode, dlk serve NAME deploys to the cluster (commands/serve_deploy.c). */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/serve_deploy.h"
#include "commands/ui.h"
#include "lib/data/fetch.h"
#include "lib/gen/lm.h"
#include "lib/nn/backend.h"
#include "lib/nn/gpu.h"
#include "lib/project/project.h"
#include "lib/serve/server.h"
#include "lib/top/top.h"
#include "lib/serve/tensor.h"
#include "lib/stream/served.h"
#include "lib/stream/stream.h"
#include "lib/train/bundle.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* SIGTERM and SIGINT: the handler records the first and wakes the main thread through a pipe
 * (write(2) is async-signal-safe); a second one exits at once. A handler rather than blocking
 * the signals and sigwait(): threads that libraries start before dlk runs (OpenBLAS's pool) do
 * not have them blocked, and the kernel may deliver a process signal to any thread. */
static volatile sig_atomic_t stop_sig;
static int stop_pipe[2] = { -1, -1 };

static void on_stop_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;
	if (stop_sig)
		_exit(DLK_EXIT_INTERRUPTED);
	stop_sig = sig;
	if (write(stop_pipe[1], &c, 1) < 0) {
		/* nothing to do: the flag is set, and the pipe is only a wake-up */
	}
	errno = saved;
}

/* set by the stream's thread when the stream ended by itself (an error), which also wakes the
 * main thread through the pipe */
static atomic_int stream_ended;

/* waits until a stop signal has arrived or the stream has ended */
static void wait_for_stop(void)
{
	struct pollfd pfd = { stop_pipe[0], POLLIN, 0 };
	while (!stop_sig && !atomic_load(&stream_ended))
		if (poll(&pfd, 1, 1000) < 0 && errno != EINTR)
			break;
}

/* dlk re-executes itself with the OpenBLAS kernels this CPU should run (main.c); they are still
 * the old ones when the user chose them with $OPENBLAS_CORETYPE or the re-execution failed, and
 * the forward pass then runs at a fraction of the speed the CPU's vector units allow. */
static void check_blas_kernels(const struct dlk_ctx *ctx, const struct dlk_backend *be)
{
	const char *want = be == dlk_backend_cpu() ? dlk_cpu_blas_coretype() : NULL;
	if (want)
		dlk_warn(ctx, "%s: OpenBLAS runs older kernels than this CPU allows; start dlk with "
		         "OPENBLAS_CORETYPE=%s (or without the variable) for its faster ones", be->device, want);
}

static void show_event(void *ctx, const char *msg)
{
	dlk_info(ctx, "%s", msg);
}

static const char *const datatype_names[] = { "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64",
	"INT64", "FP16", "FP32", "FP64", NULL };

static struct dlk_serve_cli opt;

/* ---- the stream ---- */

struct stream_run {
	struct dlk_ctx *ctx;
	struct dlk_stream_config cfg;
	struct dlk_stream_metrics m;
	struct dlk_stream_served served;
	volatile sig_atomic_t stop_flag;
	char *brokers, *topic, *group, **props;
	char host[256];
	pthread_t tid;
	int started, metrics_ready, served_ready;
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

/* The stream's settings from the flags and serving.stream; 0 when there is no stream, 1 when there
 * is one, -1 on a usage error. */
static int stream_settings(const struct dlk_serving *cfg, const struct dlk_project *spec, struct stream_run *st,
                           struct dlk_err *err)
{
	const struct dlk_stream_spec *ss = &cfg->stream;
	struct dlk_stream_config *c = &st->cfg;
	const char *v;
	size_t n;

	if (!opt.stream && !ss->brokers) {
		const char *given = opt.to ? "to" : opt.dead_letter ? "dead-letter" : opt.group ? "group" :
		                    opt.instance ? "instance" : opt.at_least_once ? "at-least-once" :
		                    opt.format >= 0 ? "format" : opt.datatype >= 0 ? "datatype" :
		                    opt.max_records ? "max-records" : opt.commit_ms ? "commit-ms" :
		                    opt.kafka_set.n ? "kafka-set" : NULL;
		if (given)
			return dlk_errf(err, DLK_EXIT_USAGE, "--%s goes with --stream (or serving.stream in the project file)", given);
		return 0;
	}
	if (opt.stream) {
		if (dlk_stream_parse_url(opt.stream, &st->brokers, &st->topic, err))
			return -1;
	} else {
		st->brokers = xstrdup(ss->brokers);
		st->topic = xstrdup(ss->input);
	}
	c->brokers = st->brokers;
	c->in_topic = st->topic;
	if (!(c->out_topic = opt.to ? opt.to : ss->output))
		return dlk_errf(err, DLK_EXIT_USAGE, "--stream needs --to TOPIC, the topic the scores go to");
	c->dlq_topic = opt.dead_letter ? opt.dead_letter : ss->dead_letter;
	c->exactly_once = !opt.at_least_once && (ss->brokers ? ss->exactly_once : 1);
	if ((v = opt.group ? opt.group : ss->group))
		st->group = xstrdup(v);
	else if (spec)
		st->group = xasprintf("dlk-%s", spec->name);
	else
		st->group = NULL; /* the model's name, once it is loaded */
	c->group = st->group;
	if (!(c->instance = opt.instance ? opt.instance : ss->instance)) {
		/* the pod's name in a cluster, which a restarted container keeps */
		if (gethostname(st->host, sizeof(st->host) - 1) || !st->host[0])
			snprintf(st->host, sizeof(st->host), "dlk");
		c->instance = st->host;
	}
	v = opt.format >= 0 ? dlk_record_format_names[opt.format] : ss->format;
	c->record.format = v && dlk_record_format_parse(v) > 0 ? (enum dlk_record_format)dlk_record_format_parse(v)
	                                                       : DLK_RECORD_RAW;
	v = opt.datatype >= 0 ? datatype_names[opt.datatype] : ss->datatype;
	c->record.dtype = v ? dlk_dtype_parse(v, strlen(v)) : DLK_DT_FP32;
	if (!dlk_dtype_numeric(c->record.dtype))
		return dlk_errf(err, DLK_EXIT_USAGE, "datatype '%s': expected UINT8, INT8, UINT16, INT16, UINT32, INT32, "
		                "UINT64, INT64, FP16, FP32 or FP64", v);
	c->record.max_bytes = (size_t)cfg->max_request_bytes;
	c->record.lim.max_depth = cfg->max_json_depth;
	if (ss->max_records)
		c->max_records = ss->max_records;
	if (ss->commit_ms)
		c->commit_ms = ss->commit_ms;
	if (opt.max_records)
		c->max_records = opt.max_records;
	if (opt.commit_ms)
		c->commit_ms = opt.commit_ms;
	/* the project file's properties, then the flags' (the later setting wins) */
	n = (size_t)ss->n_properties;
	st->props = xcalloc(n + opt.kafka_set.n + 1, sizeof(*st->props));
	for (size_t i = 0; i < n; i++)
		st->props[i] = xasprintf("%s=%s", ss->properties[i].key, ss->properties[i].value);
	for (size_t i = 0; i < opt.kafka_set.n; i++)
		st->props[n + i] = xstrdup(opt.kafka_set.v[i]);
	c->props = (const char *const *)st->props;
	c->n_props = n + opt.kafka_set.n;
	c->stop = &st->stop_flag;
	c->event = stream_event;
	c->event_ctx = st->ctx;
	return 1;
}

/* The stream's thread: when it ends (an error, or after the stop flag), it wakes the main thread */
static void *stream_main(void *arg)
{
	struct stream_run *st = arg;
	char c = 0;

	st->rc = dlk_stream_run(&st->cfg, &st->served.sc, &st->m, &st->err);
	atomic_store(&stream_ended, 1);
	if (write(stop_pipe[1], &c, 1) < 0) {
		/* the flag is set; the main thread sees it within a second */
	}
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

/* The serving settings: the project file's section when there is a project (a worker always has
 * one; here, when -f names a file other than the default or a dlk.yaml exists), else the
 * defaults; --set serving.KEY=VALUE applies either way. */
static int serving_settings(struct dlk_ctx *ctx, struct dlk_serving *cfg, struct dlk_project **spec,
                            struct dlk_err *err)
{
	struct stat st;

	*spec = NULL;
	if (opt.mode == SERVE_WORKER || strcmp(ctx->file, "dlk.yaml") || stat(ctx->file, &st) == 0) {
		*spec = dlk_ctx_load_spec(ctx, err);
		if (!*spec)
			return -1;
		*cfg = (*spec)->serving; /* strings stay owned by the project */
		return 0;
	}
	return project_serving_load(ctx->sets.v, ctx->sets.n, cfg, err);
}

/* A model given as NAME=URL (what a Deployment of a model at a URL runs) is fetched first, into
 * /models in a pod (the volume the template gives it) or data.cache_dir here, and verified
 * against --sha256 before anything reads it. *out: the arguments with local paths (new strings). */
static int fetch_models(struct dlk_ctx *ctx, const struct dlk_project *spec, const struct dlk_args *args, char ***out,
                        struct dlk_err *err)
{
	char **v = xcalloc((size_t)args->n_pos + 1, sizeof(*v));
	int urls = 0;

	*out = v;
	for (int i = 0; i < args->n_pos; i++) {
		const char *a = args->pos[i], *eq = strchr(a, '='), *u = eq ? eq + 1 : a;
		if (strncmp(u, "https://", 8) && strncmp(u, "http://", 7)) {
			v[i] = xstrdup(a);
			continue;
		}
		if (!opt.sha256)
			return dlk_errf(err, DLK_EXIT_USAGE, "'%s': a model from a URL needs --sha256, the digest of the bundle file", u);
		if (++urls > 1)
			return dlk_errf(err, DLK_EXIT_USAGE, "--sha256 pins one model; '%s' is the second given as a URL", u);
		struct dlk_source src = { (char *)u, (char *)opt.sha256 };
		struct dlk_data_opts o;
		struct dlk_data d;
		struct dlk_fetched f = DLK_FETCHED_INIT;
		memset(&o, 0, sizeof(o));
		memset(&d, 0, sizeof(d));
		if (spec)
			d = spec->data;
		d.max_bytes = d.max_bytes ? d.max_bytes : 8ll << 30;
		if (opt.mode == SERVE_WORKER)
			o.cache_dir = "/models";
		else if (!d.cache_dir)
			o.cache_dir = ".dlk/cache";
		dlk_info(ctx, "fetching %s", u);
		if (dlk_fetch(&src, &d, &o, &f, err))
			return -1;
		v[i] = eq ? xasprintf("%.*s=%s", (int)(eq - a), a, f.path) : xstrdup(f.path);
		dlk_info(ctx, "fetched %s: sha256 %.12s matches its pin", u, f.sha256);
		dlk_fetched_release(&f);
	}
	return 0;
}

/* --local: every bundle is read and verified before "listening on" is said, so that a wrong
 * file (dlk.yaml for NAME.dlk) fails at once instead of after the announcement. A pod keeps
 * the order the probes want (live while it loads) and reads each bundle once. */
static int check_bundles(char *const *models, int n, struct dlk_err *err)
{
	for (int i = 0; i < n; i++) {
		struct dlk_bundle b = DLK_BUNDLE_INIT;
		char *name = NULL, *path = NULL;
		int rc = dlk_serve_model_arg(models[i], &name, &path, err);
		if (!rc && (rc = dlk_bundle_read(path, &b, err)) && !err->hint[0]) {
			const char *dot = strrchr(path, '.');
			if (dot && (!strcmp(dot, ".yaml") || !strcmp(dot, ".yml")))
				dlk_err_hint(err, "'%s' is a project file: serve the bundle its training wrote, "
				             "dlk serve --local NAME.dlk ('dlk train --local' writes it)", path);
			else
				dlk_err_hint(err, "a bundle is the NAME.dlk file that 'dlk train --local' writes");
		}
		dlk_bundle_release(&b);
		free(name);
		free(path);
		if (rc)
			return -1;
	}
	return 0;
}

/* A serving pod that fails says why where the kubelet looks (terminationMessagePath's default):
 * the pod's status then carries it, and `dlk serve --wait` names it with the pod. */
static void termination_message(const struct dlk_err *err)
{
	int fd = open("/dev/termination-log", O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return;
	char msg[DLK_ERR_MSG_MAX + 16];
	int n = snprintf(msg, sizeof(msg), "%s", err->msg);
	if (n > 0 && write(fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1) < 0) {
		/* nothing more to say: the log has the message too */
	}
	close(fd);
}

static int run_serve(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_serving cfg;
	struct dlk_project *spec = NULL;
	struct dlk_server *srv = NULL;
	char *registered = NULL; /* this server's file for dlk top (--local) */
	int rc = 0, have_cfg = 0, have_handlers = 0, log_fd = -1, streaming = 0;
	const char *log_path = opt.access_log;
	char **fetched = NULL;
	struct stream_run *st;
	struct dlk_chat_template chat;
	int have_chat = 0;

	memset(&cfg, 0, sizeof(cfg));
	if (opt.mode != SERVE_LOCAL && opt.mode != SERVE_WORKER)
		return dlk_serve_deploy(ctx, &opt, args);
	if (dlk_log_format_set(ctx, opt.log_format, &err))
		return dlk_report(ctx, &err);
	st = xcalloc(1, sizeof(*st));
	st->ctx = ctx;
	st->cfg = (struct dlk_stream_config)DLK_STREAM_CONFIG_INIT;
	st->err = (struct dlk_err)DLK_ERR_INIT;
	atomic_store(&stream_ended, 0);
	if (args->n_pos < 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, "no model to serve: name one or more bundles (MODEL.dlk or NAME=MODEL.dlk)");
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (serving_settings(ctx, &cfg, &spec, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	have_cfg = !spec;
	if ((streaming = stream_settings(&cfg, spec, st, &err)) < 0) {
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

	struct sigaction sa, old_term, old_int;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK)) {
		dlk_errf(&err, DLK_EXIT_FAIL, "cannot create a pipe: %s", strerror(errno));
		rc = dlk_report(ctx, &err);
		goto out;
	}
	stop_sig = 0;
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGINT, &sa, &old_int);
	have_handlers = 1;

	/* the CUDA backend when a GPU is here (gpus > 0 in a pod asks for one), else the CPU */
	struct dlk_err cerr = DLK_ERR_INIT;
	const struct dlk_backend *be = cfg.gpus > 0 ? dlk_backend_cuda(NULL, 0, &cerr) : NULL;
	if (cfg.gpus > 0 && !be)
		dlk_warn(ctx, "serving.gpus is %d but the CUDA backend is unavailable (%s): serving on the CPU", cfg.gpus, cerr.msg);
	if (fetch_models(ctx, spec, args, &fetched, &err) ||
	    (opt.mode == SERVE_LOCAL && check_bundles(fetched, args->n_pos, &err))) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	struct dlk_server_opts so = {
		.cfg = &cfg,
		.host = opt.host ? opt.host : opt.mode == SERVE_WORKER ? NULL : "127.0.0.1",
		.port = opt.port,
		.models = (const char *const *)fetched,
		.n_models = args->n_pos,
		.access_log_fd = log_fd,
		.be = be ? be : dlk_backend_cpu(),
		.version = DLK_VERSION,
		.event = show_event,
		.event_ctx = ctx,
		.metrics = streaming ? stream_metrics : NULL,
		.metrics_ctx = &st->m,
	};
	if (opt.chat_template) {
		struct dlk_buf tb = DLK_BUF_INIT;
		char why[256];
		if (dlk_buf_read_file(&tb, opt.chat_template, 1 << 20, why, sizeof(why))) {
			dlk_errf(&err, DLK_EXIT_USAGE, "--chat-template: %s", why);
		} else if (!dlk_chat_template_parse(tb.data ? tb.data : "", tb.len, opt.chat_template, &chat, &err)) {
			have_chat = 1;
			so.chat_template = &chat;
		}
		dlk_buf_release(&tb);
		if (!have_chat) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
	}
	check_blas_kernels(ctx, so.be);
	srv = dlk_server_new(&so, &err);
	if (!srv) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	dlk_info(ctx, "listening on http://%s:%d (live; ready once every model is loaded and warmed up)",
	         so.host ? so.host : "0.0.0.0", dlk_server_port(srv));
	if (dlk_server_start(srv, (const volatile int *)&stop_sig, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (opt.mode == SERVE_LOCAL) {
		/* for dlk top: this server and its models, until it ends */
		const char **names = xcalloc((size_t)srv->n_models + 1, sizeof(char *));
		struct dlk_err rerr = DLK_ERR_INIT;
		for (int i = 0; i < srv->n_models; i++)
			names[i] = srv->models[i].name;
		if (dlk_serve_register(so.host, dlk_server_port(srv), names, srv->n_models, &registered, &rerr))
			dlk_warn(ctx, "dlk top will not list this server: %s", rerr.msg);
		free(names);
	}
	if (streaming) {
		struct dlk_serve_model *m = dlk_server_model(srv, NULL);
		dlk_stream_served_init(&st->served, m, cfg.max_batch);
		st->served_ready = 1;
		st->cfg.record.sig = &m->sig;
		if (!st->group)
			st->cfg.group = st->group = xasprintf("dlk-%s", m->name);
		if (pthread_create(&st->tid, NULL, stream_main, st)) {
			dlk_errf(&err, DLK_EXIT_FAIL, "cannot start the stream's thread");
			rc = dlk_report(ctx, &err);
			goto out;
		}
		st->started = 1;
	}
	wait_for_stop();
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
	         stop_sig == SIGTERM ? "SIGTERM" : stop_sig ? "interrupted" : "stream ended", cfg.drain_timeout_s);
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
	if (rc && rc != DLK_EXIT_INTERRUPTED && err.code && opt.mode == SERVE_WORKER)
		termination_message(&err);
	dlk_serve_unregister(registered);
	dlk_server_free(srv);
	if (have_chat)
		dlk_chat_template_release(&chat);
	if (st->served_ready)
		dlk_stream_served_release(&st->served);
	if (st->metrics_ready)
		dlk_stream_metrics_release(&st->m);
	stream_release(st);
	free(st);
	if (have_handlers) {
		sigaction(SIGTERM, &old_term, NULL);
		sigaction(SIGINT, &old_int, NULL);
	}
	for (int i = 0; i < 2; i++)
		if (stop_pipe[i] >= 0)
			close(stop_pipe[i]), stop_pipe[i] = -1;
	if (log_fd >= 0 && log_fd != STDOUT_FILENO)
		close(log_fd);
	if (have_cfg)
		project_serving_release(&cfg);
	for (int i = 0; fetched && i < args->n_pos; i++)
		free(fetched[i]);
	free(fetched);
	project_free(spec);
	return rc;
}

#define DEPLOYING (DLK_MODE(SERVE_DEPLOY) | DLK_MODE(SERVE_DRY_RUN))
static const struct dlk_option serve_options[] = {
	OPT_MODE("dry-run", &opt.mode, SERVE_DRY_RUN, "print the Kubernetes objects a deploy would apply (after the gate), and stop"),
	OPT_MODE("promote", &opt.mode, SERVE_PROMOTE, "make the canary the served model, then remove the canary"),
	OPT_MODE("rollback", &opt.mode, SERVE_ROLLBACK, "remove the canary; the served model takes all the traffic again"),
	OPT_MODE("local", &opt.mode, SERVE_LOCAL, "serve the bundles on this machine", .complete = COMPLETE_BUNDLE),
	OPT_MODE("worker", &opt.mode, SERVE_WORKER, "be a serving pod (what the rendered Deployment runs)",
	         .complete = COMPLETE_BUNDLE),
	/* the hint of every row that goes with --local or --worker */
	OPT_STRING(0, "host", &opt.host, "ADDR", NULL, "the address to listen on",
	           .def_doc = "127.0.0.1 with --local, every address with --worker",
	           .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER),
	           .hint = "serve bundles on this machine: dlk serve --local NAME.dlk; without --local, "
	                   "'dlk serve NAME' deploys the model of the training job NAME"),
	OPT_INT(0, "port", &opt.port, "N", -1, "the port to listen on (0: any free port, shown when listening)",
	        .min = 0, .max = 65535, .def_doc = "serving.port, 8080", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "access-log", &opt.access_log, "FILE", NULL, "append one line per request to FILE ('-': standard output)",
	           .complete = COMPLETE_FILE, .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "chat-template", &opt.chat_template, "FILE", NULL,
	           "the chat template of language models whose bundle has none (JSON: system, user, assistant, generation)",
	           .complete = COMPLETE_FILE, .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "stream", &opt.stream, "URL", NULL,
	           "also score the records of a Kafka topic: kafka://HOST:PORT[,HOST:PORT]/TOPIC",
	           .def_doc = "serving.stream", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "to", &opt.to, "TOPIC", NULL, "with --stream: the topic the output records go to",
	           .def_doc = "serving.stream.output", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "dead-letter", &opt.dead_letter, "TOPIC", NULL, "with --stream: where records that cannot be decoded go",
	           .def_doc = "INPUT.dlq", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "group", &opt.group, "NAME", NULL, "with --stream: the consumer group the replicas share",
	           .def_doc = "dlk-NAME", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "instance", &opt.instance, "NAME", NULL, "with --stream: this replica's name, kept across its restarts",
	           .def_doc = "the host name", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_BOOL(0, "at-least-once", &opt.at_least_once,
	         "with --stream: no transactions (brokers without them); a crash may score records twice",
	         .flags = OPT_NONEG, .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_ENUM(0, "log-format", &opt.log_format, "FORMAT", dlk_log_format_names, -1,
	         "write the log as text, or as one JSON object per line for log collectors",
	         .def_doc = "$DLK_LOG_FORMAT (logging.format in a pod), text",
	         .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_ENUM(0, "format", &opt.format, "FORMAT", dlk_record_format_names, -1,
	         "with --stream: records without a content-type header are raw tensor bytes, V2 JSON or (a text model) one text",
	         .def_doc = "serving.stream.format, raw", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_ENUM(0, "datatype", &opt.datatype, "TYPE", datatype_names, -1,
	         "with --stream: the datatype of raw records without a dlk-datatype header",
	         .def_doc = "serving.stream.datatype, FP32", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_INT(0, "max-records", &opt.max_records, "N", 0, "with --stream: most records in one transaction",
	        .min = 1, .max = 1 << 20, .def_doc = "serving.stream.max_records, 2000",
	        .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_INT(0, "commit-ms", &opt.commit_ms, "MS", 0, "with --stream: longest a transaction gathers records before it commits",
	        .min = 1, .max = 600000, .def_doc = "serving.stream.commit_ms, 100",
	        .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_LIST(0, "kafka-set", &opt.kafka_set, "NAME=VALUE", "with --stream: a librdkafka property for both clients (repeatable)",
	         .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "model", &opt.model, "URL", NULL,
	           "deploy the bundle at this https URL (pinned by --sha256) rather than training job NAME's",
	           .modes = DEPLOYING),
	OPT_STRING(0, "sha256", &opt.sha256, "HEX", NULL, "the sha256 of the bundle file a URL names; the pods verify it"),
	OPT_STRING(0, "min-accuracy", &opt.min_accuracy, "X", NULL, "refuse a model whose test accuracy is below X (0 to 1)",
	           .def_doc = "serving.min_accuracy", .modes = DEPLOYING),
	OPT_BOOL(0, "force", &opt.force, "deploy a model the promotion gate refuses", .flags = OPT_NONEG, .modes = DEPLOYING),
	OPT_STRING(0, "report", &opt.report, "FILE", NULL,
	           "write the model's report page (see dlk report), the gate's decision first, to FILE",
	           .complete = COMPLETE_FILE, .modes = DEPLOYING),
	OPT_INT(0, "canary", &opt.canary, "PERCENT", 0,
	        "deploy beside the served model and give it about PERCENT of the traffic (a share of the replicas, or an HTTPRoute weight with serving.gateway)",
	        .min = 1, .max = 99, .flags = OPT_HIDE_DEFAULT, .modes = DEPLOYING),
	OPT_BOOL(0, "wait", &opt.wait, "wait for the rollout; fail naming the pod and the reason when it fails",
	         .modes = DLK_MODE(SERVE_DEPLOY) | DLK_MODE(SERVE_PROMOTE)),
	OPT_DURATION(0, "timeout", &opt.timeout_s, "DURATION", "give up waiting after this long, e.g. 90s, 5m (implies --wait)",
	             .modes = DLK_MODE(SERVE_DEPLOY) | DLK_MODE(SERVE_PROMOTE)),
	OPT_STRING(0, "templates", &opt.templates, "DIR", NULL, "templates overriding the built-in ones",
	           .def_doc = "templates/ next to the project file, when there is one", .complete = COMPLETE_DIR,
	           .modes = DEPLOYING),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_serve = {
	.usage = "[NAME] | --local MODEL.dlk|NAME=MODEL.dlk...",
	.description = "Deploy training job NAME's model to the cluster (NAME defaults to the project's name):\n"
	               "its metrics and confusion matrix pass the promotion gate (serving.min_accuracy,\n"
	               "serving.min_class_recall), then a Deployment, Service, PodDisruptionBudget and,\n"
	               "with serving.max_replicas, a HorizontalPodAutoscaler are applied; --canary runs it\n"
	               "beside the served model until --promote or --rollback.\n"
	               "Or serve model bundles over HTTP on this machine (--local) or as a serving pod\n"
	               "(--worker): the KServe V2 inference protocol with binary tensors and classification,\n"
	               "TensorFlow Serving's REST API and Prometheus /metrics, with dynamic batching. Settings\n"
	               "come from the project file's serving section (when there is one) and --set\n"
	               "serving.KEY=VALUE. SIGTERM drains: readiness fails, in-flight requests finish, then\n"
	               "dlk exits 0. With --stream, the model also scores a Kafka topic into another, exactly once.",
	.options = serve_options,
	.default_mode = "deploying",
	.min_pos = 0,
	.max_pos = -1,
	.complete_pos = COMPLETE_JOB, /* the modes that take bundles say so in their rows */
	.run = run_serve,
	.examples = "  $ dlk serve fashion --wait\n"
	            "  $ dlk serve fashion --dry-run\n"
	            "  $ dlk serve fashion --canary 10 --wait\n"
	            "  $ dlk serve fashion --promote\n"
	            "  $ dlk serve fashion --model https://models.example.com/fashion.dlk --sha256 HEX\n"
	            "  $ dlk serve --local fashion.dlk\n"
	            "  $ dlk serve --local --port 9000 mlp=mlp.dlk cnn=cnn.dlk\n"
	            "  $ dlk serve --local fashion.dlk --set serving.max_batch=32 --set serving.max_delay_us=500\n"
	            "  $ dlk serve --local fashion.dlk --access-log -\n"
	            "  $ dlk serve --local fashion.dlk --stream kafka://localhost:9092/images --to scores\n",
};
