/* Optimizers (SGD with momentum/Nesterov, Adam, AdamW; PyTorch semantics), learning-rate
 * schedules and global-norm gradient clipping over the flat parameter arrays of a net. */
#ifndef DLK_NN_OPTIM_H
#define DLK_NN_OPTIM_H

#include <stddef.h>

#include "lib/nn/backend.h"
#include "lib/project/project.h"
#include "lib/util/err.h"

struct dlk_optimizer {
	const struct dlk_backend *be;
	enum dlk_optim kind;
	double lr, momentum, weight_decay, beta1, beta2, eps;
	int nesterov;
	enum dlk_lr_schedule schedule;
	long warmup_steps;
	long step_size;           /* in steps (the spec's epochs times steps per epoch) */
	double gamma, min_lr;
	long total_steps;
	double grad_clip;
	size_t n;                 /* parameters */
	/* the parameters whose state this optimizer holds and updates: [state_off, state_off +
	 * state_n), all n unless sharded (ZeRO-1, dlk_optimizer_shard) */
	size_t state_off, state_n;
	int sharded;              /* dlk_optimizer_shard made it one rank's part (even of all n) */
	float *m;                 /* device: Adam's first moment, SGD's momentum buffer (state_n floats) */
	float *v;                 /* device: Adam's second moment; NULL for SGD (state_n floats) */
	long t;                   /* optimizer steps taken so far (checkpointed) */
	/* ranges [off, off + n) of the flat arrays that get no weight decay (biases, norms), sorted,
	 * not overlapping: pairs (off, n), n_no_decay of them; owned */
	size_t *no_decay;
	int n_no_decay;
};
#define DLK_OPTIMIZER_INIT { 0 }

/* Takes its settings from the resolved spec; the schedule is laid out over total_steps with
 * steps_per_epoch steps in an epoch. Allocates the state (zeroed) on be. */
int dlk_optimizer_init(struct dlk_optimizer *o, const struct dlk_training *tr, size_t n_params,
                       long steps_per_epoch, long total_steps, const struct dlk_backend *be,
                       struct dlk_err *err);
/* Lays the schedule out anew over total_steps with steps_per_epoch steps in an epoch (what
 * init did), keeping the state: a run resumed at another world size keeps the schedule it
 * began with. */
void dlk_optimizer_set_schedule(struct dlk_optimizer *o, const struct dlk_training *tr, long steps_per_epoch,
                                long total_steps);
/* The learning rate of global step `step` (0-based): the schedule (constant; step: lr *
 * gamma^floor(step / step_size); cosine: min_lr + (lr - min_lr)(1 + cos(pi step / total))/2)
 * times the linear warm-up factor min(1, (step + 1) / warmup_steps). */
double dlk_optimizer_lr(const struct dlk_optimizer *o, long step);
/* Scales grads so that their global L2 norm is at most grad_clip (when grad_clip > 0), as
 * torch.nn.utils.clip_grad_norm_ does; returns the norm before clipping. */
double dlk_optimizer_clip(const struct dlk_optimizer *o, float *grads);
/* Exempts the ranges (pairs off, n; sorted, not overlapping, within the n parameters) from
 * weight decay, as the parameter groups of a PyTorch recipe that keeps decay off biases and
 * norms (training.decay_norms_and_biases: false). Copies them. */
void dlk_optimizer_set_no_decay(struct dlk_optimizer *o, const size_t *ranges, int n_ranges);
/* One update of params from grads with learning rate lr; advances t. Sharded, only the
 * parameters of the shard change (and only the shard of grads is read). */
void dlk_optimizer_step(struct dlk_optimizer *o, float *params, const float *grads, double lr);

/* ZeRO-1: from now on o holds the state of parameters [off, off + n) alone (zeroed; a fresh
 * optimizer's) and updates only them; the rest of the parameters are other ranks' to update. */
int dlk_optimizer_shard(struct dlk_optimizer *o, size_t off, size_t n, struct dlk_err *err);
/* Bytes of state (m and v) this optimizer holds on its device. */
size_t dlk_optimizer_state_bytes(const struct dlk_optimizer *o);
/* Scales the shard of grads by grad_clip / norm when norm (the global L2 norm of every rank's
 * gradients) is over grad_clip, as dlk_optimizer_clip does with the norm it computes. */
void dlk_optimizer_clip_shard(const struct dlk_optimizer *o, float *grads, double norm);
void dlk_optimizer_release(struct dlk_optimizer *o);

#endif
