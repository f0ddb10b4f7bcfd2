#include <math.h>

#include "lib/nn/optim.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

int dlk_optimizer_init(struct dlk_optimizer *o, const struct dlk_training *tr, size_t n_params,
                       long steps_per_epoch, long total_steps, const struct dlk_backend *be,
                       struct dlk_err *err)
{
	*o = (struct dlk_optimizer)DLK_OPTIMIZER_INIT;
	if (!(tr->lr > 0) || !isfinite(tr->lr))
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.lr: must be a positive number, not %g", tr->lr);
	if (tr->weight_decay < 0 || tr->momentum < 0 || tr->grad_clip < 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "training: weight_decay, momentum and grad_clip cannot be negative");
	if (tr->optimizer != DLK_OPT_SGD && (tr->beta1 < 0 || tr->beta1 >= 1 || tr->beta2 < 0 || tr->beta2 >= 1 || !(tr->eps > 0)))
		return dlk_errf(err, DLK_EXIT_CONFIG, "training: beta1 and beta2 must be in [0, 1) and eps positive");
	o->be = be;
	o->kind = tr->optimizer;
	o->lr = tr->lr;
	o->momentum = tr->momentum;
	o->nesterov = tr->nesterov;
	o->weight_decay = tr->weight_decay;
	o->beta1 = tr->beta1;
	o->beta2 = tr->beta2;
	o->eps = tr->eps;
	o->schedule = tr->schedule;
	o->warmup_steps = tr->warmup_steps > 0 ? tr->warmup_steps : 0;
	o->gamma = tr->gamma;
	o->min_lr = tr->min_lr;
	dlk_optimizer_set_schedule(o, tr, steps_per_epoch, total_steps);
	o->grad_clip = tr->grad_clip;
	o->n = n_params;
	o->state_off = 0;
	o->state_n = n_params;
	size_t bytes = sizeof(float) * (n_params ? n_params : 1);
	int need_m = o->kind != DLK_OPT_SGD || o->momentum != 0;
	if (need_m && !(o->m = be->alloc(bytes)))
		goto oom;
	if (o->kind != DLK_OPT_SGD && !(o->v = be->alloc(bytes)))
		goto oom;
	return 0;
oom:
	dlk_optimizer_release(o);
	return dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for the optimizer state", be->name);
}

void dlk_optimizer_set_schedule(struct dlk_optimizer *o, const struct dlk_training *tr, long steps_per_epoch,
                                long total_steps)
{
	o->step_size = (long)(tr->step_size > 0 ? tr->step_size : 1) * (steps_per_epoch > 0 ? steps_per_epoch : 1);
	o->total_steps = total_steps > 0 ? total_steps : 1;
}

double dlk_optimizer_lr(const struct dlk_optimizer *o, long step)
{
	double lr = o->lr;
	switch (o->schedule) {
	case DLK_LR_CONSTANT:
		break;
	case DLK_LR_STEP:
		lr *= pow(o->gamma, (double)(step / o->step_size));
		break;
	case DLK_LR_COSINE: {
		double t = (double)(step < o->total_steps ? step : o->total_steps) / (double)o->total_steps;
		lr = o->min_lr + (o->lr - o->min_lr) * 0.5 * (1.0 + cos(M_PI * t));
		break;
	}
	}
	if (o->warmup_steps > 0 && step < o->warmup_steps)
		lr *= (double)(step + 1) / (double)o->warmup_steps;
	return lr;
}

double dlk_optimizer_clip(const struct dlk_optimizer *o, float *grads)
{
	double norm = sqrt(o->be->sum_squares(grads, o->n));
	if (o->grad_clip > 0 && norm > o->grad_clip)
		o->be->scale(grads, o->n, (float)(o->grad_clip / (norm + 1e-6)));
	return norm;
}

void dlk_optimizer_set_no_decay(struct dlk_optimizer *o, const size_t *ranges, int n_ranges)
{
	free(o->no_decay);
	o->no_decay = NULL;
	o->n_no_decay = 0;
	if (n_ranges <= 0)
		return;
	o->no_decay = xmalloc(sizeof(size_t) * 2 * (size_t)n_ranges);
	memcpy(o->no_decay, ranges, sizeof(size_t) * 2 * (size_t)n_ranges);
	o->n_no_decay = n_ranges;
}

/* the update of parameters [off, off + n) with weight decay wd: every update is element-wise,
 * so a segment at a time is the same as the whole */
static void step_range(struct dlk_optimizer *o, float *params, const float *grads, size_t off, size_t n, double lr,
                       double wd, double bc1, double bc2)
{
	/* only the part inside the state's range: a shard's (ZeRO-1), or all of them */
	size_t lo = off > o->state_off ? off : o->state_off;
	size_t hi = off + n < o->state_off + o->state_n ? off + n : o->state_off + o->state_n;

	if (hi <= lo)
		return;
	off = lo;
	n = hi - lo;
	if (o->kind == DLK_OPT_SGD) {
		if (o->m) {
			o->be->sgd_update(params + off, grads + off, o->m + (off - o->state_off), n, (float)lr, (float)o->momentum, o->nesterov,
			                  (float)wd);
		} else {
			/* plain SGD has no buffer: the kernel's momentum 0 path never touches it, but it
			 * must be a valid pointer, so reuse the gradient array read-only */
			o->be->sgd_update(params + off, grads + off, (float *)grads + off, n, (float)lr, 0.0f, 0, (float)wd);
		}
		return;
	}
	o->be->adam_update(params + off, grads + off, o->m + (off - o->state_off), o->v + (off - o->state_off), n, (float)lr, (float)o->beta1,
	                   (float)o->beta2, (float)o->eps, (float)wd, o->kind == DLK_OPT_ADAMW, (float)bc1,
	                   (float)sqrt(bc2));
}

void dlk_optimizer_step(struct dlk_optimizer *o, float *params, const float *grads, double lr)
{
	double bc1 = 0, bc2 = 0;
	size_t at = 0;

	o->t++;
	if (o->kind != DLK_OPT_SGD) {
		bc1 = 1.0 - pow(o->beta1, (double)o->t);
		bc2 = 1.0 - pow(o->beta2, (double)o->t);
	}
	if (o->weight_decay == 0 || !o->n_no_decay) {
		step_range(o, params, grads, 0, o->n, lr, o->weight_decay, bc1, bc2);
		return;
	}
	for (int i = 0; i < o->n_no_decay; i++) {
		size_t off = o->no_decay[2 * i], n = o->no_decay[2 * i + 1];
		if (off < at || off + n > o->n)
			continue; /* not sorted or outside: the caller's bug, never a write past the arrays */
		step_range(o, params, grads, at, off - at, lr, o->weight_decay, bc1, bc2);
		step_range(o, params, grads, off, n, lr, 0.0, bc1, bc2);
		at = off + n;
	}
	step_range(o, params, grads, at, o->n - at, lr, o->weight_decay, bc1, bc2);
}

int dlk_optimizer_shard(struct dlk_optimizer *o, size_t off, size_t n, struct dlk_err *err)
{
	size_t bytes = sizeof(float) * (n ? n : 1);
	int has_m = o->m != NULL, has_v = o->v != NULL;

	if (off > o->n || n > o->n - off)
		return dlk_errf(err, DLK_EXIT_FAIL, "optimizer shard [%zu, %zu) outside %zu parameters", off, off + n, o->n);
	o->be->free(o->m);
	o->be->free(o->v);
	o->m = o->v = NULL;
	o->state_off = off;
	o->state_n = n;
	o->sharded = 1;
	if ((has_m && !(o->m = o->be->alloc(bytes))) || (has_v && !(o->v = o->be->alloc(bytes))))
		return dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for the optimizer state", o->be->name);
	return 0;
}

size_t dlk_optimizer_state_bytes(const struct dlk_optimizer *o)
{
	return sizeof(float) * o->state_n * ((o->m != NULL) + (o->v != NULL));
}

void dlk_optimizer_clip_shard(const struct dlk_optimizer *o, float *grads, double norm)
{
	if (o->grad_clip > 0 && norm > o->grad_clip && o->state_n)
		o->be->scale(grads + o->state_off, o->state_n, (float)(o->grad_clip / (norm + 1e-6)));
}

void dlk_optimizer_release(struct dlk_optimizer *o)
{
	if (o->be) {
		o->be->free(o->m);
		o->be->free(o->v);
	}
	free(o->no_decay);
	*o = (struct dlk_optimizer)DLK_OPTIMIZER_INIT;
}
