/* batchnorm: nn.BatchNorm2d(C) over [C, H, W] activations (each channel over the batch, height and
 * width), nn.BatchNorm1d(n) over flat ones (each feature over the batch). Weight 1 and bias 0 at
 * the start, as PyTorch's. A training forward normalises with the batch's statistics and moves
 * the running ones (momentum 0.1, the unbiased variance, PyTorch's rule); any other forward
 * (evaluation, serving, dlk predict) normalises with the running ones.
 *
 * The running statistics are the layer's state: running_mean [C], running_var [C] and
 * num_batches_tracked (one value) right after the bias in the flat parameter array, so that a
 * checkpoint and the bundle hold them with the weights and a gang's broadcast of rank 0's
 * parameters carries them. Their gradient is 0 and the optimizer never decays them
 * (lib/train/train.c), so training moves them only through the forward. */
#include "lib/nn/layer_ops.h"

static int bn_channels(const struct dlk_layer *L) { return dlk_shape_flat(L->in) ? L->in[2] : L->in[0]; }
static int bn_hw(const struct dlk_layer *L) { return dlk_shape_flat(L->in) ? 1 : L->in[1] * L->in[2]; }

static int batchnorm_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	if (!(L->spec.eps > 0.0f && L->spec.eps <= 1.0f))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: eps must be in (0, 1], not %g", w, (double)L->spec.eps);
	if (!(L->spec.momentum >= 0.0f && L->spec.momentum <= 1.0f))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: momentum must be in [0, 1], not %g", w, (double)L->spec.momentum);
	return 0;
}

static void batchnorm_params(struct dlk_layer *L)
{
	size_t c = (size_t)bn_channels(L);
	L->fan_in = L->fan_out = (int)c;
	L->n_w = L->n_b = c;
	L->n_s = 2 * c + 1;
}

/* weight 1, bias 0; the state after the bias: running_mean 0, running_var 1, no batches yet */
static void batchnorm_init(const struct dlk_layer *L, const struct dlk_init *how, float *w, float *b,
                           struct dlk_rng *r)
{
	size_t c = L->n_w;
	(void)how;
	(void)r;
	for (size_t j = 0; j < c; j++) {
		w[j] = 1.0f;
		b[j] = 0.0f;
		b[c + j] = 0.0f;
		b[2 * c + j] = 1.0f;
	}
	b[3 * c] = 0.0f;
}

/* y, then the batch's mean and rstd per channel in L->col */
static int batchnorm_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	(void)i;
	if (!net->be->batchnorm_forward || !net->be->batchnorm_backward) {
		char w[256];
		dlk_layer_where(w, sizeof(w), i, &L->spec, NULL);
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: the %s backend has no batch normalisation", w, net->be->name);
	}
	if (dlk_layer_reserve_y(net, L, B))
		return 1;
	return (L->col = net->be->alloc(sizeof(float) * 2 * L->n_w)) ? 0 : 1;
}

static double batchnorm_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * (B * (double)L->out_size + 2.0 * (double)L->n_w);
}

static const float *batchnorm_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	float *s = net->params + L->s_off;
	size_t c = L->n_w;
	(L->bn_relu ? net->be->batchnorm_relu_forward : net->be->batchnorm_forward)(
		x, net->params + L->w_off, net->params + L->b_off, batch, (int)c, bn_hw(L), L->spec.eps, L->spec.momentum,
		training, s, s + c, s + 2 * c, L->y, training ? L->col : NULL, training ? L->col + c : NULL);
	return L->y;
}

static float *batchnorm_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	size_t c = L->n_w;
	if (L->bn_relu) /* g is the gradient of the ReLU's output, L->y_used */
		net->be->batchnorm_relu_backward(L->x_used, net->params + L->w_off, L->col, L->col + c, L->y_used, g, batch,
		                                 (int)c, bn_hw(L), gout, net->grads + L->w_off, net->grads + L->b_off);
	else
		net->be->batchnorm_backward(L->x_used, net->params + L->w_off, L->col, L->col + c, g, batch, (int)c,
		                            bn_hw(L), gout, net->grads + L->w_off, net->grads + L->b_off);
	net->be->fill(net->grads + L->s_off, L->n_s, 0.0f); /* the state is not trained */
	dlk_layer_grads_ready(net, L);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_batchnorm = {
	.check = batchnorm_check,
	.shape = dlk_layer_shape,
	.params = batchnorm_params,
	.init = batchnorm_init,
	.reserve = batchnorm_reserve,
	.batch_bytes = batchnorm_bytes,
	.forward = batchnorm_forward,
	.backward = batchnorm_backward,
};
