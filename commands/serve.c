/* dlk serve: the inference server. --local serves bundles on this machine; --worker is what a
 * serving pod runs. The server itself is lib/serve; this file turns options and the project
 * file's serving section into its settings, shows its events, and maps SIGTERM to a drain. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/nn/backend.h"
#include "lib/nn/gpu.h"
#include "lib/project/project.h"
#include "lib/serve/server.h"
#include "lib/util/mem.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
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

/* waits until a stop signal has arrived */
static void wait_for_stop(void)
{
	struct pollfd pfd = { stop_pipe[0], POLLIN, 0 };
	while (!stop_sig)
		if (poll(&pfd, 1, 1000) < 0 && errno != EINTR)
			break;
}

/* OpenBLAS picks its kernels from the CPU model, and falls back to its oldest x86-64 ones
 * (Prescott) on models it does not know, as on some virtual machines: the forward pass then runs
 * at a fraction of the speed the CPU's vector units allow. Only the user can pick them, before
 * the process starts. */
static void check_blas_kernels(const struct dlk_ctx *ctx, const struct dlk_backend *be)
{
#if defined(__x86_64__) && defined(__GNUC__)
	const char *core = openblas_get_corename();
	const char *want = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
	if (be == dlk_backend_cpu() && want && core && !strcasecmp(core, "Prescott"))
		dlk_warn(ctx, "OpenBLAS chose its generic Prescott kernels on a CPU with %s; start dlk with "
		         "OPENBLAS_CORETYPE=%s for its faster kernels",
		         strcmp(want, "SkylakeX") ? "AVX2" : "AVX-512", want);
#else
	(void)ctx;
	(void)be;
#endif
}

static void show_event(void *ctx, const char *msg)
{
	dlk_info(ctx, "%s", msg);
}

enum serve_mode { SERVE_DEPLOY, SERVE_LOCAL, SERVE_WORKER };

static struct {
	int mode;                /* an enum serve_mode */
	const char *host;
	int port;                /* -1: serving.port */
	const char *access_log;
} opt;

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

static int run_serve(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_serving cfg;
	struct dlk_project *spec = NULL;
	struct dlk_server *srv = NULL;
	int rc = 0, have_cfg = 0, have_handlers = 0, log_fd = -1;
	const char *log_path = opt.access_log;

	memset(&cfg, 0, sizeof(cfg));
	if (opt.mode == SERVE_DEPLOY) {
		dlk_errf(&err, DLK_EXIT_USAGE, "deploying a model to the cluster is not available yet");
		dlk_err_hint(&err, "serve bundles on this machine: dlk serve --local MODEL.dlk");
		return dlk_report(ctx, &err);
	}
	if (args->n_pos < 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, "no model to serve: name one or more bundles (MODEL.dlk or NAME=MODEL.dlk)");
		return dlk_report(ctx, &err);
	}
	if (serving_settings(ctx, &cfg, &spec, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	have_cfg = !spec;
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
	struct dlk_server_opts so = {
		.cfg = &cfg,
		.host = opt.host ? opt.host : opt.mode == SERVE_WORKER ? NULL : "127.0.0.1",
		.port = opt.port,
		.models = args->pos,
		.n_models = args->n_pos,
		.access_log_fd = log_fd,
		.be = be ? be : dlk_backend_cpu(),
		.version = DLK_VERSION,
		.event = show_event,
		.event_ctx = ctx,
	};
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
	wait_for_stop();
	dlk_info(ctx, "%s: draining (readiness fails now; in-flight requests get up to %d s)",
	         stop_sig == SIGTERM ? "SIGTERM" : "interrupted", cfg.drain_timeout_s);
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
	dlk_server_free(srv);
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
	project_free(spec);
	return rc;
}

static const struct dlk_option serve_options[] = {
	OPT_MODE("local", &opt.mode, SERVE_LOCAL, "serve the bundles on this machine"),
	OPT_MODE("worker", &opt.mode, SERVE_WORKER, "be a serving pod (what the rendered Deployment runs)"),
	OPT_STRING(0, "host", &opt.host, "ADDR", NULL, "the address to listen on",
	           .def_doc = "127.0.0.1 with --local, every address with --worker",
	           .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_INT(0, "port", &opt.port, "N", -1, "the port to listen on (0: any free port, shown when listening)",
	        .min = 0, .max = 65535, .def_doc = "serving.port, 8080", .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_STRING(0, "access-log", &opt.access_log, "FILE", NULL, "append one line per request to FILE ('-': standard output)",
	           .complete = COMPLETE_FILE, .modes = DLK_MODE(SERVE_LOCAL) | DLK_MODE(SERVE_WORKER)),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_serve = {
	.usage = "MODEL.dlk|NAME=MODEL.dlk...",
	.description = "Serve model bundles over HTTP on this machine (--local) or as a serving pod (--worker):\n"
	               "the KServe V2 inference protocol with binary tensors and classification, TensorFlow\n"
	               "Serving's REST API and Prometheus /metrics, with dynamic batching. Settings come from\n"
	               "the project file's serving section (when there is one) and --set serving.KEY=VALUE.\n"
	               "SIGTERM drains: readiness fails, in-flight requests finish, then dlk exits 0.",
	.options = serve_options,
	.default_mode = "deploying",
	.min_pos = 0,
	.max_pos = -1,
	.complete_pos = COMPLETE_FILE,
	.run = run_serve,
	.examples = "  $ dlk serve --local fashion.dlk\n"
	            "  $ dlk serve --local --port 9000 mlp=mlp.dlk cnn=cnn.dlk\n"
	            "  $ dlk serve --local fashion.dlk --set serving.max_batch=32 --set serving.max_delay_us=500\n"
	            "  $ dlk serve --local fashion.dlk --access-log -\n",
};
