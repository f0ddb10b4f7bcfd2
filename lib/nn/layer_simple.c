/* The parameter-free kinds of the first engine: maxpool, flatten, the activations, dropout. */
#include "lib/nn/layer_ops.h"

#include <stdint.h>

#include "lib/nn/kernels.h"

/* maxpool: the argmax of each window is kept for backward; a conv2d just before it may do
 * both passes (L->pooled) */
static int maxpool_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;

	if (ls->size <= 0 || ls->size > 1024 || ls->stride <= 0 || ls->stride > 1024)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: size %d and stride %d must be in 1..1024", w, ls->size,
		                ls->stride);
	return 0;
}

static int maxpool_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	(void)i, (void)err;
	if (dlk_layer_reserve_y(net, L, B))
		return 1;
	return (L->argmax = net->be->alloc(sizeof(int32_t) * B * L->out_size)) ? 0 : 1;
}

static double maxpool_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 8 * B * (double)L->out_size;
}

static const float *maxpool_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	(void)training;

	if (!L->pooled) /* else the conv before it pooled into L->y */
		net->be->maxpool_forward(x, batch, L->in[0], L->in[1], L->in[2], L->spec.size, L->spec.stride,
		                         L->out[1], L->out[2], L->y, L->argmax);
	return L->y;
}

static float *maxpool_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];

	if (L->pooled)
		return g; /* the conv before it takes g back through the pool */
	net->be->maxpool_backward(g, L->argmax, (size_t)batch * L->out_size, (size_t)batch * L->in_size, gout);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_maxpool = {
	.check = maxpool_check,
	.shape = dlk_layer_shape,
	.reserve = maxpool_reserve,
	.batch_bytes = maxpool_bytes,
	.forward = maxpool_forward,
	.backward = maxpool_backward,
};

/* flatten: the same memory seen as [batch, C*H*W] */
static const float *flatten_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	(void)net, (void)i, (void)batch, (void)training;
	return x;
}

const struct dlk_layer_ops dlk_layer_ops_flatten = {
	.shape = dlk_layer_shape,
	.forward = flatten_forward,
};

/* relu, tanh, sigmoid: in place of nothing when the dense/conv/batchnorm before it applies it
 * (L->fused); backward through y, skipped where another layer's backward does it (L->folded_bw,
 * L->pooled; the batch norm before it, bn_relu) */
static int act_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	(void)i, (void)err;
	return L->fused ? 0 : dlk_layer_reserve_y(net, L, B);
}

static double act_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return L->fused ? 0 : 4 * B * (double)L->out_size;
}

static const float *act_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	(void)training;

	if (L->fused)
		return x;
	net->be->act_forward(dlk_layer_act(L->spec.kind), x, L->y, (size_t)batch * L->out_size);
	return L->y;
}

static float *act_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	if (L->folded_bw || L->pooled || (L->fused && i > 0 && net->layers[i - 1].bn_relu))
		return g;
	net->be->act_backward(dlk_layer_act(L->spec.kind), L->y_used, g, gout, (size_t)batch * L->out_size);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_act = {
	.shape = dlk_layer_shape,
	.reserve = act_reserve,
	.batch_bytes = act_bytes,
	.forward = act_forward,
	.backward = act_backward,
};

/* dropout: the mask is drawn from (seed, counter) and redrawn in backward, never stored */
static int dropout_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	if (!(L->spec.rate >= 0.0f && L->spec.rate < 1.0f))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: rate must be in [0, 1), not %g", w, (double)L->spec.rate);
	return 0;
}

static int dropout_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	(void)i, (void)err;
	return dlk_layer_reserve_y(net, L, B);
}

static double dropout_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * B * (double)L->out_size;
}

static const float *dropout_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	size_t n = (size_t)batch * L->out_size;

	if (!training || L->spec.rate <= 0.0f) {
		L->drop_active = 0;
		return x;
	}
	/* remember where this step's mask starts: backward redraws the same mask */
	net->be->dropout_forward(x, L->y, n, L->spec.rate, net->dropout_seed, net->dropout_counter);
	L->drop_active = 1;
	L->drop_offset = net->dropout_counter;
	net->dropout_counter += n;
	return L->y;
}

static float *dropout_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	(void)gout;

	if (L->drop_active)
		net->be->dropout_backward(g, g, (size_t)batch * L->out_size, L->spec.rate, net->dropout_seed,
		                          L->drop_offset);
	return g;
}

const struct dlk_layer_ops dlk_layer_ops_dropout = {
	.check = dropout_check,
	.shape = dlk_layer_shape,
	.reserve = dropout_reserve,
	.batch_bytes = dropout_bytes,
	.forward = dropout_forward,
	.backward = dropout_backward,
};
