/* The training loop run here: data with progress, the loop with a progress line or plain lines,
 * a metrics file, checkpoints and resuming, the final report and the model bundle. As one
 * worker of several (--worker in a pod, or a child of `--local --workers N`) it also joins the
 * rendezvous and averages gradients over the TCP ring; only rank 0 evaluates, prints, publishes
 * progress and writes checkpoints and the bundle. */
#include "commands/train_here.h"
#include "commands/report_source.h"
#include "commands/train_data.h"
#include "commands/train_progress.h"
#include "lib/data/dataset.h"
#include "lib/comm/comm.h"
#include "lib/comm/rendezvous.h"
#include "lib/report/report.h"
#include "lib/nn/device.h"
#include "lib/train/bundle.h"
#include "lib/train/checkpoint.h"
#include "lib/train/state.h"
#include "lib/train/train.h"
#include "lib/util/git.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* stop_flag is what the loop checks before each step. With one rank a signal sets it directly;
 * with several, the ranks agree after every step (an all-reduce of "has anyone been told to
 * stop") so that all of them stop after the same step. */
static volatile sig_atomic_t stop_flag;
static volatile sig_atomic_t sig_seen;
static volatile sig_atomic_t single_rank = 1;
static unsigned term_grace_sec = 20;

static void on_alarm(int sig)
{
	static const char msg[] = "error: the checkpoint did not finish within the termination grace; exiting\n";
	ssize_t w;

	(void)sig;
	w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)w;
	_exit(DLK_EXIT_RESTARTABLE);
}

static void on_signal(int sig)
{
	if (sig_seen) {
		/* a second signal: do not wait for the checkpoint */
		static const char msg[] = "error: stopped at once by a second signal\n";
		ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)w;
		_exit(DLK_EXIT_RESTARTABLE);
	}
	sig_seen = sig;
	if (single_rank)
		stop_flag = 1;
	/* finish or abandon the current step and write a checkpoint, but within a bound: a pod's
	 * termination grace is 60 s */
	alarm(term_grace_sec);
}

struct report {
	struct dlk_ctx *ctx;
	struct dlk_progress bar;
	FILE *metrics;
	const char *phase;
	int last_plain_pct;
	int last_plain_epoch;
	/* the distributed run */
	int rank, world;
	struct dlk_comm *comm;        /* NULL with one rank; host memory */
	struct dlk_comm *dcomm;       /* NULL, or the device communicator (NCCL) for gradients */
	const struct dlk_backend *be; /* what the model computes on */
	float *stage;                 /* host copy of device gradients for the TCP ring */
	struct dlk_err comm_err;      /* a collective that failed inside an event */
	int comm_failed;
	struct dlk_err grad_err;      /* a bucket that failed to start during backward */
	int grad_failed;
	/* checkpoints (rank 0 writes, every rank resumes) */
	char *ckpt_dir;
	int ckpt_keep;
	struct dlk_state_meta meta;
	int have_arch;
	int ckpt_warned;
	int epochs;
	long ckpt_step;               /* the newest checkpoint written or resumed, -1: none */
	long ckpt_delay_ms;           /* test hook: slow every checkpoint write down */
	struct dlk_job_progress *jp;
	/* what the run document published on the Job is made of (rank 0, in a cluster) */
	const struct dlk_project *spec;
	const struct dlk_net *net;
	const struct dlk_dataset *train, *test;
	char digest[65];
	char git_commit[65];          /* "" when the project is in no git work tree */
	int git_dirty;
	int metrics_warned;
};

static void fmt_duration(char *buf, size_t n, double s)
{
	long t = s > 0 && s < 1e8 ? (long)(s + 0.5) : 0;

	if (t >= 3600)
		snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static int data_progress(void *vctx, const char *what, unsigned long long done, unsigned long long total)
{
	struct report *r = vctx;
	const char *base = strrchr(what, '/');

	base = base ? base + 1 : what;
	if (total)
		dlk_progress_draw(&r->bar, 0, "%s %s: %llu%% of %.1f MB", r->phase, base, done * 100 / total,
		                  (double)total / 1e6);
	else
		dlk_progress_draw(&r->bar, 0, "%s %s: %.1f MB", r->phase, base, (double)done / 1e6);
	return sig_seen != 0;
}

static void metrics_line(struct report *r, const struct dlk_train_event *ev)
{
	cJSON *o;
	char *s;

	if (!r->metrics)
		return;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "event", ev->kind == DLK_TRAIN_STEP ? "step" : ev->kind == DLK_TRAIN_EPOCH ? "epoch" : "done");
	cJSON_AddNumberToObject(o, "epoch", ev->epoch);
	cJSON_AddNumberToObject(o, "step", (double)ev->global_step);
	cJSON_AddNumberToObject(o, "loss", ev->loss);
	cJSON_AddNumberToObject(o, "lr", ev->lr);
	cJSON_AddNumberToObject(o, "samples_per_sec", ev->samples_per_sec);
	cJSON_AddNumberToObject(o, "elapsed_sec", ev->elapsed_sec);
	if (ev->eval && ev->eval->n) {
		cJSON_AddNumberToObject(o, "test_loss", ev->eval->loss);
		cJSON_AddNumberToObject(o, "test_accuracy", ev->eval->accuracy);
	}
	s = cJSON_PrintUnformatted(o);
	fprintf(r->metrics, "%s\n", s);
	free(s);
	cJSON_Delete(o);
}

/* What the bundle and the published run document say about the run; seed and times are the
 * caller's. The spec, datasets and digest come from r. */
static void bundle_info(const struct report *r, struct dlk_bundle_info *bi, const struct dlk_net *net,
                        const struct dlk_eval *eval, double train_loss, const struct dlk_history *history)
{
	const struct dlk_project *spec = r->spec;

	memset(bi, 0, sizeof(*bi));
	bi->name = spec->name;
	bi->model = &spec->model;
	bi->training = &spec->training;
	bi->net = net;
	bi->classes = spec->data.classes;
	bi->n_class_names = spec->data.classes ? spec->data.n_classes : 0;
	bi->eval = eval;
	bi->train_loss = train_loss;
	bi->train = r->train;
	bi->test = r->test && r->test->n ? r->test : NULL;
	bi->project_digest = r->digest;
	bi->seed = spec->training.seed;
	bi->history = history;
	bi->git_commit = r->git_commit;
	bi->git_dirty = r->git_dirty;
	bi->dataset_id = spec->data.dataset.id;
	bi->dataset_tag = spec->data.dataset.tag;
	bi->data_store = spec->data.dataset.id ? spec->data.store : NULL;
	bi->run_id = getenv("DLK_RUN_ID");
}

/* After an epoch and at the end, in a cluster: the run so far, as `dlk report JOB` reads it. A
 * document that cannot be made is warned about once; training goes on. */
static char *metrics_json(struct report *r, const struct dlk_train_event *ev)
{
	struct dlk_bundle_info bi;
	struct dlk_err err = DLK_ERR_INIT;
	const struct dlk_history *h = ev->history;
	cJSON *meta, *run;
	char *s = NULL;

	if (!r->net || !h)
		return NULL;
	bundle_info(r, &bi, r->net, ev->eval, h->n_epochs ? h->epochs[h->n_epochs - 1].train_loss : ev->loss, h);
	bi.started_at = h->n_events ? h->events[0].time : NULL;
	bi.finished_at = ev->kind == DLK_TRAIN_DONE ? ev->finished_at : NULL;
	meta = dlk_bundle_meta_json(&bi);
	run = report_run_from_meta(meta, "job", NULL, &err);
	if (run)
		s = report_run_compact(run, DLK_METRICS_MAX_BYTES);
	if (!s && !r->metrics_warned++)
		dlk_warn(r->ctx, "the run's metrics are not published on the job (training goes on): %s",
		         run ? "too large for an annotation" : err.msg);
	cJSON_Delete(run);
	cJSON_Delete(meta);
	return s;
}

static void on_start(void *vctx, const struct dlk_net *net, long total_steps)
{
	struct report *r = vctx;

	(void)total_steps;
	r->net = net;
}

static void on_event(void *vctx, const struct dlk_train_event *ev0)
{
	struct report *r = vctx;
	struct dlk_train_event evc = *ev0;
	const struct dlk_train_event *ev = &evc;
	char eta[32], el[32];
	const struct dlk_ctx *ctx = r->ctx;

	if (r->comm && ev0->kind != DLK_TRAIN_DONE && !r->comm_failed) {
		/* every rank sees every step and epoch event: agree on stopping, and show the loss of
		 * the whole global batch rather than rank 0's share of it */
		float buf[2] = { (float)ev0->loss, sig_seen ? 1.0f : 0.0f };
		if (comm_allreduce(r->comm, buf, 2, COMM_SUM, &r->comm_err)) {
			r->comm_failed = 1;
			stop_flag = 1;
			return;
		}
		evc.loss = (double)buf[0] / r->world;
		evc.samples_per_sec *= r->world; /* rank 0's pace stands for every rank's: they move in step */
		if (buf[1] > 0)
			stop_flag = 1;
		comm_set_step(r->comm, ev0->global_step + 1); /* named by the watchdog in its messages */
		if (r->dcomm)
			comm_set_step(r->dcomm, ev0->global_step + 1);
	}
	if (r->rank != 0)
		return;
	if (r->jp) {
		char *m = ev->kind != DLK_TRAIN_STEP ? metrics_json(r, ev0) : NULL;
		dlk_job_progress_event(r->jp, ev, m);
		free(m);
	}
	metrics_line(r, ev);
	fmt_duration(eta, sizeof(eta), ev->eta_sec);
	fmt_duration(el, sizeof(el), ev->elapsed_sec);
	if (ev->kind == DLK_TRAIN_STEP) {
		if (ctx->tty_err) {
			int width = 24, fill = ev->steps_per_epoch ? (int)(width * ev->step / ev->steps_per_epoch) : 0;
			char bar[32];
			for (int i = 0; i < width; i++)
				bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
			bar[width] = '\0';
			dlk_progress_draw(&r->bar, ev->step == ev->steps_per_epoch,
			                  "epoch %d/%d [%s] %ld/%ld  loss %.4f  %.0f samples/s  ETA %s", ev->epoch,
			                  ev->epochs, bar, ev->step, ev->steps_per_epoch, ev->loss, ev->samples_per_sec, eta);
		} else if (!ctx->quiet && ev->steps_per_epoch) {
			/* plain lines for logs: one every quarter of an epoch */
			int pct = (int)(100 * ev->step / ev->steps_per_epoch) / 25 * 25;
			if (ev->epoch != r->last_plain_epoch) {
				r->last_plain_epoch = ev->epoch;
				r->last_plain_pct = 0;
			}
			if (pct > r->last_plain_pct && pct < 100) {
				r->last_plain_pct = pct;
				fprintf(stderr, "epoch %d/%d  step %ld/%ld  loss %.4f  %.0f samples/s  ETA %s\n", ev->epoch,
				        ev->epochs, ev->step, ev->steps_per_epoch, ev->loss, ev->samples_per_sec, eta);
			}
		}
		return;
	}
	if (ev->kind == DLK_TRAIN_EPOCH) {
		dlk_progress_clear(&r->bar);
		if (ctx->quiet)
			return;
		if (ev->eval && ev->eval->n)
			fprintf(stderr, "epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy %.2f%%  %.0f samples/s  %s\n",
			        ev->epoch, ev->epochs, ev->loss, ev->eval->loss, 100 * ev->eval->accuracy, ev->samples_per_sec, el);
		else
			fprintf(stderr, "epoch %d/%d  train loss %.4f  %.0f samples/s  %s\n", ev->epoch, ev->epochs, ev->loss,
			        ev->samples_per_sec, el);
	}
}

static void print_report(FILE *out, const struct dlk_project *spec, const struct dlk_eval *ev)
{
	int n = ev->n_classes;
	int w = 5;

	fprintf(out, "test accuracy: %.2f%% (%zu samples), test loss %.4f\n", 100 * ev->accuracy, ev->n, ev->loss);
	fprintf(out, "\nconfusion matrix (rows: true class, columns: predicted)\n");
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			char num[32];
			int l = snprintf(num, sizeof(num), "%lld", ev->confusion[i * n + j]);
			if (l + 1 > w)
				w = l + 1;
		}
	fprintf(out, "%14s", "");
	for (int j = 0; j < n; j++)
		fprintf(out, "%*d", w, j);
	fprintf(out, "   recall\n");
	for (int i = 0; i < n; i++) {
		const char *name = spec->data.classes && i < spec->data.n_classes ? spec->data.classes[i] : NULL;
		char label[32];
		if (name)
			snprintf(label, sizeof(label), "%d %.11s", i, name);
		else
			snprintf(label, sizeof(label), "%d", i);
		fprintf(out, "%-14s", label);
		for (int j = 0; j < n; j++)
			fprintf(out, "%*lld", w, ev->confusion[i * n + j]);
		fprintf(out, "   %5.1f%%\n", 100 * ev->recall[i]);
	}
	fprintf(out, "%-14s", "precision");
	for (int j = 0; j < n; j++)
		fprintf(out, "%*.0f", w, 100 * ev->precision[j]);
	fprintf(out, "   (%%)\n");
}

static cJSON *result_json(const struct dlk_project *spec, const struct dlk_train_result *res, const char *bundle)
{
	cJSON *o = cJSON_CreateObject();
	const struct dlk_eval *ev = &res->eval;

	cJSON_AddStringToObject(o, "name", spec->name);
	cJSON_AddStringToObject(o, "bundle", bundle);
	cJSON_AddNumberToObject(o, "epochs", res->epochs_done);
	cJSON_AddNumberToObject(o, "steps", (double)res->steps);
	cJSON_AddNumberToObject(o, "trainLoss", res->train_loss);
	cJSON_AddNumberToObject(o, "seconds", res->seconds);
	cJSON_AddNumberToObject(o, "samplesPerSecond", res->train_samples_per_sec);
	if (ev->n) {
		cJSON *cm = cJSON_CreateArray();
		cJSON_AddNumberToObject(o, "testAccuracy", ev->accuracy);
		cJSON_AddNumberToObject(o, "testLoss", ev->loss);
		for (int i = 0; i < ev->n_classes; i++) {
			cJSON *row = cJSON_CreateArray();
			for (int j = 0; j < ev->n_classes; j++)
				cJSON_AddItemToArray(row, cJSON_CreateNumber((double)ev->confusion[i * ev->n_classes + j]));
			cJSON_AddItemToArray(cm, row);
		}
		cJSON_AddItemToObject(o, "confusionMatrix", cm);
	}
	return o;
}

static char *default_bundle_path(const char *spec_file, const char *name)
{
	const char *slash = strrchr(spec_file, '/');

	if (!slash)
		return xasprintf("%s.dlk", name);
	return xasprintf("%.*s/%s.dlk", (int)(slash - spec_file), spec_file, name);
}

static char *project_dir(const char *spec_file)
{
	const char *slash = strrchr(spec_file, '/');

	return slash ? xstrndup(spec_file, (size_t)(slash - spec_file)) : xstrdup(".");
}

/* ---- checkpoints ---- */

static ssize_t slow_write(int fd, const void *buf, size_t len, void *vctx)
{
	const struct report *r = vctx;
	struct timespec ts = { r->ckpt_delay_ms / 1000, (r->ckpt_delay_ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
	return write(fd, buf, len);
}

static void ensure_arch(struct report *r, const struct dlk_net *net)
{
	if (!r->have_arch) {
		dlk_net_arch_digest(net, r->meta.arch);
		r->have_arch = 1;
	}
}

/* Every training.checkpoint_every steps, at epoch ends and when stopping: rank 0 writes. A
 * checkpoint that cannot be written is a warning, not the end of the run. */
static int on_checkpoint(void *vctx, const struct dlk_train_state *st, struct dlk_err *err)
{
	struct report *r = vctx;

	if (r->rank == 0 && r->ckpt_dir) {
		struct dlk_err e = DLK_ERR_INIT;
		struct ckpt_write_opts wo = CKPT_WRITE_OPTS_INIT;
		if (r->ckpt_delay_ms > 0) {
			wo.write_fn = slow_write;
			wo.write_ctx = r;
		}
		ensure_arch(r, st->net);
		if (dlk_state_save(r->ckpt_dir, r->ckpt_keep, st, &r->meta, &wo, &e)) {
			if (!r->ckpt_warned++)
				dlk_warn(r->ctx, "checkpoint at step %ld not written (training goes on): %s%s%s", st->global_step,
				         e.msg, e.hint[0] ? "; " : "", e.hint);
		} else {
			r->ckpt_step = st->global_step;
			if (r->ctx->verbose)
				dlk_info(r->ctx, "checkpoint: step %ld in '%s'", st->global_step, r->ckpt_dir);
		}
	}
	if (r->comm_failed) {
		*err = r->comm_err;
		return -1;
	}
	return 0;
}

/* What rank 0 tells the others about the checkpoint it resumed from. */
enum { RESUME_NONE = 0, RESUME_LOADED = 1, RESUME_FAILED = 2 };

static int bcast_floats(struct dlk_comm *c, float *dev, size_t n, const struct dlk_backend *be, struct dlk_err *err)
{
	float *h = xmalloc(n ? sizeof(float) * n : 1);
	int rc;

	be->to_host(h, dev, sizeof(float) * n);
	rc = comm_broadcast(c, h, sizeof(float) * n, 0, err);
	if (!rc)
		be->to_device(dev, h, sizeof(float) * n);
	free(h);
	return rc;
}

/* Rank 0 loads the newest checkpoint that verifies and broadcasts it, so that ranks never
 * disagree on where they resume. */
static int on_resume(void *vctx, struct dlk_train_state *st, struct dlk_err *err)
{
	struct report *r = vctx;
	long long hdr[6] = { RESUME_NONE, 0, 0, 0, 0, 0 };
	unsigned long long dc = 0;
	int rc = -1;

	ensure_arch(r, st->net);
	if (r->rank == 0 && r->ckpt_dir) {
		struct ckpt c = CKPT_INIT;
		int got = ckpt_load_latest(r->ckpt_dir, 0, &c, err);
		for (size_t i = 0; i < c.nwarnings; i++)
			dlk_warn(r->ctx, "%s", c.warnings[i]);
		if (got < 0) {
			dlk_err_prefix(err, "cannot resume from '%s'", r->ckpt_dir);
			hdr[0] = RESUME_FAILED;
		} else if (got == 1) {
			if (dlk_state_restore(&c, st, &r->meta, err)) {
				hdr[0] = RESUME_FAILED;
			} else {
				hdr[0] = RESUME_LOADED;
				r->ckpt_step = st->global_step;
				if (st->epoch >= r->epochs)
					dlk_info(r->ctx, "checkpoint '%s' is of the finished run (%ld steps): nothing left to train",
					         c.path, st->global_step);
				else
					dlk_info(r->ctx, "resuming from checkpoint '%s' (epoch %d, step %ld of the epoch, %ld steps done)",
					         c.path, st->epoch + 1, st->step_in_epoch, st->global_step);
			}
		}
		ckpt_release(&c);
		hdr[1] = st->epoch;
		hdr[2] = st->step_in_epoch;
		hdr[3] = st->global_step;
		hdr[4] = st->opt->t;
		memcpy(&hdr[5], &st->net->dropout_counter, sizeof(dc));
	}
	if (r->comm) {
		struct dlk_err e = DLK_ERR_INIT;
		if (comm_broadcast(r->comm, hdr, sizeof(hdr), 0, &e)) {
			*err = e;
			return -1;
		}
		if (hdr[0] == RESUME_FAILED && r->rank != 0)
			return dlk_errf(err, DLK_EXIT_CONFIG, "rank 0 could not resume from the checkpoints (its log says why)");
		if (hdr[0] == RESUME_LOADED) {
			const struct dlk_backend *be = st->net->be;
			if (bcast_floats(r->comm, st->net->params, st->net->n_params, be, &e) ||
			    (st->opt->m && bcast_floats(r->comm, st->opt->m, st->opt->n, be, &e)) ||
			    (st->opt->v && bcast_floats(r->comm, st->opt->v, st->opt->n, be, &e))) {
				*err = e;
				return -1;
			}
			st->epoch = (int)hdr[1];
			st->step_in_epoch = (long)hdr[2];
			st->global_step = (long)hdr[3];
			st->opt->t = (long)hdr[4];
			memcpy(&dc, &hdr[5], sizeof(dc));
			st->net->dropout_counter = dc;
		}
	}
	if (hdr[0] == RESUME_FAILED)
		return -1;
	rc = hdr[0] == RESUME_LOADED;
	return rc;
}

/* ---- gradients ---- */

/* The backend's memory is host memory (the CPU's): the TCP ring can reduce it in place. */
static int host_memory(const struct report *r)
{
	return r->be == dlk_backend_cpu();
}

static void on_grad_ready(void *vctx, float *grads, size_t n_params, size_t off, size_t n)
{
	struct report *r = vctx;

	if (!r->grad_failed && comm_grads_ready(r->dcomm, grads, n_params, off, n, 0, COMM_AVG, &r->grad_err))
		r->grad_failed = 1;
}

static int on_allreduce(void *vctx, float *grads, size_t n, struct dlk_err *err)
{
	struct report *r = vctx;
	int rc;

	if (r->dcomm) {
		/* the buckets started during backward; this starts the rest and waits */
		if (r->grad_failed) {
			*err = r->grad_err;
			return -1;
		}
		return comm_grads_finish(r->dcomm, grads, n, 0, COMM_AVG, err);
	}
	if (host_memory(r))
		return comm_allreduce_bucketed(r->comm, grads, n, 0, COMM_AVG, err);
	/* device gradients without a device communicator (ranks sharing a GPU, or no NCCL): through
	 * host memory */
	if (!r->stage)
		r->stage = xmalloc(sizeof(float) * (n ? n : 1));
	r->be->to_host(r->stage, grads, sizeof(float) * n);
	rc = comm_allreduce_bucketed(r->comm, r->stage, n, 0, COMM_AVG, err);
	if (!rc)
		r->be->to_device(grads, r->stage, sizeof(float) * n);
	return rc;
}

static int on_broadcast(void *vctx, float *params, size_t n, struct dlk_err *err)
{
	struct report *r = vctx;

	if (r->dcomm)
		return comm_broadcast(r->dcomm, params, sizeof(float) * n, 0, err);
	if (host_memory(r))
		return comm_broadcast(r->comm, params, sizeof(float) * n, 0, err);
	return bcast_floats(r->comm, params, n, r->be, err);
}

static long env_long(const char *name, long def, long lo, long hi, struct dlk_err *err, int *bad)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || x < lo || x > hi) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: expected a whole number in [%ld, %ld], not '%s'", name, lo, hi, v);
		*bad = 1;
		return def;
	}
	return x;
}

/* Joins the other ranks: the rendezvous (run id and generation from the Job) and the ring. */
static int join_gang(struct report *r, const struct dist_env *env, int dev_shared, struct dlk_err *err)
{
	struct dist_rdzv_opts o = DIST_RDZV_OPTS_INIT;
	const char *job = getenv("DLK_JOB_NAME"), *uid = getenv("DLK_RUN_ID"), *comm_env = getenv("DLK_COMM");
	const struct dlk_device_comm *dc;
	char *run_id;
	int bad = 0, rc;
	long gen = env_long("DLK_GENERATION", 0, 0, UINT_MAX, err, &bad);
	long lfd = env_long("DLK_LISTEN_FD", -1, -1, INT_MAX, err, &bad);
	long tmo = env_long("DLK_RENDEZVOUS_TIMEOUT", 300, 1, 86400, err, &bad);
	long stall = env_long("DLK_STALL_TIMEOUT", 300, 1, 86400, err, &bad);

	if (bad)
		return -1;
	if (uid && *uid)
		run_id = xasprintf("%s/%s", job && *job ? job : "dlk", uid);
	else
		run_id = xstrdup(job && *job ? job : "dlk");
	if (strlen(run_id) > DIST_RUN_ID_MAX)
		run_id[DIST_RUN_ID_MAX] = '\0';
	o.rank = env->rank;
	o.world = env->world;
	o.master_addr = env->master_addr;
	o.master_port = env->master_port;
	o.listen_fd = env->rank == 0 ? (int)lfd : -1;
	o.run_id = run_id;
	o.generation = (unsigned)gen;
	o.timeout_ms = (int)(tmo * 1000);
	/* NCCL carries the gradients when the backend has it and every rank has a GPU of its own;
	 * DLK_COMM=tcp keeps them on the TCP ring (through host memory) */
	dc = r->be->comm;
	if (dc && (dev_shared || (comm_env && !strcmp(comm_env, "tcp"))))
		dc = NULL;
	if (comm_env && *comm_env && strcmp(comm_env, "tcp") && strcmp(comm_env, "auto")) {
		free(run_id);
		return dlk_errf(err, DLK_EXIT_CONFIG, "DLK_COMM: expected auto or tcp, not '%.64s'", comm_env);
	}
	rc = dist_join(&o, dc, (int)(stall * 1000), &r->comm, &r->dcomm, err);
	free(run_id);
	return rc;
}

int dlk_train_here(struct dlk_ctx *ctx, const struct dlk_train_cli *cli, const struct dlk_project *spec, int worker)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_dataset train = DLK_DATASET_INIT, test = DLK_DATASET_INIT;
	struct dlk_data_opts dopts = { 0 };
	struct dlk_train_opts topts = DLK_TRAIN_OPTS_INIT;
	struct dlk_train_result res = DLK_TRAIN_RESULT_INIT;
	struct dlk_train_data *tdata = NULL;
	struct dlk_training tr = spec->training;
	struct report rep = { 0 };
	struct dist_env env = { 0, 1, "", DIST_DEFAULT_PORT, 0, 1 };
	struct dlk_device_choice dev;
	enum dlk_device_kind want;
	struct sigaction sa = { 0 }, old_int, old_term, old_alrm;
	char *bundle = NULL, *dir = project_dir(ctx->file);
	const char *mpath = cli->metrics;
	int rc = 0, ran, bad = 0;

	rep.ctx = ctx;
	rep.bar.ctx = ctx;
	rep.spec = spec;
	rep.train = &train;
	rep.test = &test;
	project_digest(spec, rep.digest);
	/* which code made the model, when the project is kept in git (in a pod it is not) */
	if (dlk_git_head(dir, rep.git_commit, &rep.git_dirty))
		rep.git_commit[0] = '\0';
	rep.ckpt_step = -1;
	rep.world = 1;
	stop_flag = 0;
	sig_seen = 0;
	single_rank = 1;
	term_grace_sec = (unsigned)env_long("DLK_TERM_GRACE", 20, 1, 3600, &err, &bad);
	rep.ckpt_delay_ms = env_long("DLK_TEST_CHECKPOINT_DELAY_MS", 0, 0, 60000, &err, &bad);
	if (bad)
		goto fail;
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, &old_alrm);

	if (worker) {
		if (dist_env_read(&env, &err))
			goto fail;
		rep.rank = env.rank;
		rep.world = env.world;
		single_rank = env.world == 1;
		if (env.rank != 0)
			ctx->tty_err = 0;
		if (getenv("DLK_THREADS") && !tr.threads)
			tr.threads = (int)env_long("DLK_THREADS", 0, 0, 4096, &err, &bad);
		if (bad)
			goto fail;
	}
	/* the project's GPUs: required in a pod that was given them, wanted (not required) when
	 * training here; DLK_DEVICE overrides */
	want = spec->resources.gpus <= 0 ? DLK_DEVICE_CPU
	       : worker && getenv("KUBERNETES_SERVICE_HOST") ? DLK_DEVICE_CUDA : DLK_DEVICE_AUTO;
	if (dlk_device_wanted(want, &want, &err) ||
	    dlk_backend_select(want, env.local_rank, env.local_world, &dev, &err))
		goto fail;
	rep.be = dev.be;
	if (dev.why[0] && want == DLK_DEVICE_AUTO && spec->resources.gpus > 0 && rep.rank == 0)
		dlk_warn(ctx, "training on the CPU: %s", dev.why);
	else if (ctx->verbose && rep.rank == 0)
		dlk_info(ctx, "computing on %s", dev.be->device);
	if (mpath && rep.rank == 0) {
		rep.metrics = fopen(mpath, "a");
		if (!rep.metrics) {
			dlk_errf(&err, DLK_EXIT_FAIL, "cannot open metrics file '%s': %s", mpath, strerror(errno));
			goto fail;
		}
		setvbuf(rep.metrics, NULL, _IOLBF, 0);
	}
	if (tr.checkpoint_dir)
		rep.ckpt_dir = tr.checkpoint_dir[0] == '/' || !strcmp(dir, ".") ? xstrdup(tr.checkpoint_dir)
		                                                                 : xasprintf("%s/%s", dir, tr.checkpoint_dir);
	rep.ckpt_keep = tr.checkpoint_keep;
	rep.epochs = tr.epochs;
	rep.meta.seed = tr.seed;
	rep.meta.world = rep.world;
	rep.meta.batch_size = tr.batch_size;

	memcpy(dopts.shape, spec->model.input, sizeof(dopts.shape));
	dopts.base_dir = dir;
	dopts.progress = data_progress;
	dopts.progress_ctx = &rep;
	if (dlk_train_data_open(ctx, spec, worker, dir, &dopts, &tdata, &err))
		goto fail;
	rep.phase = "loading training data";
	if (dlk_data_load(&spec->data, "train", &dopts, &train, &err) && !sig_seen)
		goto fail;
	rep.phase = "loading test data";
	/* only rank 0 evaluates */
	if (!sig_seen && rep.rank == 0 && (spec->data.test.images.url || spec->data.test.source.url) &&
	    dlk_data_load(&spec->data, "test", &dopts, &test, &err) && !sig_seen)
		goto fail;
	dlk_progress_clear(&rep.bar);
	if (sig_seen) {
		dlk_err_clear(&err);
		dlk_errf(&err, worker || sig_seen == SIGTERM ? DLK_EXIT_RESTARTABLE : DLK_EXIT_FAIL,
		         "stopped by a signal while loading the data");
		goto fail;
	}
	dlk_train_data_done(ctx, tdata, rep.rank);
	if (rep.world > 1 && join_gang(&rep, &env, dev.shared, &err))
		goto fail;
	if (rep.world > 1 && ctx->verbose && rep.rank == 0)
		dlk_info(ctx, "gradients over %s (%d ranks)", rep.dcomm ? "NCCL" : "the TCP ring", rep.world);
	if (!ctx->quiet && rep.rank == 0) {
		if (rep.world > 1)
			fprintf(stderr, "training '%s' on %zu samples%s (%d epochs, %d workers x batch %d, %s)\n", spec->name,
			        train.n, test.n ? "" : ", no test set", tr.epochs, rep.world, tr.batch_size,
			        project_optimizer_name(tr.optimizer));
		else
			fprintf(stderr, "training '%s' on %zu samples%s (%d epochs, batch %d, %s)\n", spec->name, train.n,
			        test.n ? "" : ", no test set", tr.epochs, tr.batch_size, project_optimizer_name(tr.optimizer));
	}
	if (worker && rep.rank == 0)
		rep.jp = dlk_job_progress_new(ctx);

	topts.model = &spec->model;
	topts.training = &tr;
	topts.spec_file = spec->path ? spec->path : ctx->file;
	topts.train = &train;
	topts.test = test.n ? &test : NULL;
	topts.backend = rep.be;
	topts.rank = rep.rank;
	topts.world = rep.world;
	if (rep.comm) {
		topts.allreduce = on_allreduce;
		topts.broadcast = on_broadcast;
		if (rep.dcomm)
			topts.grad_ready = on_grad_ready;
		topts.comm_ctx = &rep;
	}
	topts.checkpoint = on_checkpoint;
	topts.resume = on_resume;
	topts.ckpt_ctx = &rep;
	topts.on_event = on_event;
	topts.on_start = on_start;
	topts.event_ctx = &rep;
	topts.cancel = &stop_flag;
	ran = dlk_train_run(&topts, &res, &err);
	dlk_progress_clear(&rep.bar);
	alarm(0);
	if (ran < 0)
		goto fail;
	if (ran == 1) {
		const char *what = sig_seen == SIGTERM ? "SIGTERM" : sig_seen == SIGINT ? "an interrupt" : "a signal to a peer";
		int code = worker || sig_seen != SIGINT ? DLK_EXIT_RESTARTABLE : DLK_EXIT_FAIL;
		if (rep.rank == 0 && rep.ckpt_step >= 0 && rep.ckpt_step == res.steps) {
			dlk_errf(&err, code, "training stopped by %s after %ld steps; checkpoint written", what, res.steps);
			dlk_err_hint(&err, "run the same command again to resume from it");
		} else {
			dlk_errf(&err, code, "training stopped by %s after %ld steps", what, res.steps);
		}
		goto fail;
	}
	if (rep.rank != 0) {
		if (ctx->verbose)
			dlk_info(ctx, "rank %d done after %ld steps", rep.rank, res.steps);
		goto out;
	}

	bundle = cli->bundle ? xstrdup(cli->bundle) : default_bundle_path(ctx->file, spec->name);
	{
		struct dlk_bundle_info bi;
		bundle_info(&rep, &bi, &res.net, res.eval.n ? &res.eval : NULL, res.train_loss, &res.history);
		bi.seed = res.seed;
		/* the run's first start: a resumed run began before this process */
		bi.started_at = res.history.n_events ? res.history.events[0].time : res.started_at;
		bi.finished_at = res.finished_at;
		if (dlk_bundle_write(bundle, &bi, &err))
			goto fail;
	}
	/* the page is drawn from the bundle as written, as `dlk report` would draw it */
	if (cli->report) {
		const char *page = cli->report;
		cJSON *run = dlk_report_from_bundle(bundle, &err);
		if (!run || report_write_html(page, run, NULL, &err)) {
			cJSON_Delete(run);
			dlk_err_prefix(&err, "--report '%s'", page);
			goto fail;
		}
		cJSON_Delete(run);
		if (!ctx->quiet)
			fprintf(stderr, "report: %s\n", page);
	}

	if (ctx->output == DLK_OUTPUT_JSON) {
		cJSON *o = result_json(spec, &res, bundle);
		char *s = cJSON_Print(o);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(o);
	} else {
		if (res.eval.n)
			print_report(stdout, spec, &res.eval);
		else
			printf("no test set: final train loss %.4f\n", res.train_loss);
		printf("\nmodel bundle: %s\n", bundle);
		if (!ctx->quiet)
			fprintf(stderr, "trained %d epochs in %.1fs (%.0f samples/s%s)\n", res.epochs_done, res.seconds,
			        res.train_samples_per_sec * rep.world, rep.world > 1 ? " over all workers" : "");
	}
	goto out;
fail:
	dlk_progress_clear(&rep.bar);
	rc = dlk_report(ctx, &err);
out:
	alarm(0);
	if (sa.sa_handler) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		sigaction(SIGALRM, &old_alrm, NULL);
	}
	if (rep.metrics)
		fclose(rep.metrics);
	comm_free(rep.dcomm);
	comm_free(rep.comm);
	free(rep.stage);
	dlk_job_progress_free(rep.jp);
	dlk_train_result_release(&res);
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	dlk_train_data_free(tdata);
	free(rep.ckpt_dir);
	free(bundle);
	free(dir);
	return rc;
}
