#include <math.h>

#include "lib/nn/optim.h"

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

void dlk_optimizer_step(struct dlk_optimizer *o, float *params, const float *grads, double lr)
{
	o->t++;
	if (o->kind == DLK_OPT_SGD) {
		if (o->m) {
			o->be->sgd_update(params, grads, o->m, o->n, (float)lr, (float)o->momentum, o->nesterov,
			                  (float)o->weight_decay);
		} else {
			/* plain SGD has no buffer: the kernel's momentum 0 path never touches it, but it
			 * must be a valid pointer, so reuse the gradient array read-only */
			o->be->sgd_update(params, grads, (float *)grads, o->n, (float)lr, 0.0f, 0,
			                  (float)o->weight_decay);
		}
		return;
	}
	double bc1 = 1.0 - pow(o->beta1, (double)o->t);
	double bc2 = 1.0 - pow(o->beta2, (double)o->t);
	o->be->adam_update(params, grads, o->m, o->v, o->n, (float)lr, (float)o->beta1, (float)o->beta2,
	                   (float)o->eps, (float)o->weight_decay, o->kind == DLK_OPT_ADAMW, (float)bc1,
	                   (float)sqrt(bc2));
}

void dlk_optimizer_release(struct dlk_optimizer *o)
{
	if (o->be) {
		o->be->free(o->m);
		o->be->free(o->v);
	}
	*o = (struct dlk_optimizer)DLK_OPTIMIZER_INIT;
}
