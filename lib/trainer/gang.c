/* The supervisor of a gang of worker processes: fork, watch, restart, record. */
#include "lib/trainer/gang.h"
#include "lib/trainer/run.h"
#include "lib/trainer/trainer.h"
#include "lib/comm/rendezvous.h"
#include "lib/jobs/failure.h"
#include "lib/jobs/logline.h"
#include "lib/jobs/podenv.h"
#include "lib/program/protocol.h"
#include "lib/util/clock.h"
#include "lib/util/err.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/project/project.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 65536
#define STOP_GRACE_SEC 30.0   /* after a stop request: the workers write a checkpoint */
#define KILL_GRACE_SEC 5.0    /* after a failure: the others are only asked to go */
/* a rank that exited while processes it started still hold its output (a multiprocessing
 * server, a loader's workers): its process group is asked to go after LEFT_TERM_SEC, killed
 * after LEFT_KILL_SEC, and the output given up after LEFT_CLOSE_SEC (a process that left the
 * group), so that the gang ends with its ranks */
#define LEFT_TERM_SEC 1.0
#define LEFT_KILL_SEC 3.0
#define LEFT_CLOSE_SEC 5.0

static volatile sig_atomic_t gang_sig, gang_sig_count;

static void on_gang_signal(int sig)
{
	if (!gang_sig)
		gang_sig = sig;
	gang_sig_count++;
}

struct worker {
	pid_t pid;
	int fd;             /* read end of its stderr; -1 at EOF */
	int status, exited;
	int seq;            /* order in which the exits were seen */
	int ours;           /* the last signal the parent sent it, 0: none */
	double exited_at;   /* when its exit was seen (dlk_now) */
	int left_sent;      /* what was sent to its group after its exit: 0, SIGTERM, SIGKILL */
	char *buf;          /* pending bytes of an unfinished line */
	size_t len;
	int after_cr;       /* the pending bytes follow a carriage return: a progress redraw */
	char last_error[1024]; /* the last "error: " line it printed, without the prefix */
};

struct gang {
	const struct dlk_gang_hooks *hooks;
	struct dlk_gang_output out;
	const char *job_name; /* a local gang's DLK_JOB_NAME */
	struct worker *w;
	int n;
	/* In a pod (dlk_train_pod_gang): the workers are ranks base_rank .. base_rank + n - 1 of a
	 * gang of `world` over several pods, and find rank 0 where the pod's environment says. */
	int in_pod, base_rank, world;
	const char *master_addr;
	int master_port;
	long *peak_kb;      /* each rank's peak resident memory, over every generation (KiB) */
	double *cpu_s;      /* each rank's CPU time (user + system), summed over every generation */
	struct sigaction old_int, old_term;
};

/* The workers' line buffers, and SIGINT/SIGTERM heard by the parent, which asks every worker. */
static void gang_open(struct gang *g)
{
	struct sigaction sa = { 0 };

	g->w = xcalloc((size_t)g->n, sizeof(*g->w));
	for (int r = 0; r < g->n; r++)
		g->w[r].buf = xmalloc(LINE_MAX_BYTES + 1);
	gang_sig = 0;
	gang_sig_count = 0;
	sa.sa_handler = on_gang_signal;
	sigaction(SIGINT, &sa, &g->old_int);
	sigaction(SIGTERM, &sa, &g->old_term);
}

static void gang_close(struct gang *g)
{
	sigaction(SIGINT, &g->old_int, NULL);
	sigaction(SIGTERM, &g->old_term, NULL);
	for (int r = 0; r < g->n; r++)
		free(g->w[r].buf);
	free(g->w);
	g->w = NULL;
}

/* Removes the "erase line" escapes a progress draw contains. */
static size_t strip_erase(char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\033' && i + 2 < n && s[i + 1] == '[' && s[i + 2] == 'K') {
			i += 2;
			continue;
		}
		s[o++] = s[i];
	}
	return o;
}

/* The last "error: " line a worker wrote is why it failed, for the run's record: a line of
 * its own, or the text of one of its --log-format json objects. */
static void note_error(struct worker *w, const struct dlk_gang_output *out, const char *s, size_t n)
{
	char text[sizeof(w->last_error) + 8];

	if (out->json && n && s[0] == '{' && dlk_logline_text(s, n, text, sizeof(text))) {
		if (!strncmp(text, "error: ", 7))
			snprintf(w->last_error, sizeof(w->last_error), "%.1000s", text + 7);
	} else if (n > 7 && !memcmp(s, "error: ", 7)) {
		snprintf(w->last_error, sizeof(w->last_error), "%.*s", (int)(n - 7), s + 7);
	}
}

static void emit_line(struct gang *g, int rank, char *s, size_t n)
{
	n = strip_erase(s, n);
	note_error(&g->w[rank], &g->out, s, n);
	/* a user's program says why it failed its own way (a traceback ends with the exception):
	 * its last line of output, its progress reports aside */
	if (g->hooks->restarts && n && strncmp(s, PROGRAM_PROTOCOL_PREFIX, strlen(PROGRAM_PROTOCOL_PREFIX)))
		snprintf(g->w[rank].last_error, sizeof(g->w[rank].last_error), "%.*s", (int)(n < 1000 ? n : 1000), s);
	g->hooks->line(g->hooks->ud, rank, g->base_rank + rank, s, n);
}

static void emit_progress(struct gang *g, int rank, char *s, size_t n)
{
	n = strip_erase(s, n);
	if (g->hooks->progress)
		g->hooks->progress(g->hooks->ud, rank, g->base_rank + rank, s, n);
}

/* Splits what a worker wrote into lines ('\n') and progress redraws ('\r'). */
static void drain(struct gang *g, int rank, int eof)
{
	struct worker *w = &g->w[rank];
	size_t start = 0;

	for (size_t i = 0; i < w->len; i++) {
		if (w->buf[i] != '\n' && w->buf[i] != '\r')
			continue;
		if (w->buf[i] == '\n')
			emit_line(g, rank, w->buf + start, i - start);
		else if (w->after_cr)
			emit_progress(g, rank, w->buf + start, i - start);
		else if (i > start)
			emit_line(g, rank, w->buf + start, i - start);
		w->after_cr = w->buf[i] == '\r';
		start = i + 1;
	}
	memmove(w->buf, w->buf + start, w->len - start);
	w->len -= start;
	if (eof || w->len >= LINE_MAX_BYTES) {
		if (w->len)
			emit_line(g, rank, w->buf, w->len);
		w->len = 0;
		w->after_cr = 0;
	} else if (w->len && w->after_cr && rank == 0) {
		/* show the newest redraw now; it is shown again when it completes */
		char tmp[512];
		size_t n = w->len < sizeof(tmp) ? w->len : sizeof(tmp);
		memcpy(tmp, w->buf, n);
		emit_progress(g, rank, tmp, n);
	}
}

static void read_worker(struct gang *g, int rank)
{
	struct worker *w = &g->w[rank];
	ssize_t k = read(w->fd, w->buf + w->len, LINE_MAX_BYTES + 1 - w->len);

	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k <= 0) {
		close(w->fd);
		w->fd = -1;
		drain(g, rank, 1);
		return;
	}
	w->len += (size_t)k;
	drain(g, rank, 0);
}

static int listen_loopback(int *port, struct dlk_err *err)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot open a socket for the workers: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, DLK_GANG_MAX_WORKERS + 8) ||
	    getsockname(fd, (struct sockaddr *)&a, &al)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot listen on 127.0.0.1 for the workers: %s", strerror(errno));
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static void setenv_int(const char *name, long v)
{
	char s[32];
	snprintf(s, sizeof(s), "%ld", v);
	setenv(name, s, 1);
}

/* In the child: become rank `rank` and run the worker path. Never returns. */
static void child(struct gang *g, int rank, int wfd, int lfd, int port, unsigned gen, const char *run_id, int threads,
                  pid_t parent)
{
	struct sigaction sa = { 0 };
	int rc;

	/* a worker outlives no supervisor: it shares the project's run lock (lib/runs/lock.h), and
	 * a worker left behind would keep the next invocation from continuing the run. A parent
	 * gone before the prctl took effect sends no signal: asked once more */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(DLK_EXIT_RESTARTABLE);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* its own process group: a Ctrl-C reaches the parent, which asks every worker once */
	setpgid(0, 0);
	for (int r = 0; r < rank; r++)
		if (g->w[r].fd >= 0)
			close(g->w[r].fd);
	dup2(wfd, STDERR_FILENO);
	close(wfd);
	if (rank != 0) {
		int nul = open("/dev/null", O_WRONLY);
		if (nul >= 0) {
			dup2(nul, STDOUT_FILENO);
			close(nul);
		}
		if (lfd >= 0)
			close(lfd);
	} else if (lfd >= 0) {
		setenv_int(DLK_ENV_LISTEN_FD, lfd);
	}
	/* the local rank picks the worker's GPU */
	setenv_int(DLK_ENV_LOCAL_RANK, rank);
	setenv_int(DLK_ENV_LOCAL_WORLD_SIZE, g->n);
	setenv_int(DLK_ENV_THREADS, threads);
	unsetenv(DLK_ENV_COMPLETION_INDEX); /* RANK says it, and an Indexed Job's index is the pod's */
	if (g->in_pod) {
		/* the pod's run id, generation and job name stay as the Job set them */
		setenv_int(DLK_ENV_RANK, g->base_rank + rank);
		setenv_int(DLK_ENV_WORLD_SIZE, g->world);
		setenv(DLK_ENV_MASTER_ADDR, g->master_addr, 1);
		setenv_int(DLK_ENV_MASTER_PORT, g->master_port);
	} else {
		setenv_int(DLK_ENV_RANK, rank);
		setenv_int(DLK_ENV_WORLD_SIZE, g->n);
		setenv(DLK_ENV_MASTER_ADDR, "127.0.0.1", 1);
		setenv_int(DLK_ENV_MASTER_PORT, port);
		setenv_int(DLK_ENV_GENERATION, (long)gen);
		setenv(DLK_ENV_RUN_ID, run_id, 1);
		setenv(DLK_ENV_JOB_NAME, g->job_name, 1);
		unsetenv(DLK_ENV_SERVICE_HOST); /* a local gang publishes no progress on any Job */
	}
	rc = g->hooks->worker(g->hooks->ud, rank);
	fflush(stdout);
	fflush(stderr);
	_exit(rc);
}

static void describe(char *buf, size_t n, int status)
{
	if (WIFSIGNALED(status))
		snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, n, "exited with code %d", WEXITSTATUS(status));
}

static void signal_all(struct gang *g, int sig)
{
	for (int r = 0; r < g->n; r++)
		if (g->w[r].pid > 0 && !g->w[r].exited) {
			/* the rank's process group (it leads one, below): what it started goes too */
			if (kill(-g->w[r].pid, sig) && errno == ESRCH)
				kill(g->w[r].pid, sig);
			g->w[r].ours = sig;
		} else if (g->w[r].pid > 0 && g->w[r].fd >= 0) {
			kill(-g->w[r].pid, sig); /* exited, but what it started holds its output */
		}
}

/* A rank that exited while its output is still open: what it started is left behind. Its
 * group is asked to go, then killed, then its output is given up; says so once. */
static void end_leftovers(struct gang *g, int rank)
{
	struct worker *w = &g->w[rank];
	double since = dlk_now() - w->exited_at;

	if (since >= LEFT_CLOSE_SEC) {
		fprintf(stderr, "warning: rank %d exited %.0f s ago, but a process it started still holds its output "
		                "(it left the rank's process group): no longer read\n", rank, since);
		close(w->fd);
		w->fd = -1;
		drain(g, rank, 1);
	} else if (since >= LEFT_KILL_SEC && w->left_sent != SIGKILL) {
		kill(-w->pid, SIGKILL);
		w->left_sent = SIGKILL;
	} else if (since >= LEFT_TERM_SEC && !w->left_sent) {
		kill(-w->pid, SIGTERM);
		w->left_sent = SIGTERM;
	}
}

/* The worker whose failure explains the others (lib/jobs/failure.h), -1 when every worker
 * succeeded. */
static int root_cause(const struct gang *g)
{
	struct dlk_rank_end ends[DLK_GANG_MAX_WORKERS] = { { 0 } };

	for (int r = 0; r < g->n; r++) {
		const struct worker *w = &g->w[r];
		if (!w->exited)
			continue;
		ends[r].signal = WIFSIGNALED(w->status) ? WTERMSIG(w->status) : 0;
		ends[r].exit_code = ends[r].signal ? 128 + ends[r].signal : WEXITSTATUS(w->status);
		ends[r].signal_ours = ends[r].signal && ends[r].signal == w->ours;
		ends[r].seq = w->seq;
	}
	return dlk_failure_cause(ends, g->n);
}

/* Runs one generation to its end. Returns the rank that failed first (its status in
 * g->w[rank].status), -1 when every worker succeeded, -2 when stopped by a signal. */
static int run_generation(struct gang *g, unsigned gen, const char *run_id, int threads, struct dlk_err *err)
{
	/* in a pod, global rank 0 listens on MASTER_PORT itself, as a one-rank pod does */
	int port = 0, lfd = g->in_pod ? -1 : listen_loopback(&port, err), failed = -1, stopping = 0, alive, seq = 0;
	double deadline = 0;
	struct pollfd pfd[DLK_GANG_MAX_WORKERS];

	if (lfd < 0 && !g->in_pod)
		return -3;
	for (int r = 0; r < g->n; r++) {
		int p[2];
		g->w[r] = (struct worker){ .fd = -1, .buf = g->w[r].buf };
		if (pipe2(p, O_CLOEXEC)) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot create a pipe for worker %d: %s", r, strerror(errno));
			signal_all(g, SIGKILL);
			failed = -3;
			break;
		}
		fflush(NULL);
		pid_t parent = getpid(), pid = fork();
		if (pid < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot start worker %d: %s", r, strerror(errno));
			close(p[0]);
			close(p[1]);
			signal_all(g, SIGKILL);
			failed = -3;
			break;
		}
		if (pid == 0) {
			close(p[0]);
			child(g, r, p[1], lfd, port, gen, run_id, threads, parent);
		}
		close(p[1]);
		setpgid(pid, pid); /* as the child does: signalled as a group from now on */
		g->w[r].pid = pid;
		g->w[r].fd = p[0];
	}
	if (lfd >= 0)
		close(lfd);

	for (;;) {
		int np = 0, idx[DLK_GANG_MAX_WORKERS];
		alive = 0;
		int new_failure = 0;
		for (int r = 0; r < g->n; r++) {
			struct worker *w = &g->w[r];
			int st;
			struct rusage ru;
			if (w->pid > 0 && !w->exited && wait4(w->pid, &st, WNOHANG, &ru) == w->pid) {
				if (g->peak_kb && ru.ru_maxrss > g->peak_kb[r])
					g->peak_kb[r] = ru.ru_maxrss;
				if (g->cpu_s)
					g->cpu_s[r] += (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
					               (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
				w->exited = 1;
				w->exited_at = dlk_now();
				w->status = st;
				w->seq = seq++;
				if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
					new_failure = 1;
			}
		}
		if (new_failure && !stopping && failed == -1) {
			/* a failure ends the generation: the others are asked to go (after every exit
			 * already there was reaped, so that root_cause() knows who was signalled) */
			failed = 0;
			stopping = 1;
			signal_all(g, SIGTERM);
			deadline = dlk_now() + KILL_GRACE_SEC;
		}
		for (int r = 0; r < g->n; r++) {
			struct worker *w = &g->w[r];
			if (w->pid > 0 && !w->exited)
				alive++;
			else if (w->pid > 0 && w->fd >= 0)
				end_leftovers(g, r);
			if (w->fd >= 0) {
				pfd[np].fd = w->fd;
				pfd[np].events = POLLIN;
				idx[np++] = r;
			}
		}
		if (g->hooks->tick)
			g->hooks->tick(g->hooks->ud, 0);
		if (!alive && !np)
			break;
		if (gang_sig && !stopping && failed != -3) {
			stopping = 2;
			signal_all(g, gang_sig == SIGINT ? SIGINT : SIGTERM);
			deadline = dlk_now() + STOP_GRACE_SEC;
		}
		if ((stopping && deadline && dlk_now() > deadline) || gang_sig_count > 1 || failed == -3) {
			signal_all(g, SIGKILL);
			deadline = 0;
		}
		if (np == 0) {
			struct timespec ts = { 0, 20 * 1000000L };
			nanosleep(&ts, NULL);
			continue;
		}
		if (poll(pfd, (nfds_t)np, 50) > 0)
			for (int i = 0; i < np; i++)
				if (pfd[i].revents)
					read_worker(g, idx[i]);
	}
	if (g->hooks->tick)
		g->hooks->tick(g->hooks->ud, 1);
	if (g->hooks->ended)
		g->hooks->ended(g->hooks->ud);
	if (failed == -3)
		return -3;
	if (stopping == 2)
		return -2;
	if (failed >= 0)
		failed = root_cause(g);
	return failed;
}

/* The record of a run that ended: what rank 0's bundle says, each rank's peak memory. */
static void record_end(struct dlk_train_run *run, const struct gang *g, const struct dlk_trainer_opts *opts,
                       const struct dlk_project *spec, enum dlk_run_outcome o, int rank, int code, const char *message)
{
	cJSON *peaks = cJSON_CreateArray();

	for (int r = 0; r < g->n; r++)
		cJSON_AddItemToArray(peaks, cJSON_CreateNumber((double)g->peak_kb[r] * 1024.0));
	dlk_run_set_item(run->rec, "peak_memory_bytes", peaks);
	dlk_train_run_set_cpu(run, g->cpu_s, g->n);
	if (o == DLK_RUN_SUCCEEDED && g->hooks->run_doc) {
		/* a user's program: what it reported, no bundle of dlk's */
		cJSON *doc = g->hooks->run_doc(g->hooks->ud);
		if (doc)
			dlk_train_run_set_result(run, doc, NULL);
		cJSON_Delete(doc);
		dlk_train_run_finish(run, o, -1, 0, NULL);
	} else if (o == DLK_RUN_SUCCEEDED) {
		/* rank 0 wrote the run's own bundle, and NAME.dlk is it for now: the record names the one
		 * that stays */
		char *bundle = dlk_trainer_run_bundle_path(spec, opts->spec_file, 0, run->id);
		if (!bundle)
			bundle = dlk_trainer_bundle_path(opts->bundle, spec, opts->spec_file, 0);
		dlk_train_run_succeeded(run, bundle);
		free(bundle);
	} else {
		dlk_train_run_finish(run, o, rank, code, message);
	}
}

/* compute threads per worker: training.threads, else the cores shared out */
static int worker_threads(const struct dlk_project *spec, int workers)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	return spec->training.threads ? spec->training.threads : (int)(cores / workers > 0 ? cores / workers : 1);
}

int dlk_trainer_gang(const struct dlk_trainer_opts *opts, const struct dlk_project *spec, struct dlk_gang_output out,
                     const struct dlk_gang_hooks *hooks, const struct dlk_trainer_sink *sink, struct dlk_err *err)
{
	int workers = opts->workers, max_restarts = opts->max_restarts;
	struct gang g = { .hooks = hooks, .out = out, .job_name = spec->name, .n = workers };
	struct dlk_train_run run = DLK_TRAIN_RUN_INIT;
	char what[128], digest[65];
	int threads = worker_threads(spec, workers);
	int rc = 0;

	/* the run: a new one, or the interrupted one this continues (its id names its checkpoints,
	 * and the rendezvous of its workers) */
	project_digest(spec, digest);
	if (dlk_train_run_open_local(&run, sink, opts, spec, digest, workers, err)) {
		dlk_train_run_release(&run);
		return err->code ? err->code : DLK_EXIT_FAIL;
	}
	gang_open(&g);
	g.peak_kb = xcalloc((size_t)workers, sizeof(*g.peak_kb));
	g.cpu_s = xcalloc((size_t)workers, sizeof(*g.cpu_s));

	for (int gen = 0;; gen++) {
		int f = run_generation(&g, (unsigned)gen, run.id, threads, err);
		if (f == -3) {
			rc = err->code ? err->code : DLK_EXIT_FAIL;
			record_end(&run, &g, opts, spec, DLK_RUN_FAILED, -1, rc, err->msg);
			break;
		}
		if (f == -1) {
			rc = 0;
			record_end(&run, &g, opts, spec, DLK_RUN_SUCCEEDED, -1, 0, NULL);
			break;
		}
		int st0 = f >= 0 ? g.w[f].status : 0;
		if (f >= 0 && gang_sig &&
		    (hooks->restarts ? hooks->restarts(hooks->ud, st0) : WIFSIGNALED(st0) || WEXITSTATUS(st0) == DLK_EXIT_RESTARTABLE))
			f = -2; /* a stop asked while a failed generation ended: stopped, not restarted */
		if (f == -2) {
			/* rank 0 said what it saved */
			rc = gang_sig == SIGINT ? DLK_EXIT_INTERRUPTED : DLK_EXIT_RESTARTABLE;
			record_end(&run, &g, opts, spec, DLK_RUN_INTERRUPTED, -1, rc,
			           gang_sig == SIGINT ? "stopped by an interrupt" : "stopped by SIGTERM");
			break;
		}
		int st = g.w[f].status;
		int code = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
		describe(what, sizeof(what), st);
		if (hooks->restarts ? hooks->restarts(hooks->ud, st)
		                    : WIFSIGNALED(st) || WEXITSTATUS(st) == DLK_EXIT_RESTARTABLE) {
			if (gen < max_restarts) {
				dlk_trainer_warn(sink, "worker %d %s; restarting all %d workers from the last checkpoint (restart %d of %d)",
				                 f, what, workers, gen + 1, max_restarts);
				dlk_run_count_restart(run.rec);
				dlk_train_run_save(&run);
				continue;
			}
			dlk_errf(err, DLK_EXIT_RESTARTABLE, "worker %d %s, and the %d restart%s allowed are used up", f, what,
			         max_restarts, max_restarts == 1 ? "" : "s");
			dlk_err_hint(err, "%s (its last checkpoint), or raise --max-restarts", dlk_trainer_resume_hint(opts));
			rc = err->code;
			record_end(&run, &g, opts, spec, DLK_RUN_FAILED, f, code,
			           g.w[f].last_error[0] ? g.w[f].last_error : err->msg);
			break;
		}
		if (hooks->restarts && g.w[f].last_error[0])
			dlk_errf(err, WEXITSTATUS(st), "worker %d %s; the other workers were stopped; its last line: %s", f, what,
			         dlk_visible(g.w[f].last_error));
		else
			dlk_errf(err, WEXITSTATUS(st), "worker %d %s; the other workers were stopped", f, what);
		rc = err->code;
		record_end(&run, &g, opts, spec, DLK_RUN_FAILED, f, code, g.w[f].last_error[0] ? g.w[f].last_error : err->msg);
		break;
	}
	gang_close(&g);
	free(g.peak_kb);
	free(g.cpu_s);
	dlk_train_run_release(&run);
	return rc;
}

int dlk_trainer_pod_gang(const struct dlk_project *spec, int gpus, struct dlk_gang_output out,
                         const struct dlk_gang_hooks *hooks, struct dlk_err *err)
{
	struct dist_env env;
	struct gang g = { .hooks = hooks, .out = out, .job_name = spec->name, .n = gpus, .in_pod = 1 };
	char what[128];
	int threads, rc = 0, f;

	/* dlk's own runs come here with 2 GPUs or more; a user's program with its processes per pod */
	if (gpus < 1 || gpus > DLK_GANG_MAX_WORKERS) {
		dlk_errf(err, DLK_EXIT_CONFIG, "resources.gpus: %d workers in one pod is not in 1..%d", gpus,
		         DLK_GANG_MAX_WORKERS);
		return DLK_EXIT_CONFIG;
	}
	if (dist_env_read(&env, err))
		return err->code ? err->code : DLK_EXIT_FAIL;
	if ((long)env.world * gpus > DIST_WORLD_MAX) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%d pods of %d GPUs make more than %d ranks", env.world, gpus, DIST_WORLD_MAX);
		return DLK_EXIT_CONFIG;
	}
	threads = worker_threads(spec, gpus);
	g.base_rank = env.rank * gpus;
	g.world = env.world * gpus;
	g.master_addr = env.master_addr[0] ? env.master_addr : "127.0.0.1";
	g.master_port = env.master_port;
	gang_open(&g);
	/* one generation: restarting the gang is the Job's (its podFailurePolicy and the
	 * rendezvous' generations), as for a pod of one rank */
	f = run_generation(&g, 0, "", threads, err);
	if (f == -3) {
		rc = err->code ? err->code : DLK_EXIT_FAIL;
	} else if (f == -2) {
		rc = DLK_EXIT_RESTARTABLE;
	} else if (f >= 0) {
		int st = g.w[f].status;
		describe(what, sizeof(what), st);
		rc = WIFSIGNALED(st) ? DLK_EXIT_RESTARTABLE : WEXITSTATUS(st);
		/* DLK_EXIT_RESIZED: the ranks said so: the job was resized, and the pod goes on at the
		 * new size (no failure to tell) */
		if (hooks->restarts)
			/* a user's program says why it failed its own way: its last line of output (the
			 * exception of a traceback) is the cause published and recorded */
			dlk_errf(err, rc, "%s", g.w[f].last_error[0] ? g.w[f].last_error : what);
		else if (rc != DLK_EXIT_RESIZED)
			dlk_errf(err, rc, "rank %d (GPU %d of this pod) %s; the pod's other ranks were stopped",
			         g.base_rank + f, f, what);
	}
	gang_close(&g);
	return rc;
}
