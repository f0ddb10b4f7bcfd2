/* The training loop that runs in every pod (and on the laptop with --local).
 *
 * It never prints and never talks to the cluster: progress leaves through the event callback,
 * gradients through the optional all-reduce callback, and checkpoints through the optional
 * checkpoint / resume callbacks, so a communicator (lib/comm) and a checkpoint store plug in
 * without the loop knowing them. */
#ifndef DLK_TRAIN_TRAIN_H
#define DLK_TRAIN_TRAIN_H

#include <signal.h>
#include <stddef.h>

#include "lib/data/dataset.h"
#include "lib/nn/net.h"
#include "lib/nn/optim.h"
#include "lib/project/project.h"
#include "lib/train/eval.h"
#include "lib/train/history.h"
#include "lib/util/err.h"

enum dlk_train_event_kind {
	DLK_TRAIN_STEP,   /* after an optimizer step (every opts.step_event_every steps) */
	DLK_TRAIN_EPOCH,  /* after an epoch (and its evaluation, when one ran) */
	DLK_TRAIN_DONE,   /* training finished (or was cancelled): final metrics */
};

/* Where a step's time goes, measured by the loop on each rank: waiting for the batch (gathering
 * it, augmenting it, copying it to the device), computing (forward, backward, the optimizer
 * update), and waiting for the gradient all-reduce (what is left of it after backward). */
enum dlk_step_phase { DLK_PHASE_DATA, DLK_PHASE_COMPUTE, DLK_PHASE_ALLREDUCE, DLK_PHASES };
/* "data", "compute", "allreduce": the names the progress and the metrics use */
const char *dlk_step_phase_name(int phase);

/* A rank's GPU as it sampled it (lib/top/nvml.h) and the ranks gathered it for the progress:
 * gpu is NVML's index of the device the rank's CUDA device is (found by its PCI bus id). */
struct dlk_rank_gpu {
	int rank, gpu;
	double util_percent;          /* 0..100 */
	double mem_used, mem_total;   /* bytes, to the MiB */
	double power_w;               /* < 0: not reported */
	double sm_clock_mhz;          /* 0: not reported */
};

struct dlk_train_event {
	enum dlk_train_event_kind kind;
	int epoch, epochs;            /* 1-based epoch */
	long step, steps_per_epoch;   /* 1-based step within the epoch */
	long global_step, total_steps;
	double loss;                  /* STEP: this step's loss; EPOCH/DONE: the epoch's mean train loss */
	double lr;
	double samples_per_sec;       /* this rank's training throughput in the current epoch */
	double elapsed_sec, eta_sec;
	const struct dlk_eval *eval;  /* EPOCH/DONE: test metrics, NULL when none were computed */
	const struct dlk_history *history; /* EPOCH/DONE: the run's history so far (rank 0's) */
	const char *finished_at;      /* DONE: the result's finished_at */
	int world;                    /* how many ranks train (0: not said) */
	/* this rank's seconds in each phase of the steps: in the current epoch (since it began or
	 * resumed), and in this process's whole run */
	double phase_sec[DLK_PHASES], phase_total_sec[DLK_PHASES];
	/* every rank's phase_sec, DLK_PHASES a rank in rank order, for n_rank_phases ranks: filled by
	 * whoever gathers them (lib/trainer), NULL from the loop */
	const double *rank_phase_sec;
	int n_rank_phases;
	/* the GPU of each rank that has one, as last sampled (at most once a second): filled by
	 * lib/trainer, NULL from the loop */
	const struct dlk_rank_gpu *rank_gpu;
	int n_rank_gpu;
	/* the model's FLOPs per training sample (lib/nn/net.h), the whole gang's FLOP/s and the peak
	 * of all its devices (lib/top/peak.h): filled by lib/trainer, 0 when not known */
	double flops_per_sample, flops, peak_flops;
};

/* What a checkpoint saves and a resume restores: the net's flat params (and dropout_counter),
 * the optimizer's flat state (m, v, t), and the position in the run. */
struct dlk_train_state {
	struct dlk_net *net;
	struct dlk_optimizer *opt;
	int epoch;                    /* 0-based epoch in progress */
	long step_in_epoch;           /* steps of that epoch already done */
	long global_step;             /* steps done in all */
	struct dlk_history *history;  /* the run's history (saved and restored with the rest); may be NULL */
	/* the learning-rate schedule's steps per epoch and total: the run's first world's, kept
	 * across a resume at another world size (whose epoch may take a step more or less) */
	long sched_spe, sched_total;
};

typedef void (*dlk_train_event_fn)(void *ctx, const struct dlk_train_event *ev);
/* Once the network is built and initialised (or resumed), before the first step: for showing
 * dlk_net_summary() or the parameter count. */
typedef void (*dlk_train_start_fn)(void *ctx, const struct dlk_net *net, long total_steps);
/* Must leave in grads the MEAN of every rank's grads (n floats, device memory). */
typedef int (*dlk_grad_allreduce_fn)(void *ctx, float *grads, size_t n, struct dlk_err *err);
/* Optional: told during backward that grads[off, off + n) are final (see dlk_net.grad_ready), so
 * that their all-reduce can start early; the allreduce callback still runs after backward. */
typedef void (*dlk_grad_ready_fn)(void *ctx, float *grads, size_t n_params, size_t off, size_t n);
/* Fills counts[0, world) with every rank's `mine` (host memory), in rank order: how a sharded
 * training set (dlk_dataset.sharded) learns how many samples each rank holds. */
typedef int (*dlk_gather_counts_fn)(void *ctx, unsigned long long mine, unsigned long long *counts,
                                    struct dlk_err *err);
/* Must leave in params rank 0's params on every rank (called once, before the first step). */
typedef int (*dlk_param_broadcast_fn)(void *ctx, float *params, size_t n, struct dlk_err *err);
/* Called every training.checkpoint_every steps, at each epoch end and on cancellation, on every
 * rank (the callee decides which rank writes). */
typedef int (*dlk_checkpoint_fn)(void *ctx, const struct dlk_train_state *st, struct dlk_err *err);
/* Called once after initialisation: returns 1 after restoring st (net params, optimizer state,
 * position), 0 when there is nothing to resume, -1 on error. */
typedef int (*dlk_resume_fn)(void *ctx, struct dlk_train_state *st, struct dlk_err *err);

struct dlk_train_opts {
	const struct dlk_model *model;
	const struct dlk_training *training;
	const char *spec_file;            /* for messages, e.g. "dlk.yaml" */
	const struct dlk_dataset *train;  /* required */
	const struct dlk_dataset *test;   /* optional */
	int loader_threads;               /* batches gathered ahead (lib/train/loader.h): the threads
	                                     gathering the next micro-batch; 0 = one per core */
	int prefetch;                     /* 1: gather every batch ahead on the loader threads; 0:
	                                     when the samples are read from files (DLK_STORE_FILES) or
	                                     the backend is a device's (its host would wait otherwise) */
	const struct dlk_backend *backend; /* NULL = the CPU backend */
	int rank, world;                  /* 0/1 when 0/0 */
	dlk_grad_allreduce_fn allreduce;  /* NULL with world 1 */
	dlk_param_broadcast_fn broadcast;
	dlk_grad_ready_fn grad_ready;     /* optional, with allreduce */
	dlk_gather_counts_fn gather_counts; /* required with a sharded train set and world > 1 */
	/* ZeRO-1 (all four set, world > 1): the optimizer state is sharded over the ranks. zero_shard
	 * says this rank's part [off, off + len) of n parameters; zero_reduce_scatter must leave in
	 * that part of grads the MEAN of every rank's grads there; zero_allgather must leave in params
	 * every rank's part of its own params; zero_sum adds *v over the ranks (the squares of the
	 * gradient's norm, for grad_clip). */
	void (*zero_shard)(void *ctx, size_t n, size_t *off, size_t *len);
	dlk_grad_allreduce_fn zero_reduce_scatter;
	dlk_param_broadcast_fn zero_allgather;
	int (*zero_sum)(void *ctx, double *v, struct dlk_err *err);
	void *comm_ctx;
	dlk_checkpoint_fn checkpoint;
	dlk_resume_fn resume;
	void *ckpt_ctx;
	dlk_train_event_fn on_event;
	dlk_train_start_fn on_start;      /* optional; gets event_ctx too */
	void *event_ctx;
	int step_event_every;             /* 0 = every step */
	const volatile sig_atomic_t *cancel; /* checked before each step; non-zero stops the run */
	long max_steps;                   /* stop after this many steps in all (0 = no limit) */
	int eval_batch;                   /* 0 = the training batch size */
};
#define DLK_TRAIN_OPTS_INIT { 0 }

struct dlk_train_result {
	struct dlk_net net;               /* the trained network (weights on the backend) */
	struct dlk_eval eval;             /* the last test evaluation (n == 0 when none) */
	double train_loss;                /* mean loss of the last epoch run */
	int epochs_done;
	long steps;
	int cancelled;
	double seconds;                   /* wall time of the loop, evaluation included */
	double train_samples_per_sec;     /* this rank's, evaluation excluded */
	double phase_sec[DLK_PHASES];     /* this rank's seconds in each phase of its steps */
	size_t optim_state_bytes;         /* the optimizer state this rank holds (its shard's with ZeRO-1) */
	size_t optim_full_bytes;          /* ... and the whole state's, every rank's shard together */
	double activation_bytes;          /* the activations of a training batch (dlk_net_batch_bytes) */
	double activation_bytes_whole;    /* ... what they would be without training.recompute */
	int recomputed_blocks;            /* training.recompute: the block repetitions recomputed */
	float *loss_curve;                /* every step's loss in this process, n_loss entries */
	size_t n_loss;
	unsigned long long seed;
	char started_at[32], finished_at[32]; /* RFC 3339 UTC */
	struct dlk_history history;       /* per-epoch metrics, step losses, starts and resumes, including
	                                     what a resumed checkpoint carried */
};
#define DLK_TRAIN_RESULT_INIT { DLK_NET_INIT, DLK_EVAL_INIT, 0, 0, 0, 0, 0, 0, { 0 }, 0, 0, 0, 0, 0, NULL, 0, 0, "", "", DLK_HISTORY_INIT }

/* Trains the model on opts->train, evaluating on opts->test after epochs (when
 * training.eval_every_epoch) and at the end. Returns 0 when the run completed, 1 when it was
 * cancelled (result filled, checkpoint hook called), -1 on error (bad shapes or labels:
 * DLK_EXIT_CONFIG; divergence: DLK_EXIT_FAIL; a callback's own error passes through). The
 * caller releases result with dlk_train_result_release() in every case. */
int dlk_train_run(const struct dlk_train_opts *opts, struct dlk_train_result *result, struct dlk_err *err);
void dlk_train_result_release(struct dlk_train_result *r);

#endif
