/* The training loop run here: the data, the loop, checkpoints and resuming, stopping on a
 * signal, and the model bundle. As one worker of several (--worker in a pod, or a child of
 * `--local --workers N`) it also joins the rendezvous and averages gradients over the TCP ring;
 * only rank 0 evaluates, shows (through the sink), publishes progress (progress.c) and writes
 * checkpoints and the bundle. */
#include "lib/trainer/here.h"
#include "lib/train/metrics.h"
#include "lib/trainer/metrics.h"
#include "lib/trainer/progress.h"
#include "lib/trainer/run.h"
#include "lib/trainer/trainer.h"
#include "lib/data/dataset.h"
#include "lib/comm/comm.h"
#include "lib/comm/rendezvous.h"
#include "lib/jobs/podenv.h"
#include "lib/nn/backend.h"
#include "lib/nn/cpu_bgemm.h"
#include "lib/nn/device.h"
#include "lib/nn/net.h"
#include "lib/report/report.h"
#include "lib/top/nvml.h"
#include "lib/top/peak.h"
#include "lib/train/bundle.h"
#include "lib/train/checkpoint.h"
#include "lib/train/state.h"
#include "lib/train/train.h"
#include "lib/util/clock.h"
#include "lib/util/git.h"
#include "lib/util/hash.h"
#include "lib/util/fsutil.h"
#include "lib/util/machine.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
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

/* ---- signals ---- */

struct signals {
	struct sigaction old_int, old_term, old_alrm;
	int installed;
};

/* A first SIGINT or SIGTERM stops training after the current step, with a checkpoint, within
 * the grace DLK_TERM_GRACE gives; a second one, or the grace running out, ends the process. */
static void signals_install(struct signals *s, unsigned grace_sec)
{
	struct sigaction sa = { 0 };

	stop_flag = 0;
	sig_seen = 0;
	single_rank = 1;
	term_grace_sec = grace_sec;
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, &s->old_int);
	sigaction(SIGTERM, &sa, &s->old_term);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, &s->old_alrm);
	s->installed = 1;
}

static void signals_restore(struct signals *s)
{
	alarm(0);
	if (!s->installed)
		return;
	sigaction(SIGINT, &s->old_int, NULL);
	sigaction(SIGTERM, &s->old_term, NULL);
	sigaction(SIGALRM, &s->old_alrm, NULL);
	s->installed = 0;
}

/* What the loop's callbacks share. */
struct here {
	const struct dlk_trainer_here_opts *o;
	const struct dlk_trainer_sink *sink; /* what rank 0 shows, and every rank's notes */
	const char *phase;            /* what the data progress is about: "loading training data" */
	/* the distributed run */
	int rank, world;
	struct dlk_comm *comm;        /* NULL with one rank; host memory */
	struct dlk_comm *dcomm;       /* NULL, or the device communicator (NCCL) for gradients */
	const struct dlk_backend *be; /* what the model computes on */
	float *stage;                 /* host copy of device gradients for the TCP ring */
	const struct dlk_train_result *res; /* the loop's, for what on_start shows */
	struct dlk_err comm_err;      /* a collective that failed inside an event */
	int comm_failed;
	struct dlk_err grad_err;      /* a bucket that failed to start during backward */
	int grad_failed;
	/* checkpoints (rank 0 writes, every rank resumes) */
	char *ckpt_dir;
	int ckpt_keep;
	struct dlk_state_meta meta;
	struct ckpt ckpt;             /* rank 0: the checkpoint to resume from (path NULL: none) */
	int ckpt_world;               /* the world size it was written at (0: none) */
	int have_arch;
	int ckpt_warned;
	int epochs;
	long ckpt_step;               /* the newest checkpoint written or resumed, -1: none */
	long ckpt_delay_ms;           /* test hook: slow every checkpoint write down */
	long ckpt_space, ckpt_written; /* test hook: a checkpoint's volume holds ckpt_space bytes */
	long test_memory;              /* test hook: the memory data.images.decode: auto weighs */
	struct dlk_job_progress *jp;
	/* elastic (rank 0 in a cluster): the Job's size, read every poll_sec; resize_to is the new
	 * number of workers once `dlk scale` changed it, and every rank stops to re-form */
	int local_world;              /* ranks per pod */
	long poll_sec;
	double last_poll;
	int polled;                   /* the Job was read once */
	int poll_warned;
	int resize_to;
	/* what the run document published on the Job is made of (rank 0, in a cluster) */
	const struct dlk_project *spec;
	const struct dlk_net *net;
	const struct dlk_dataset *train, *test;
	char digest[65];
	char git_commit[65];          /* "" when the project is in no git work tree */
	int git_dirty;
	int metrics_warned;
	struct dlk_train_run trun;    /* the run: its id, its record (kept by the local process, or rank 0 in a pod) */
	struct dlk_train_metrics *metrics; /* what /metrics serves; NULL when not asked */
	double progress_saved;        /* when a run here last wrote its progress file */
	int progress_warned;
	double *kept_phase;           /* the last step times gathered from every rank */
	double flops_per_sample;      /* a training step's FLOPs per sample (0: not known) */
	struct dlk_peak peak;         /* this rank's device's peak (flops 0: not known) */
	int n_kept_phase;
	/* this rank's GPU (NULL: none known), sampled at most every DLK_PROGRESS_FILE_INTERVAL_SEC */
	struct dlk_gpu_probe *gpu;
	struct dlk_gpu_sample gpu_last;
	int have_gpu;
	double gpu_sampled;
	struct dlk_rank_gpu *kept_gpu; /* the last GPU samples gathered from every rank */
	int n_kept_gpu;
};

/* the floats a rank's GPU sample takes in the gathering all-reduce: NVML's index + 1 (0: no
 * sample), utilisation, memory used and total in MiB (exact in a float up to 16 TiB), power + 1
 * (0: not reported), SM clock */
#define GPU_FLOATS 6

/* samples this rank's GPU when the last sample is older than the progress's cadence (never per
 * step: NVML's calls cost more than a small step) */
static void sample_gpu(struct here *r, int now_anyway)
{
	double now = dlk_now();

	if (!r->gpu || (!now_anyway && r->gpu_sampled > 0 && now - r->gpu_sampled < DLK_PROGRESS_FILE_INTERVAL_SEC))
		return;
	r->gpu_sampled = now;
	r->have_gpu = !dlk_gpu_probe_sample(r->gpu, &r->gpu_last);
	if (r->have_gpu)
		dlk_train_metrics_gpu(r->metrics, r->gpu_last.index, r->gpu_last.util_percent, (double)r->gpu_last.mem_used,
		                      (double)r->gpu_last.mem_total, r->gpu_last.power_w, r->gpu_last.sm_clock_mhz);
}

static void gpu_floats(const struct here *r, float *f)
{
	const struct dlk_gpu_sample *g = &r->gpu_last;

	if (!r->have_gpu)
		return;
	f[0] = (float)(g->index + 1);
	f[1] = (float)g->util_percent;
	f[2] = (float)round((double)g->mem_used / 1048576.0);
	f[3] = (float)round((double)g->mem_total / 1048576.0);
	f[4] = g->power_w >= 0 ? (float)(g->power_w + 1) : 0;
	f[5] = (float)g->sm_clock_mhz;
}

/* the ranks' GPU samples from the gathered floats (nr ranks) into r->kept_gpu */
static void keep_gpus(struct here *r, const float *f, int nr)
{
	r->n_kept_gpu = 0;
	r->kept_gpu = xrealloc(r->kept_gpu, sizeof(*r->kept_gpu) * (size_t)(nr > 0 ? nr : 1));
	for (int i = 0; i < nr; i++) {
		const float *g = f + (size_t)i * GPU_FLOATS;
		struct dlk_rank_gpu *k = &r->kept_gpu[r->n_kept_gpu];
		if (!(g[0] >= 1))
			continue;
		k->rank = i;
		k->gpu = (int)g[0] - 1;
		k->util_percent = g[1];
		k->mem_used = (double)g[2] * 1048576.0;
		k->mem_total = (double)g[3] * 1048576.0;
		k->power_w = g[4] > 0 ? (double)g[4] - 1 : -1;
		k->sm_clock_mhz = g[5];
		r->n_kept_gpu++;
	}
}

/* What the bundle and the published run document say about the run; seed and times are the
 * caller's. The spec, datasets and digest come from r. */
static void bundle_info(const struct here *r, struct dlk_bundle_info *bi, const struct dlk_net *net,
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
	/* the classes the data named (an image folder's folders, text labels), when they are the
	 * model's outputs */
	if (!bi->classes && r->train && r->train->class_names && r->train->n_class_names == net->n_classes) {
		bi->classes = r->train->class_names;
		bi->n_class_names = r->train->n_class_names;
	}
	bi->tokenizer = r->train ? r->train->tokenizer : NULL;
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
	/* the run that made it: here the local history's, in a pod the Job's (DLK_RUN_ID) */
	bi->run_id = r->trun.id[0] ? r->trun.id : NULL;
}

/* After an epoch and at the end, in a cluster: the run so far, as `dlk report JOB` reads it. A
 * document that cannot be made is warned about once; training goes on. */
static char *metrics_json(struct here *r, const struct dlk_train_event *ev)
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
		dlk_trainer_warn(r->sink, "the run's metrics are not published on the job (training goes on): %s",
		         run ? "too large for an annotation" : err.msg);
	cJSON_Delete(run);
	cJSON_Delete(meta);
	return s;
}

/* "1.6 KiB", "3.2 MiB": sizes of optimizer state for the log */
static void format_bytes(double b, char *out, size_t len)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (b >= 1024 && u < 4) {
		b /= 1024;
		u++;
	}
	if (u)
		snprintf(out, len, "%.1f %s", b, unit[u]);
	else
		snprintf(out, len, "%.0f %s", b, unit[u]);
}

static void on_start(void *vctx, const struct dlk_net *net, long total_steps)
{
	struct here *r = vctx;

	(void)total_steps;
	r->net = net;
	if (r->rank == 0 && r->res && r->res->optim_state_bytes != r->res->optim_full_bytes) {
		/* what the optimizer allocated on rank 0 (the last rank holds up to world - 1 floats more) */
		char mine[32], whole[32];
		format_bytes((double)r->res->optim_state_bytes, mine, sizeof(mine));
		format_bytes((double)r->res->optim_full_bytes, whole, sizeof(whole));
		dlk_trainer_info(r->sink, "optimizer state: %s per rank, sharded over %d ranks (ZeRO-1; %s whole)", mine,
		                 r->world, whole);
	}
	if (r->rank == 0 && r->res && r->spec && r->spec->training.recompute) {
		/* what the activations of a batch take, against what they would take kept whole */
		char now[32], whole[32];
		format_bytes(r->res->activation_bytes, now, sizeof(now));
		format_bytes(r->res->activation_bytes_whole, whole, sizeof(whole));
		if (r->res->recomputed_blocks)
			dlk_trainer_info(r->sink, "activations: %s per batch, the insides of %d blocks recomputed in backward "
			                 "(%s kept whole)", now, r->res->recomputed_blocks, whole);
		else
			dlk_trainer_warn(r->sink, "training.recompute: no block to recompute (it recomputes the repetitions "
			                 "of model.blocks); the activations are kept whole (%s per batch)", whole);
	}
	/* the model FLOP utilisation's terms: the model's FLOPs, the device's peak */
	r->flops_per_sample = DLK_TRAIN_FLOPS_FACTOR * dlk_net_flops_per_sample(net);
	memset(&r->peak, 0, sizeof(r->peak));
	if (!strcmp(net->be->name, "cpu") ? dlk_peak_cpu(dlk_parallel_threads(), &r->peak)
	                                  : dlk_peak_gpu(net->be->device, &r->peak))
		memset(&r->peak, 0, sizeof(r->peak));
}

/* Rank 0 in a cluster, at most every poll_sec unless now_please: the Job's workers when `dlk scale`
 * changed them (0 when not). A Job that cannot be read is warned about once; training goes on. */
static int resized(struct here *r, int now_please)
{
	struct dlk_err e = DLK_ERR_INIT;
	double now = dlk_now();
	int n = 0;

	/* the first step reads the Job; after that the clock decides (a monotonic clock starts near 0 at
	 * boot, so "now minus never" must not be measured from 0) */
	if (!r->jp || r->rank != 0 || (!now_please && r->polled && now - r->last_poll < (double)r->poll_sec))
		return 0;
	r->polled = 1;
	r->last_poll = now;
	if (dlk_job_progress_workers(r->jp, &n, &e)) {
		if (!r->poll_warned++)
			dlk_trainer_warn(r->sink, "%s (training goes on at %d workers; `dlk scale` cannot resize it)", e.msg, r->world);
		return 0;
	}
	return n > 0 && (long)n * r->local_world != r->world ? n : 0;
}

/* A run here, rank 0 (the process, or a local gang's rank 0): the progress, as a Job's
 * annotation carries it, with the run's id, in the project's run directory
 * (DLK_PROGRESS_FILE), where `dlk top` reads it: after the first step timed, then at most every
 * DLK_PROGRESS_FILE_INTERVAL_SEC (an epoch may take milliseconds; the file is synced), and at the end. A pod's progress is on its Job. A file that cannot be
 * written is warned about once; training goes on. */
static void local_progress(struct here *r, const struct dlk_train_event *ev)
{
	struct dlk_err err = DLK_ERR_INIT;
	char updated[32], *s, *dir, *path;
	double now = dlk_now();
	cJSON *p;

	if (r->o->run.in_pod || !r->spec || !r->trun.id[0] ||
	    (ev->kind != DLK_TRAIN_DONE && r->progress_saved > 0 && now - r->progress_saved < DLK_PROGRESS_FILE_INTERVAL_SEC))
		return;
	r->progress_saved = now;
	dlk_rfc3339_now(updated);
	s = dlk_progress_json(ev, 0, 0, updated);
	p = cJSON_Parse(s);
	free(s);
	if (!p)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(p, DLK_PROGRESS_ACCURACY); /* the record has the metrics */
	cJSON_AddStringToObject(p, DLK_PROGRESS_RUN, r->trun.id);
	s = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	dir = dlk_runs_local_dir(r->o->run.spec_file, r->spec->name);
	path = xasprintf("%s/%s", dir, DLK_PROGRESS_FILE);
	if (dlk_write_file_atomic(path, s, strlen(s), 0644, &err) && !r->progress_warned++)
		dlk_trainer_warn(r->sink, "the progress is not written for `dlk top` (training goes on): %s", err.msg);
	free(path);
	free(dir);
	free(s);
}

/* The run's model FLOP utilisation in its record ("mfu"), when the model's FLOPs are known: the
 * training FLOPs per sample, the gang's FLOP/s over the run's steps (this rank's throughput
 * times the ranks: they move in step), and with a known peak, the peak of every rank's device,
 * how it was found, and their ratio. */
static void record_mfu(struct here *r, const struct dlk_train_result *res)
{
	double flops = r->flops_per_sample * res->train_samples_per_sec * r->world;
	cJSON *o;

	if (!r->trun.rec || !(r->flops_per_sample > 0) || !(flops > 0))
		return;
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "flops_per_sample", r->flops_per_sample);
	cJSON_AddNumberToObject(o, "flops_per_second", round(flops));
	if (r->peak.flops > 0) {
		cJSON_AddNumberToObject(o, "peak_flops_per_second", r->peak.flops * r->world);
		cJSON_AddStringToObject(o, "peak", r->peak.source);
		cJSON_AddNumberToObject(o, "mfu", round(flops / (r->peak.flops * r->world) * 1e5) / 1e5);
	}
	dlk_run_set_item(r->trun.rec, "mfu", o);
}

static void on_event(void *vctx, const struct dlk_train_event *ev0)
{
	struct here *r = vctx;
	struct dlk_train_event evc = *ev0;
	const struct dlk_train_event *ev = &evc;
	int resize = ev0->kind == DLK_TRAIN_STEP && !r->resize_to ? resized(r, 0) : 0;
	float *buf = NULL;
	double *rank_phase = NULL;

	if (r->comm && ev0->kind != DLK_TRAIN_DONE && !r->comm_failed) {
		/* every rank sees every step and epoch event: agree on stopping (a signal, or rank 0
		 * seeing the job resized), and show the loss of the whole global batch rather than
		 * rank 0's share of it */
		/* and gather every rank's step time split (its own slot, zeros elsewhere: the sum is
		 * all of them), for the progress and `dlk top` */
		/* and every rank's GPU sample (GPU_FLOATS a rank, after the phases) */
		int nr = r->world < DLK_PROGRESS_MAX_RANKS ? r->world : DLK_PROGRESS_MAX_RANKS;
		size_t at_gpu = 3 + (size_t)nr * DLK_PHASES, nbuf = at_gpu + (size_t)nr * GPU_FLOATS;
		buf = xcalloc(nbuf, sizeof(float));
		buf[0] = (float)ev0->loss;
		buf[1] = sig_seen ? 1.0f : 0.0f;
		buf[2] = (float)resize;
		if (r->rank < nr)
			for (int k = 0; k < DLK_PHASES; k++)
				buf[3 + (size_t)r->rank * DLK_PHASES + (size_t)k] = (float)ev0->phase_sec[k];
		sample_gpu(r, 0);
		if (r->rank < nr)
			gpu_floats(r, buf + at_gpu + (size_t)r->rank * GPU_FLOATS);
		if (comm_allreduce(r->comm, buf, nbuf, COMM_SUM, &r->comm_err)) {
			r->comm_failed = 1;
			stop_flag = 1;
			free(buf);
			return;
		}
		rank_phase = xcalloc((size_t)nr * DLK_PHASES, sizeof(double));
		for (size_t i = 0; i < (size_t)nr * DLK_PHASES; i++)
			rank_phase[i] = buf[3 + i];
		evc.rank_phase_sec = rank_phase;
		evc.n_rank_phases = nr;
		/* kept for the end's event, which is not gathered */
		r->kept_phase = xrealloc(r->kept_phase, sizeof(double) * (size_t)nr * DLK_PHASES);
		memcpy(r->kept_phase, rank_phase, sizeof(double) * (size_t)nr * DLK_PHASES);
		r->n_kept_phase = nr;
		keep_gpus(r, buf + at_gpu, nr);
		evc.loss = (double)buf[0] / r->world;
		evc.samples_per_sec *= r->world; /* rank 0's pace stands for every rank's: they move in step */
		if (buf[1] > 0 && buf[2] == 0 && r->world > 1) {
			/* a signal: when scaling down, the Job controller stops the pods past the new
			 * size; rank 0 reads the Job's size at once, and the ranks agree on it, so that
			 * the rest stop as for a resize (76), not as for a lost peer (75) */
			float n = 0;
			if (r->rank == 0)
				n = (float)resized(r, 1);
			if (comm_broadcast(r->comm, &n, sizeof(n), 0, &r->comm_err)) {
				r->comm_failed = 1;
				stop_flag = 1;
				free(buf);
				free(rank_phase);
				return;
			}
			buf[2] = n;
		}
		if (buf[1] > 0)
			stop_flag = 1;
		if (buf[2] > 0) {
			r->resize_to = (int)buf[2];
			stop_flag = 1;
		}
		comm_set_step(r->comm, ev0->global_step + 1); /* named by the watchdog in its messages */
		if (r->dcomm)
			comm_set_step(r->dcomm, ev0->global_step + 1);
	}
	else {
		if (resize) {
			r->resize_to = resize;
			stop_flag = 1;
		}
		/* one rank (or the end's event, which is not gathered): its own sample */
		if (r->gpu && (!r->comm || r->world == 1)) {
			float f[GPU_FLOATS] = { 0 };
			sample_gpu(r, ev0->kind == DLK_TRAIN_DONE);
			gpu_floats(r, f);
			keep_gpus(r, f, 1);
			if (r->n_kept_gpu)
				r->kept_gpu[0].rank = r->rank;
		}
	}
	/* the gang's FLOP/s: the steps' and epochs' throughput is the gang's by now, the end's is
	 * this rank's (ranks move in step) */
	evc.flops_per_sample = r->flops_per_sample;
	evc.flops = r->flops_per_sample * evc.samples_per_sec * (ev0->kind == DLK_TRAIN_DONE ? r->world : 1);
	evc.peak_flops = r->peak.flops * r->world;
	if (!evc.rank_phase_sec && r->kept_phase) {
		evc.rank_phase_sec = r->kept_phase;
		evc.n_rank_phases = r->n_kept_phase;
	}
	if (r->n_kept_gpu) {
		evc.rank_gpu = r->kept_gpu;
		evc.n_rank_gpu = r->n_kept_gpu;
	}
	free(buf);
	dlk_train_metrics_event(r->metrics, ev);
	if (r->rank == 0) {
		if (r->jp) {
			char *m = ev->kind != DLK_TRAIN_STEP ? metrics_json(r, ev0) : NULL;
			dlk_job_progress_event(r->jp, ev, m);
			free(m);
		}
		local_progress(r, ev);
		if (r->sink->event)
			r->sink->event(r->sink->ud, ev);
	}
	free(rank_phase);
}

static void clear(const struct here *r)
{
	if (r->sink->clear)
		r->sink->clear(r->sink->ud);
}

/* ---- data ---- */

static int data_progress(void *vctx, const char *what, unsigned long long done, unsigned long long total)
{
	struct here *r = vctx;

	if (r->sink->data)
		r->sink->data(r->sink->ud, r->phase, what, done, total);
	return sig_seen != 0;
}

/* ---- checkpoints ---- */

/* the test hooks' write: slowed by ckpt_delay_ms, and a full volume once a checkpoint wrote
 * ckpt_space bytes (both > 0 when set) */
static ssize_t test_write(int fd, const void *buf, size_t len, void *vctx)
{
	struct here *r = vctx;

	if (r->ckpt_delay_ms > 0) {
		struct timespec ts = { r->ckpt_delay_ms / 1000, (r->ckpt_delay_ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (r->ckpt_space > 0) {
		if (r->ckpt_written >= r->ckpt_space) {
			errno = ENOSPC;
			return -1;
		}
		if (len > (size_t)(r->ckpt_space - r->ckpt_written))
			len = (size_t)(r->ckpt_space - r->ckpt_written);
	}
	ssize_t w = write(fd, buf, len);
	if (w > 0)
		r->ckpt_written += w;
	return w;
}

static void ensure_arch(struct here *r, const struct dlk_net *net)
{
	if (!r->have_arch) {
		dlk_net_arch_digest(net, r->meta.arch);
		r->have_arch = 1;
	}
}

/* What moves between ranks over the host ring outside the steps (ZeRO-1's whole optimizer state
 * between rank 0 and the shards, a resumed state from rank 0) goes in broadcasts of at most this
 * many floats (4 MiB): a rank holds one piece in transit, not a copy of the whole. */
#define RING_PIECE ((size_t)1 << 20)

static int host_memory(const struct here *r);

/* ZeRO-1's moments between the ranks, in a fixed order of pieces: m then v; the shards of ranks
 * 1..world-1 in turn; RING_PIECE floats at a time. to_root (a checkpoint): each piece broadcast
 * from its rank towards rank 0, which takes them through struct zero_fill, not here. Else (a
 * resume): from rank 0, whose `whole` moments (the checkpoint it loaded, host memory) give them.
 * A rank sends and receives its own pieces in place when its memory is the host's and lets the
 * others' pass through its scratch piece. */
static int zero_pieces(struct here *r, struct dlk_optimizer *own, int to_root, const float *const whole[2],
                       struct dlk_err *err)
{
	float *scratch = xmalloc(sizeof(float) * RING_PIECE);
	int rc = 0, host = host_memory(r);

	for (int which = 0; which < 2 && !rc; which++) {
		float *mine = which ? own->v : own->m;
		if (!mine)
			continue;
		for (int q = 1; q < r->world && !rc; q++) {
			size_t off, len;
			comm_shard(own->n, r->world, q, &off, &len);
			for (size_t at = 0; at < len && !rc; at += RING_PIECE) {
				size_t k = len - at < RING_PIECE ? len - at : RING_PIECE;
				int root = to_root ? q : 0;
				float *buf = r->rank == q && host ? mine + at : scratch;
				if (r->rank == root && buf == scratch) {
					if (to_root)
						r->be->to_host(scratch, mine + at, sizeof(float) * k);
					else
						memcpy(scratch, whole[which] + off + at, sizeof(float) * k);
				}
				rc = comm_broadcast(r->comm, buf, sizeof(float) * k, root, err);
				if (!rc && !to_root && r->rank == q && buf == scratch)
					r->be->to_device(mine + at, scratch, sizeof(float) * k);
			}
		}
	}
	free(scratch);
	return rc;
}

/* ZeRO-1's checkpoint on rank 0: the whole moments are written as they arrive, never whole in
 * memory. The pieces come in zero_pieces' order (m then v; ranks 1..world-1; RING_PIECE
 * floats at a time), which the other ranks follow; rank 0's own shard, the moments' first
 * floats, is read where it is. */
struct zero_fill {
	struct here *r;
	struct dlk_optimizer *own;
	int which, q, done; /* the next piece: of moment `which` (0 m, 1 v), in rank q's shard... */
	size_t at;          /* ... from its float `at`; done: none left */
	float *piece;       /* the piece received last: floats [p_lo, p_hi) of moment p_which */
	int p_which;
	size_t p_lo, p_hi, pos[2]; /* pos: the floats of each moment given to the writer so far */
	int failed;         /* a broadcast failed (err): the ring is broken */
	struct dlk_err err;
};

/* moves the cursor past moments this optimizer has not and shards that are empty */
static void zf_settle(struct zero_fill *z)
{
	while (!z->done) {
		size_t off, len;
		if (z->which > 1) {
			z->done = 1;
			return;
		}
		if (!(z->which ? z->own->v : z->own->m) || z->q >= z->r->world) {
			z->which++, z->q = 1, z->at = 0;
			continue;
		}
		comm_shard(z->own->n, z->r->world, z->q, &off, &len);
		if (z->at < len)
			return;
		z->q++, z->at = 0;
	}
}

static void zf_init(struct zero_fill *z, struct here *r, struct dlk_optimizer *own)
{
	memset(z, 0, sizeof(*z));
	z->r = r;
	z->own = own;
	z->q = 1;
	z->p_which = -1;
	z->piece = xmalloc(sizeof(float) * RING_PIECE);
	zf_settle(z);
}

/* receives the next piece of the sequence from its rank */
static int zf_next(struct zero_fill *z)
{
	size_t off, len, k;

	comm_shard(z->own->n, z->r->world, z->q, &off, &len);
	k = len - z->at < RING_PIECE ? len - z->at : RING_PIECE;
	if (comm_broadcast(z->r->comm, z->piece, sizeof(float) * k, z->q, &z->err)) {
		z->failed = 1;
		return -1;
	}
	z->p_which = z->which;
	z->p_lo = off + z->at;
	z->p_hi = z->p_lo + k;
	z->at += k;
	zf_settle(z);
	return 0;
}

/* the checkpoint writer's next len bytes of moment `which` */
static int zf_fill(void *ctx, int which, void *buf, size_t len, struct dlk_err *err)
{
	struct zero_fill *z = ctx;
	float *out = buf;
	const float *mine = which ? z->own->v : z->own->m;
	size_t p = z->pos[which], nf = len / sizeof(float), off0, len0;

	comm_shard(z->own->n, z->r->world, 0, &off0, &len0);
	while (nf) {
		size_t k;
		if (p < len0) {
			k = nf < len0 - p ? nf : len0 - p;
			z->r->be->to_host(out, mine + p, sizeof(float) * k);
		} else {
			if (!(z->p_which == which && p >= z->p_lo && p < z->p_hi)) {
				if (z->failed || z->done || zf_next(z)) {
					if (!z->failed)
						return dlk_errf(err, DLK_EXIT_FAIL, "ZeRO-1: no piece left for float %zu of the optimizer's state", p);
					*err = z->err;
					return -1;
				}
				if (!(z->p_which == which && p >= z->p_lo && p < z->p_hi))
					return dlk_errf(err, DLK_EXIT_FAIL, "ZeRO-1: the shards' pieces came out of order (float %zu)", p);
			}
			k = nf < z->p_hi - p ? nf : z->p_hi - p;
			memcpy(out, z->piece + (p - z->p_lo), sizeof(float) * k);
		}
		out += k, p += k, nf -= k;
	}
	z->pos[which] = p;
	return 0;
}

/* Every training.checkpoint_every steps, at epoch ends and when stopping: rank 0 writes. A
 * checkpoint that cannot be written is a warning, not the end of the run; with ZeRO-1 the
 * collectives that bring rank 0 the shards run to their end whatever the write did, and a
 * broken ring ends the run. */
static int on_checkpoint(void *vctx, const struct dlk_train_state *st, struct dlk_err *err)
{
	struct here *r = vctx;
	int sharded = st->opt->sharded;
	struct zero_fill zf;
	struct dlk_state_moments mv = { zf_fill, &zf };

	if (sharded && r->rank != 0) {
		/* this rank's shard to rank 0, piece by piece */
		struct dlk_err e = DLK_ERR_INIT;
		if (!r->comm_failed && zero_pieces(r, st->opt, 1, NULL, &e)) {
			r->comm_failed = 1;
			r->comm_err = e;
		}
		goto out;
	}
	if (sharded && r->comm_failed) {
		if (r->ckpt_dir && !r->ckpt_warned++)
			dlk_trainer_warn(r->sink, "checkpoint at step %ld not written: the optimizer's shards cannot be gathered: %s",
			                 st->global_step, r->comm_err.msg);
		goto out;
	}
	if (sharded)
		zf_init(&zf, r, st->opt);
	if (r->rank == 0 && r->ckpt_dir) {
		struct dlk_err e = DLK_ERR_INIT;
		struct ckpt_write_opts wo = CKPT_WRITE_OPTS_INIT;
		if (r->ckpt_delay_ms > 0 || r->ckpt_space > 0) {
			wo.write_fn = test_write;
			wo.write_ctx = r;
			r->ckpt_written = 0;
		}
		ensure_arch(r, st->net);
		if (dlk_state_save(r->ckpt_dir, r->ckpt_keep, st, &r->meta, &wo, sharded ? &mv : NULL, &e)) {
			if (!r->ckpt_warned++)
				dlk_trainer_warn(r->sink, "checkpoint at step %ld not written%s: %s%s%s", st->global_step,
				                 sharded && zf.failed ? ": the optimizer's shards cannot be gathered" :
				                                        " (training goes on)",
				                 e.msg, e.hint[0] ? "; " : "", e.hint);
		} else {
			r->ckpt_step = st->global_step;
			if (r->o->verbose)
				dlk_trainer_info(r->sink, "checkpoint: step %ld in '%s'", st->global_step, r->ckpt_dir);
		}
	}
	if (sharded) {
		/* the pieces the writer did not take (it failed, or there is no directory) */
		while (!zf.failed && !zf.done)
			zf_next(&zf);
		if (zf.failed) {
			r->comm_failed = 1;
			r->comm_err = zf.err;
		}
		free(zf.piece);
	}
out:
	if (r->comm_failed) {
		*err = r->comm_err;
		return -1;
	}
	return 0;
}

/* What rank 0 tells the others about the checkpoint it resumed from. */
enum { RESUME_NONE = 0, RESUME_LOADED = 1, RESUME_FAILED = 2 };

/* Rank 0's n floats of the backend's memory to every rank: in place when that memory is the
 * host's, else through a host buffer of one piece (RING_PIECE floats) at a time. */
static int bcast_floats(struct dlk_comm *c, float *dev, size_t n, const struct dlk_backend *be, struct dlk_err *err)
{
	float *h;
	int rc = 0;

	if (be == dlk_backend_cpu())
		return comm_broadcast(c, dev, sizeof(float) * n, 0, err);
	h = xmalloc(sizeof(float) * (n < RING_PIECE ? (n ? n : 1) : RING_PIECE));
	for (size_t at = 0; at < n && !rc; at += RING_PIECE) {
		size_t k = n - at < RING_PIECE ? n - at : RING_PIECE;
		if (comm_rank(c) == 0)
			be->to_host(h, dev + at, sizeof(float) * k);
		rc = comm_broadcast(c, h, sizeof(float) * k, 0, err);
		if (!rc && comm_rank(c) != 0)
			be->to_device(dev + at, h, sizeof(float) * k);
	}
	free(h);
	return rc;
}

/* Rank 0's resume header, broadcast so that every rank has the same; a rank other than 0 fails
 * when rank 0 could not resume (rank 0's own error says why). */
static int share_resume_header(struct here *r, long long *hdr, size_t size, struct dlk_err *err)
{
	struct dlk_err e = DLK_ERR_INIT;

	if (!r->comm)
		return 0;
	if (comm_broadcast(r->comm, hdr, size, 0, &e)) {
		*err = e;
		return -1;
	}
	if (hdr[0] == RESUME_FAILED && r->rank != 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "rank 0 could not resume from the checkpoints (its log says why)");
	return 0;
}

/* Before the loop: rank 0 loads the newest checkpoint that verifies (kept for on_resume) and
 * every rank learns the per-worker batch from it. A checkpoint written at another world size
 * goes on with the same global batch: its world x batch split over this world. */
static int prepare_resume(struct here *r, struct dlk_training *tr, struct dlk_err *err)
{
	long long hdr[3] = { RESUME_NONE, tr->batch_size, 0 };

	if (r->rank == 0 && r->ckpt_dir) {
		int got = ckpt_load_latest(r->ckpt_dir, 0, &r->ckpt, err);
		int cw = 0, cb = 0, b = 0;
		for (size_t i = 0; i < r->ckpt.nwarnings; i++)
			dlk_trainer_warn(r->sink, "%s", r->ckpt.warnings[i]);
		if (got < 0) {
			dlk_err_prefix(err, "cannot resume from '%s'", r->ckpt_dir);
			hdr[0] = RESUME_FAILED;
		} else if (got == 1) {
			if (dlk_state_peek(&r->ckpt, &cw, &cb, err) || dlk_state_elastic_batch(cw, cb, r->world, &b, err)) {
				if (cw)
					dlk_err_prefix(err, "checkpoint '%s' (step %llu)", r->ckpt.path, r->ckpt.step);
				hdr[0] = RESUME_FAILED;
			} else {
				hdr[0] = RESUME_LOADED;
				hdr[1] = b;
				hdr[2] = cw;
			}
		}
		if (hdr[0] != RESUME_LOADED)
			ckpt_release(&r->ckpt);
	}
	if (share_resume_header(r, hdr, sizeof(hdr), err))
		return -1;
	if (hdr[0] == RESUME_FAILED)
		return -1;
	r->ckpt_world = (int)hdr[2];
	tr->batch_size = (int)hdr[1];
	r->meta.batch_size = tr->batch_size;
	return 0;
}

static int on_resume_whole(struct here *r, struct dlk_train_state *st, int sharded, struct dlk_err *err);

/* ZeRO-1 resumed: rank 0, whose own shard the restore filled from the checkpoint it loaded (still
 * held), hands every other rank its shard of the whole moments there (zero_pieces). */
static int zero_scatter_loaded(struct here *r, struct dlk_optimizer *own, struct dlk_err *err)
{
	const float *whole[2] = { NULL, NULL };

	if (r->rank == 0) {
		whole[0] = ckpt_get(&r->ckpt, "optim_m.f32", NULL);
		whole[1] = ckpt_get(&r->ckpt, "optim_v.f32", NULL);
		/* the restore checked both against the optimizer: never missing here */
		if ((own->m && !whole[0]) || (own->v && !whole[1]))
			return dlk_errf(err, DLK_EXIT_FAIL, "checkpoint '%s': the optimizer's moments are gone", r->ckpt.path);
	}
	return zero_pieces(r, own, 0, whole, err);
}

/* A checkpoint holds the whole optimizer state (see on_checkpoint). Unsharded, rank 0 restores
 * it and broadcasts it whole. ZeRO-1: rank 0 restores its own shard and scatters the others from
 * the checkpoint it loaded; no rank holds the whole state beyond that loaded copy. */
static int on_resume(void *vctx, struct dlk_train_state *st, struct dlk_err *err)
{
	struct here *r = vctx;
	int sharded = st->opt->sharded, rc;

	rc = on_resume_whole(r, st, sharded, err);
	if (rc == 1 && sharded && zero_scatter_loaded(r, st->opt, err))
		rc = -1;
	if (sharded)
		ckpt_release(&r->ckpt);
	return rc;
}

/* Rank 0 restores the checkpoint prepare_resume loaded and broadcasts it (the optimizer's state
 * too, unless sharded: then each rank's shard goes to it after this, from the loaded checkpoint,
 * which rank 0 keeps for that), so that ranks never disagree on where they resume. */
static int on_resume_whole(struct here *r, struct dlk_train_state *st, int sharded, struct dlk_err *err)
{
	long long hdr[8] = { RESUME_NONE, 0, 0, 0, 0, 0, 0, 0 };
	unsigned long long dc = 0;
	int rc = -1;

	ensure_arch(r, st->net);
	if (r->rank == 0 && r->ckpt.path) {
		struct ckpt *c = &r->ckpt;
		if (dlk_state_restore(c, st, &r->meta, err)) {
			hdr[0] = RESUME_FAILED;
		} else {
			hdr[0] = RESUME_LOADED;
			r->ckpt_step = st->global_step;
			char who[64] = "";
			if (r->trun.id[0])
				snprintf(who, sizeof(who), " run %.8s", r->trun.id);
			if (st->epoch >= r->epochs)
				dlk_trainer_info(r->sink, "checkpoint '%s' is of the finished%s (%ld steps): nothing left to train", c->path,
				         who[0] ? who : " run", st->global_step);
			else if (r->ckpt_world != r->world)
				dlk_trainer_info(r->sink,
				         "resuming%s from checkpoint %ld at %d worker%s (was %d), batch %d per worker, global %lld",
				         who, st->global_step, r->world, r->world == 1 ? "" : "s", r->ckpt_world,
				         r->meta.batch_size, (long long)r->meta.batch_size * r->world);
			else
				dlk_trainer_info(r->sink, "resuming%s from checkpoint '%s' (epoch %d, step %ld of the epoch, %ld steps done)",
				         who, c->path, st->epoch + 1, st->step_in_epoch, st->global_step);
		}
		/* the params are on the device now: the loaded copy is not kept through the run (ZeRO-1:
		 * until the shards are handed out) */
		if (!sharded || hdr[0] != RESUME_LOADED)
			ckpt_release(c);
		hdr[1] = st->epoch;
		hdr[2] = st->step_in_epoch;
		hdr[3] = st->global_step;
		hdr[4] = st->opt->t;
		memcpy(&hdr[5], &st->net->dropout_counter, sizeof(dc));
		hdr[6] = st->sched_spe;
		hdr[7] = st->sched_total;
	}
	if (share_resume_header(r, hdr, sizeof(hdr), err))
		return -1;
	if (r->comm) {
		struct dlk_err e = DLK_ERR_INIT;
		if (hdr[0] == RESUME_LOADED) {
			const struct dlk_backend *be = st->net->be;
			if (bcast_floats(r->comm, st->net->params, st->net->n_params, be, &e) ||
			    (!sharded && st->opt->m && bcast_floats(r->comm, st->opt->m, st->opt->n, be, &e)) ||
			    (!sharded && st->opt->v && bcast_floats(r->comm, st->opt->v, st->opt->n, be, &e))) {
				*err = e;
				return -1;
			}
			st->epoch = (int)hdr[1];
			st->step_in_epoch = (long)hdr[2];
			st->global_step = (long)hdr[3];
			st->opt->t = (long)hdr[4];
			memcpy(&dc, &hdr[5], sizeof(dc));
			st->net->dropout_counter = dc;
			st->sched_spe = (long)hdr[6];
			st->sched_total = (long)hdr[7];
		}
	}
	if (hdr[0] == RESUME_FAILED)
		return -1;
	rc = hdr[0] == RESUME_LOADED;
	return rc;
}

/* ---- gradients ---- */

/* The backend's memory is host memory (the CPU's): the TCP ring can reduce it in place. */
static int host_memory(const struct here *r)
{
	return r->be == dlk_backend_cpu();
}

static void on_grad_ready(void *vctx, float *grads, size_t n_params, size_t off, size_t n)
{
	struct here *r = vctx;

	if (!r->grad_failed && comm_grads_ready(r->dcomm, grads, n_params, off, n, 0, COMM_AVG, &r->grad_err))
		r->grad_failed = 1;
}

static int allreduce(void *vctx, float *grads, size_t n, struct dlk_err *err)
{
	struct here *r = vctx;
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

/* The all-reduce, timed for the metrics: what the step waited for, and the bytes reduced. */
static int on_allreduce(void *vctx, float *grads, size_t n, struct dlk_err *err)
{
	struct here *r = vctx;
	double t0 = r->metrics ? dlk_now() : 0;
	int rc = allreduce(vctx, grads, n, err);

	if (r->metrics && !rc)
		dlk_train_metrics_allreduce(r->metrics, dlk_now() - t0, (double)n * sizeof(float), r->world);
	return rc;
}

/* Every rank's count, over the host ring: one 8-byte broadcast from each rank in turn. */
static int on_gather_counts(void *vctx, unsigned long long mine, unsigned long long *counts, struct dlk_err *err)
{
	struct here *r = vctx;

	for (int i = 0; i < r->world; i++) {
		unsigned char b[8];
		for (int k = 0; k < 8; k++)
			b[k] = (unsigned char)(mine >> (56 - 8 * k));
		if (comm_broadcast(r->comm, b, sizeof(b), i, err))
			return -1;
		counts[i] = 0;
		for (int k = 0; k < 8; k++)
			counts[i] = counts[i] << 8 | b[k];
	}
	return 0;
}

static int on_broadcast(void *vctx, float *params, size_t n, struct dlk_err *err)
{
	struct here *r = vctx;

	if (r->dcomm)
		return comm_broadcast(r->dcomm, params, sizeof(float) * n, 0, err);
	if (host_memory(r))
		return comm_broadcast(r->comm, params, sizeof(float) * n, 0, err);
	return bcast_floats(r->comm, params, n, r->be, err);
}

/* ---- ZeRO-1 ---- */

/* A reduce-scatter (the mean) or, with ag, an all-gather over n floats of the backend's memory:
 * on the device communicator, in place on the host ring, or through a host copy. */
static int zero_coll(struct here *r, int ag, float *buf, size_t n, struct dlk_err *err)
{
	struct dlk_comm *c = r->dcomm ? r->dcomm : r->comm;
	float *h = buf;
	int rc;

	if (!r->dcomm && !host_memory(r)) {
		if (!r->stage)
			r->stage = xmalloc(sizeof(float) * (n ? n : 1)); /* n is the parameter count, always */
		h = r->stage;
		r->be->to_host(h, buf, sizeof(float) * n);
	}
	rc = ag ? comm_allgather(c, h, n, err) : comm_reduce_scatter(c, h, n, COMM_AVG, err);
	if (!rc && h != buf)
		r->be->to_device(buf, h, sizeof(float) * n);
	return rc;
}

static void on_zero_shard(void *vctx, size_t n, size_t *off, size_t *len)
{
	const struct here *r = vctx;

	comm_shard(n, r->world, r->rank, off, len);
}

/* The gradients' reduce-scatter, timed for the metrics as the all-reduce is (it moves half). */
static int on_zero_reduce_scatter(void *vctx, float *grads, size_t n, struct dlk_err *err)
{
	struct here *r = vctx;
	double t0 = r->metrics ? dlk_now() : 0;
	int rc = zero_coll(r, 0, grads, n, err);

	if (r->metrics && !rc)
		dlk_train_metrics_allreduce(r->metrics, dlk_now() - t0, (double)n * sizeof(float) / 2, r->world);
	return rc;
}

static int on_zero_allgather(void *vctx, float *params, size_t n, struct dlk_err *err)
{
	return zero_coll(vctx, 1, params, n, err);
}

static int on_zero_sum(void *vctx, double *v, struct dlk_err *err)
{
	struct here *r = vctx;
	float f = (float)*v;

	if (comm_allreduce(r->comm, &f, 1, COMM_SUM, err))
		return -1;
	*v = f;
	return 0;
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
static int join_gang(struct here *r, const struct dist_env *env, int dev_shared, struct dlk_err *err)
{
	struct dist_rdzv_opts o = DIST_RDZV_OPTS_INIT;
	const char *job = getenv(DLK_ENV_JOB_NAME), *uid = getenv(DLK_ENV_RUN_ID), *comm_env = getenv(DLK_ENV_COMM);
	const struct dlk_device_comm *dc;
	char *run_id;
	int bad = 0, rc;
	long gen = env_long(DLK_ENV_GENERATION, 0, 0, UINT_MAX, err, &bad);
	long lfd = env_long(DLK_ENV_LISTEN_FD, -1, -1, INT_MAX, err, &bad);
	long tmo = env_long(DLK_ENV_RENDEZVOUS_TIMEOUT, 300, 1, 86400, err, &bad);
	long stall = env_long(DLK_ENV_STALL_TIMEOUT, 300, 1, 86400, err, &bad);

	if (bad)
		return -1;
	/* a pod of one rank retried after the others completed: no rendezvous would ever form */
	if (!getenv(DLK_ENV_LOCAL_RANK) && dlk_train_gang_gone(r->sink, env->rank, err))
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

/* ---- the run ---- */

/* A worker's place in the gang and its threads, from the environment the Job (or the local
 * gang) gives it. */
static int read_worker_env(struct here *r, struct dist_env *env, struct dlk_training *tr, struct dlk_err *err)
{
	int bad = 0;

	if (dist_env_read(env, err))
		return -1;
	r->rank = env->rank;
	r->world = env->world;
	r->local_world = env->local_world > 0 ? env->local_world : 1;
	single_rank = env->world == 1;
	if (getenv(DLK_ENV_THREADS) && !tr->threads)
		tr->threads = (int)env_long(DLK_ENV_THREADS, 0, 0, 4096, err, &bad);
	return bad ? -1 : 0;
}

/* What the model computes on: the project's GPUs are required in a pod that was given them,
 * wanted (not required) when training here; DLK_DEVICE overrides. */
static int choose_device(struct here *r, const struct dlk_project *spec, int worker, const struct dist_env *env,
                         struct dlk_device_choice *dev, struct dlk_err *err)
{
	enum dlk_device_kind want = spec->resources.gpus <= 0 ? DLK_DEVICE_CPU
	                            : worker && getenv(DLK_ENV_SERVICE_HOST) ? DLK_DEVICE_CUDA : DLK_DEVICE_AUTO;

	if (dlk_device_wanted(want, &want, err) || dlk_backend_select(want, env->local_rank, env->local_world, dev, err))
		return -1;
	r->be = dev->be;
	if (dev->why[0] && want == DLK_DEVICE_AUTO && spec->resources.gpus > 0 && r->rank == 0)
		dlk_trainer_warn(r->sink, "training on the CPU: %s", dev->why);
	else if (r->o->verbose && r->rank == 0)
		dlk_trainer_info(r->sink, "computing on %s", dev->be->device);
	{
		const char *emulate = getenv(DLK_ENV_TEST_BF16_EMULATE);
		dlk_bgemm_force_emulation(emulate && !strcmp(emulate, "1"));
	}
	if (spec->training.precision == DLK_PRECISION_BF16 && dev->be == dlk_backend_cpu() && r->rank == 0) {
		int convs = 0;
		for (int i = 0; i < spec->model.n_layers; i++)
			convs += spec->model.layers[i].kind == DLK_LAYER_CONV2D && spec->model.layers[i].groups <= 1;
		if (!dlk_bgemm_native())
			dlk_trainer_warn(r->sink, "training.precision: bf16: this CPU has no AVX512_BF16 instructions, so the "
			                 "products are emulated, with the same rounding, no faster than fp32");
		else if (r->o->verbose)
			dlk_trainer_info(r->sink, "products in bf16 on AVX512_BF16, summed in fp32");
		if (convs && !dlk_bgemm_native()) /* cpu_conv.c's bf16 runs on AVX512_BF16 only */
			dlk_trainer_warn(r->sink, "training.precision: bf16: without AVX512_BF16 the CPU computes conv2d "
			                 "layers in fp32 (%d of this model's), not faster", convs);
	}
	return 0;
}

/* data.images.noise: the PSNR of the noisy inputs against their targets, the test metric's
 * (lib/train/metrics.h), a denoiser that returned its input unchanged */
static double noisy_psnr(const struct dlk_dataset *ds)
{
	size_t k = ds->sample_size, chunk = 1024, n;
	float *x = xmalloc(sizeof(float) * chunk * (k ? k : 1)), *t = xmalloc(sizeof(float) * chunk * (k ? k : 1));
	double sum = 0;

	for (size_t at = 0; at < ds->n; at += n) {
		n = ds->n - at < chunk ? ds->n - at : chunk;
		dlk_dataset_noisy_pixels(ds, at, n, x);
		dlk_dataset_targets(ds, NULL, at, n, t);
		sum += dlk_metrics_psnr(x, t, n, k, 1.0) * (double)n;
	}
	free(x);
	free(t);
	return sum / (double)ds->n;
}

/* The training data, and on rank 0 the test data (only rank 0 evaluates), with progress. A
 * signal stops the download: that is an error that says so. */
static int load_data(struct here *r, const struct dlk_project *spec, const char *dir, int worker,
                     struct dlk_dataset *train, struct dlk_dataset *test, struct dlk_err *err)
{
	struct dlk_data_opts dopts = { 0 };
	void *tdata = NULL;
	int rc = -1;

	memcpy(dopts.shape, spec->model.input, sizeof(dopts.shape));
	if (project_paired_images(&spec->data, spec->model.task)) {
		/* paired images (folders or shards): the targets are decoded to the model's output shape, which the engine
		 * infers (a throwaway build on the host: shapes only, the parameters zeroed) */
		struct dlk_net net;
		if (dlk_net_build(&net, &spec->model, r->o->run.spec_file, 0, dlk_backend_cpu(), err))
			goto out;
		memcpy(dopts.target_shape, net.layers[net.n_layers - 1].out, sizeof(dopts.target_shape));
		dlk_net_release(&net);
	}
	dopts.task = spec->model.task;
	dopts.memory = (unsigned long long)r->test_memory;
	/* pvc://CLAIM/PATH sources: where the pod mounts the claims (DLK_PVC_ROOT, else /mnt/pvc) */
	dopts.pvc_root = getenv(DLK_ENV_PVC_ROOT) && *getenv(DLK_ENV_PVC_ROOT) ? getenv(DLK_ENV_PVC_ROOT) : NULL;
	dopts.base_dir = dir;
	dopts.progress = data_progress;
	dopts.progress_ctx = r;
	/* data.shard: each rank of a gang loads only its part of the training split */
	if (spec->data.shard && r->world > 1) {
		dopts.shard_rank = r->rank;
		dopts.shard_world = r->world;
	}
	/* data.dataset: the sources are files of the dataset, read through the node cache */
	if (r->o->data.open && r->o->data.open(r->o->data.ud, spec, worker, dir, &dopts, &tdata, err))
		goto out;
	r->phase = "loading training data";
	if (dlk_data_load(&spec->data, "train", &dopts, train, err) && !sig_seen)
		goto out;
	r->phase = "loading test data";
	dopts.train = train; /* its tokenizer and class names (formats text and images) */
	if (!sig_seen && r->rank == 0 &&
	    (spec->data.test.images.url || spec->data.test.source.url || spec->data.test.shards ||
	     spec->data.validation > 0) &&
	    dlk_data_load(&spec->data, "test", &dopts, test, err) && !sig_seen)
		goto out;
	clear(r);
	if (sig_seen) {
		dlk_err_clear(err);
		dlk_errf(err, worker || sig_seen == SIGTERM ? DLK_EXIT_RESTARTABLE : DLK_EXIT_INTERRUPTED,
		         "stopped by a signal while loading the data");
		goto out;
	}
	if (r->o->data.loaded)
		r->o->data.loaded(r->o->data.ud, tdata, r->rank);
	if (train->sharded && r->o->verbose) {
		if (train->by_file)
			dlk_trainer_info(r->sink, "rank %d loaded its shard: files %d to %d of the training split (%zu samples)", r->rank,
			         train->files_first + 1, train->files_first + train->files_count, train->n);
		else
			dlk_trainer_info(r->sink, "rank %d loaded its shard: samples [%zu, %zu) of %zu", r->rank, train->base,
			         train->base + train->n, train->total);
	}
	for (int k = 0; k < 2; k++) {
		const struct dlk_dataset *d = k ? test : train;
		char dec[32], mem[32];
		if (!dlk_dataset_streams(d) || (k && r->rank))
			continue;
		/* what decoding once would have kept: inputs and paired targets, bytes */
		format_bytes((double)d->n * (double)(d->sample_size + (dlk_dataset_has_targets(d) && !d->t_from_x8 ? d->target_size : 0)),
		             dec, sizeof(dec));
		format_bytes((double)(r->test_memory > 0 ? (unsigned long long)r->test_memory : dlk_machine_memory()), mem,
		             sizeof(mem));
		if (spec->data.images.decode == DLK_DECODE_STREAM)
			dlk_trainer_info(r->sink, "%s split: %zu images read from disk and decoded each time they are used "
			                 "(data.images.decode: stream; decoded they would take %s)", k ? "test" : "training", d->n, dec);
		else
			dlk_trainer_info(r->sink, "%s split: %zu images read from disk and decoded each time they are used: decoded "
			                 "they would take %s, more than a quarter of the %s this process may use "
			                 "(data.images.decode: auto; 'once' keeps them)", k ? "test" : "training", d->n, dec, mem);
	}
	if (r->rank == 0 && test->n && test->t_from_x8 && test->aug.noise > 0)
		dlk_trainer_info(r->sink, "test inputs with noise of sigma %g: PSNR %.2f dB against their targets (the model's to beat)",
		                 (double)test->aug.noise, noisy_psnr(test));
	rc = 0;
out:
	if (tdata && r->o->data.close)
		r->o->data.close(r->o->data.ud, tdata);
	return rc;
}

/* The loop, wired to this file's callbacks. Returns 0 when it finished, -1 with err when it
 * failed or a signal stopped it (then err says whether a checkpoint was written). */
static int run_loop(struct here *r, const struct dlk_project *spec, const struct dlk_training *tr,
                    const char *spec_file, const struct dlk_dataset *train, const struct dlk_dataset *test, int worker,
                    struct dlk_train_result *res, struct dlk_err *err)
{
	struct dlk_train_opts topts = DLK_TRAIN_OPTS_INIT;
	int ran;

	topts.model = &spec->model;
	topts.training = tr;
	topts.loader_threads = spec->data.loader_threads;
	topts.spec_file = spec_file;
	topts.train = train;
	topts.test = test->n ? test : NULL;
	topts.backend = r->be;
	topts.rank = r->rank;
	topts.world = r->world;
	if (r->comm) {
		topts.allreduce = on_allreduce;
		topts.broadcast = on_broadcast;
		topts.gather_counts = on_gather_counts;
		/* the buckets that start during backward are all-reduces; ZeRO-1 reduce-scatters after it */
		if (r->dcomm && !tr->zero)
			topts.grad_ready = on_grad_ready;
		if (tr->zero) {
			topts.zero_shard = on_zero_shard;
			topts.zero_reduce_scatter = on_zero_reduce_scatter;
			topts.zero_allgather = on_zero_allgather;
			topts.zero_sum = on_zero_sum;
		}
		topts.comm_ctx = r;
	}
	topts.checkpoint = on_checkpoint;
	topts.resume = on_resume;
	topts.ckpt_ctx = r;
	topts.on_event = on_event;
	topts.on_start = on_start;
	topts.event_ctx = r;
	topts.cancel = &stop_flag;
	r->res = res;
	ran = dlk_train_run(&topts, res, err);
	clear(r);
	alarm(0);
	if (ran == 1 && r->resize_to) {
		if (r->rank == 0 && r->ckpt_step >= 0 && r->ckpt_step == res->steps)
			return dlk_errf(err, DLK_EXIT_RESIZED,
			                "the job was resized to %d workers: stopped after %ld steps with a checkpoint, to go on at "
			                "the new size", r->resize_to, res->steps);
		return dlk_errf(err, DLK_EXIT_RESIZED, "the job was resized to %d workers: stopped after %ld steps",
		                r->resize_to, res->steps);
	}
	if (ran == 1) {
		const char *what = sig_seen == SIGTERM ? "SIGTERM" : sig_seen == SIGINT ? "an interrupt" : "a signal to a peer";
		/* Ctrl-C of a run here is the user's: 128 + SIGINT, as a shell reports it; a worker (or
		 * SIGTERM) stops restartable, which its gang or Job resumes */
		int code = worker || sig_seen != SIGINT ? DLK_EXIT_RESTARTABLE : DLK_EXIT_INTERRUPTED;
		if (r->rank == 0 && r->ckpt_step >= 0 && r->ckpt_step == res->steps) {
			const char *hint = dlk_trainer_resume_hint(&r->o->run);
			dlk_errf(err, code, "training stopped by %s after %ld steps; checkpoint written", what, res->steps);
			return hint ? dlk_err_hint(err, "%s", hint) : -1;
		}
		return dlk_errf(err, code, "training stopped by %s after %ld steps", what, res->steps);
	}
	return ran < 0 ? -1 : 0;
}

/* The model bundle: the trained net with its metrics and provenance, at path; with --report, the
 * page drawn from the bundle as written, as `dlk report` would draw it. published (NULL: none)
 * is made the same file first when there is a page (the caller does it otherwise). */
static int write_bundle(const struct here *r, const char *path, const char *published, const char *page,
                        const struct dlk_train_result *res, struct dlk_err *err)
{
	struct dlk_bundle_info bi;
	cJSON *run;

	bundle_info(r, &bi, &res->net, res->eval.n ? &res->eval : NULL, res->train_loss, &res->history);
	bi.seed = res->seed;
	/* the run's first start: a resumed run began before this process */
	bi.started_at = res->history.n_events ? res->history.events[0].time : res->started_at;
	bi.finished_at = res->finished_at;
	bi.data = &r->spec->data;
	if (dlk_bundle_write(path, &bi, err))
		return -1;
	/* the page names the bundle the user knows (NAME.dlk), once it is that file */
	if (!page || (published && dlk_trainer_publish_bundle(path, published, err)))
		return page ? -1 : 0;
	if (published)
		path = published;
	run = report_run_from_bundle(path, err);
	if (!run || report_write_html(page, run, NULL, err)) {
		cJSON_Delete(run);
		return dlk_err_prefix(err, "--report '%s'", page);
	}
	cJSON_Delete(run);
	dlk_trainer_info(r->sink, "report: %s", page);
	return 0;
}

/* Prometheus metrics on GET /metrics: a worker serves on $DLK_METRICS_PORT + its local rank (the
 * Job passes resources.metrics_port; `--local --workers N` its --metrics-port), a run here with
 * --metrics-port on that port. Port 0: none. A port that cannot be bound is an error here (it
 * was asked for), a warning in a pod (training goes on without them). */
static int start_metrics(struct here *r, const struct dist_env *env, struct dlk_err *err)
{
	int bad = 0;
	long port = r->o->metrics_port;
	long gen = env_long(DLK_ENV_GENERATION, 0, 0, INT_MAX, err, &bad);
	const cJSON *restarts = r->trun.rec ? cJSON_GetObjectItemCaseSensitive(dlk_run_info(r->trun.rec), "restarts") : NULL;

	port = env_long(DLK_ENV_METRICS_PORT, port, 0, 65535, err, &bad);
	if (bad)
		return -1;
	if (!port)
		return 0;
	port += env->local_rank;
	if (port > 65535)
		return dlk_errf(err, DLK_EXIT_USAGE, "metrics port %ld (%s + local rank %d) is not a TCP port", port,
		                DLK_ENV_METRICS_PORT, env->local_rank);
	if (!gen && cJSON_IsNumber(restarts) && restarts->valuedouble > 0 && restarts->valuedouble < INT_MAX)
		gen = (long)restarts->valuedouble;
	r->metrics = dlk_train_metrics_start((int)port, r->rank, r->world, getenv(DLK_ENV_JOB_NAME), (int)gen, err);
	if (!r->metrics && r->o->run.in_pod && getenv(DLK_ENV_SERVICE_HOST)) {
		/* in a pod the metrics are a help: training goes on without them */
		dlk_trainer_warn(r->sink, "rank %d: no metrics (training goes on): %s", r->rank, err->msg);
		dlk_err_clear(err);
		return 0;
	}
	if (!r->metrics)
		return dlk_err_prefix(err, "rank %d", r->rank);
	if (r->o->verbose || (!r->o->run.in_pod && r->rank == 0))
		dlk_trainer_info(r->sink, "rank %d: metrics on http://127.0.0.1:%d%s", r->rank, dlk_train_metrics_port(r->metrics),
		         "/metrics");
	return 0;
}

int dlk_trainer_here(const struct dlk_trainer_here_opts *o, const struct dlk_project *spec,
                     const struct dlk_trainer_sink *sink, struct dlk_err *errp)
{
	struct dlk_err err = DLK_ERR_INIT;
	int worker = o->worker;
	struct dlk_dataset train = DLK_DATASET_INIT, test = DLK_DATASET_INIT;
	struct dlk_train_result res = DLK_TRAIN_RESULT_INIT;
	struct dlk_training tr = spec->training;
	struct here run = { 0 };
	struct dist_env env = { 0, 1, "", DIST_DEFAULT_PORT, 0, 1 };
	struct signals sigs = { 0 };
	struct dlk_device_choice dev;
	char *bundle = NULL, *run_bundle = NULL, *dir = dlk_dir_of(o->run.spec_file);
	/* --worker itself, not a child of --local --workers N (which is a worker too) */
	unsigned grace;
	int rc = 0, bad = 0;

	run.trun = (struct dlk_train_run)DLK_TRAIN_RUN_INIT;
	run.o = o;
	run.sink = sink;
	run.spec = spec;
	run.train = &train;
	run.test = &test;
	project_digest(spec, run.digest);
	/* which code made the model, when the project is kept in git (in a pod it is not) */
	if (dlk_git_head(dir, run.git_commit, &run.git_dirty)) {
		/* in a pod: what the submitter saw, as the Job passes it */
		const char *gc = getenv(DLK_ENV_GIT_COMMIT), *gd = getenv(DLK_ENV_GIT_DIRTY);
		size_t n = gc ? strspn(gc, "0123456789abcdef") : 0;
		run.git_commit[0] = '\0';
		if (worker && gc && (n == 40 || n == 64) && !gc[n]) {
			snprintf(run.git_commit, sizeof(run.git_commit), "%s", gc);
			run.git_dirty = gd && !strcmp(gd, "true");
		}
	}
	run.ckpt_step = -1;
	run.world = 1;
	grace = (unsigned)env_long(DLK_ENV_TERM_GRACE, 20, 1, 3600, &err, &bad);
	run.ckpt_delay_ms = env_long(DLK_ENV_TEST_CHECKPOINT_DELAY_MS, 0, 0, 60000, &err, &bad);
	run.ckpt_space = env_long(DLK_ENV_TEST_CHECKPOINT_SPACE, 0, 0, 1L << 40, &err, &bad);
	run.test_memory = env_long(DLK_ENV_TEST_MEMORY, 0, 0, LONG_MAX, &err, &bad);
	run.poll_sec = env_long(DLK_ENV_RESIZE_POLL, 10, 1, 3600, &err, &bad);
	run.local_world = 1;
	if (bad)
		goto fail;
	signals_install(&sigs, grace);
	if (worker && read_worker_env(&run, &env, &tr, &err))
		goto fail;
	if (choose_device(&run, spec, worker, &env, &dev, &err))
		goto fail;
	/* the GPU this rank computes on (or, computing on the CPU, was given) for its progress and
	 * metrics; none known is no error: the figures are a help */
	if (dev.device >= 0 || spec->resources.gpus > 0) {
		char why[DLK_ERR_MSG_MAX];
		run.gpu = dlk_gpu_probe_open(dev.device, env.local_rank, why, sizeof(why));
		if (!run.gpu && o->verbose)
			dlk_trainer_info(sink, "rank %d: no GPU figures: %s", run.rank, why);
		else if (run.gpu && o->verbose)
			dlk_trainer_info(sink, "rank %d: samples GPU %d (PCI %s)", run.rank, dlk_gpu_probe_index(run.gpu),
			                 dlk_gpu_probe_bus_id(run.gpu));
	}
	if (sink->placed && sink->placed(sink->ud, run.rank, run.world, &err))
		goto fail;
	/* the run: here, a new one or the interrupted one this continues; in a pod, the Job's */
	if (!worker) {
		if (dlk_train_run_open_local(&run.trun, sink, &o->run, spec, run.digest, 1, &err))
			goto fail;
	} else if (run.rank == 0) {
		dlk_train_run_open_cluster(&run.trun, sink, spec, run.digest, run.world);
	} else {
		dlk_train_run_open_worker(&run.trun, sink);
	}
	if (tr.checkpoint_dir) {
		char *base = dlk_trainer_ckpt_base(spec, o->run.spec_file, o->run.in_pod);
		/* every run has checkpoints of its own */
		run.ckpt_dir = dlk_train_run_ckpt_dir(&run.trun, base);
		free(base);
		if (run.trun.rec) {
			dlk_run_set_str(run.trun.rec, "checkpoint_dir", run.ckpt_dir);
			dlk_train_run_save(&run.trun);
		}
	}
	if (start_metrics(&run, &env, &err))
		goto fail;
	run.ckpt_keep = tr.checkpoint_keep;
	run.epochs = tr.epochs;
	run.meta.seed = tr.seed;
	run.meta.world = run.world;
	run.meta.batch_size = tr.batch_size;

	{
		double t0 = dlk_now();
		if (load_data(&run, spec, dir, worker, &train, &test, &err))
			goto fail;
		dlk_train_metrics_data_load(run.metrics, dlk_now() - t0);
	}
	if (worker && run.rank == 0 && spec->trigger == DLK_TRIGGER_DATA_CHANGED) {
		/* before the gang forms: rank 0's success completes the Job (its successPolicy) */
		cJSON *data = cJSON_CreateArray();
		const struct dlk_dataset *sets[2] = { &train, &test };
		for (int s = 0; s < 2; s++)
			for (int i = 0; i < sets[s]->n_sources; i++) {
				cJSON *d = cJSON_CreateObject();
				cJSON_AddStringToObject(d, "split", s ? "test" : "train");
				cJSON_AddStringToObject(d, "url", sets[s]->sources[i].url ? sets[s]->sources[i].url : "");
				cJSON_AddStringToObject(d, "sha256", sets[s]->sources[i].sha256);
				cJSON_AddItemToArray(data, d);
			}
		int skip = dlk_train_run_skip_if_unchanged(&run.trun, data);
		cJSON_Delete(data);
		if (skip)
			goto out;
	}
	if (run.world > 1 && join_gang(&run, &env, dev.shared, &err))
		goto fail;
	if (run.world > 1 && o->verbose && run.rank == 0)
		dlk_trainer_info(sink, "gradients over %s (%d ranks)", run.dcomm ? "NCCL" : "the TCP ring", run.world);
	if (prepare_resume(&run, &tr, &err))
		goto fail;
	if (run.rank == 0 && sink->start)
		sink->start(sink->ud, spec, &tr, train.sharded && !train.by_file ? train.total : train.n, test.n,
		                       run.world);
	if (worker && run.rank == 0)
		run.jp = dlk_job_progress_new(sink);
	if (run_loop(&run, spec, &tr, spec->path ? spec->path : o->run.spec_file, &train, &test, worker, &res, &err))
		goto fail;
	if (run.rank != 0) {
		if (o->verbose)
			dlk_trainer_info(sink, "rank %d done after %ld steps", run.rank, res.steps);
		goto out;
	}
	bundle = dlk_trainer_bundle_path(o->run.bundle, spec, o->run.spec_file, o->run.in_pod);
	/* here: the run's own bundle, kept beside its record, and NAME.dlk (or --bundle) made the same
	 * file, the newest run's; what the history names is never overwritten by the next run */
	run_bundle = dlk_trainer_run_bundle_path(spec, o->run.spec_file, o->run.in_pod, run.trun.id);
	if (run_bundle) {
		char *rdir = dlk_runs_local_dir(o->run.spec_file, spec->name);
		int made = dlk_mkdir_p(rdir, &err);
		free(rdir);
		if (made)
			goto fail;
	}
	if (write_bundle(&run, run_bundle ? run_bundle : bundle, run_bundle ? bundle : NULL, o->report, &res, &err))
		goto fail;
	if (run_bundle && !o->report && dlk_trainer_publish_bundle(run_bundle, bundle, &err))
		goto fail;
	if (run.jp) {
		/* the run as the bundle holds it, weights' digest included: what dlk serve deploys */
		struct dlk_err berr = DLK_ERR_INIT;
		cJSON *doc = report_run_from_bundle(bundle, &berr);
		char *m = doc ? report_run_compact(doc, DLK_METRICS_MAX_BYTES) : NULL;
		dlk_job_progress_metrics(run.jp, m);
		free(m);
		cJSON_Delete(doc);
	}
	if (sink->result)
		sink->result(sink->ud, spec, &res, bundle, run.world);
	record_mfu(&run, &res);
	dlk_train_run_succeeded(&run.trun, run_bundle ? run_bundle : bundle);
	goto out;
fail:
	clear(&run);
	rc = err.code ? err.code : DLK_EXIT_FAIL;
	if (run.trun.rec) {
		/* what the run did before it stopped, for the record */
		if (run.net && res.history.n_events) {
			struct dlk_bundle_info bi;
			struct dlk_err e = DLK_ERR_INIT;
			cJSON *meta, *doc;
			bundle_info(&run, &bi, run.net, NULL, dlk_history_epoch_loss(&res.history), &res.history);
			bi.started_at = res.history.events[0].time;
			meta = dlk_bundle_meta_json(&bi);
			doc = report_run_from_meta(meta, "run", NULL, &e);
			if (doc)
				dlk_train_run_set_result(&run.trun, doc, NULL);
			cJSON_Delete(doc);
			cJSON_Delete(meta);
		}
		record_mfu(&run, &res);
		dlk_train_run_finish(&run.trun, sig_seen || run.resize_to ? DLK_RUN_INTERRUPTED : DLK_RUN_FAILED, run.rank,
		                     rc, err.msg);
	}
out:
	dlk_train_metrics_done(run.metrics);
	dlk_train_metrics_stop(run.metrics);
	free(run.kept_phase);
	free(run.kept_gpu);
	dlk_gpu_probe_close(run.gpu);
	signals_restore(&sigs);
	dlk_train_run_release(&run.trun);
	comm_free(run.dcomm);
	comm_free(run.comm);
	free(run.stage);
	dlk_job_progress_free(run.jp);
	dlk_train_result_release(&res);
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	ckpt_release(&run.ckpt);
	free(run.ckpt_dir);
	free(bundle);
	free(run_bundle);
	free(dir);
	if (rc)
		*errp = err;
	return rc;
}
