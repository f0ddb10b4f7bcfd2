/* convtranspose2d (nn.ConvTranspose2d) and avgpool (nn.AvgPool2d), both over lib/nn/conv_more.c's
 * operations, which are written over the backend's primitives: the CPU and CUDA backends run
 * them with no kernel of their own.
 *
 * avgpool is a depthwise convolution (groups = channels) whose weights are all 1/(size*size) and
 * whose bias is 0: the mean of each window with the zero padding counted (PyTorch's default,
 * count_include_pad=True). Those constants live in the layer's own buffer, not among the
 * parameters, so the bundle holds nothing for it. */
#include "lib/nn/layer_ops.h"

#include <stdint.h>
#include <stdlib.h>

#include "lib/nn/conv_more.h"

/* ---- convtranspose2d: weight [C, F, k, k], bias [F] ---- */

static struct dlk_conv_more convt_shape(const struct dlk_layer *L, int batch)
{
	return (struct dlk_conv_more){ .batch = batch, .c = L->in[0], .h = L->in[1], .w = L->in[2], .f = L->out[0],
		                       .k = L->spec.kernel, .stride = L->spec.stride, .pad = L->spec.padding,
		                       .oh = L->out[1], .ow = L->out[2], .out_pad = L->spec.output_padding };
}

static int convt_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	if (ls->filters <= 0 || ls->filters > 65536 || ls->kernel <= 0 || ls->kernel > 1024 || ls->stride <= 0 ||
	    ls->stride > 1024 || ls->padding < 0 || ls->padding > 1024 || ls->output_padding < 0 ||
	    ls->output_padding >= ls->stride)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "%s: filters %d, kernel %d, stride %d, padding %d, output_padding %d: each positive (the "
		                "paddings may be 0), output_padding below the stride", w, ls->filters, ls->kernel,
		                ls->stride, ls->padding, ls->output_padding);
	return 0;
}

static void convt_params(struct dlk_layer *L)
{
	size_t kk = (size_t)L->spec.kernel * (size_t)L->spec.kernel;
	/* PyTorch's fan_in of ConvTranspose2d's weight [C, F, k, k] is its dimension 1 times k*k */
	L->fan_in = (int)((size_t)L->spec.filters * kk);
	L->fan_out = (int)((size_t)L->in[0] * kk);
	L->n_w = (size_t)L->in[0] * (size_t)L->spec.filters * kk;
	L->n_b = (size_t)L->spec.filters;
}

static double convt_values(const struct dlk_layer *L)
{
	struct dlk_conv_more s = convt_shape(L, 1);
	return (double)dlk_convt_scratch(&s);
}

static int convt_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	struct dlk_conv_more s = convt_shape(L, (int)B);
	if ((double)B * convt_values(L) > (double)INT32_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.batch_size: %zu samples make layer %d's column buffer too large",
		                B, i);
	if (dlk_layer_reserve_y(net, L, B))
		return 1;
	return (L->col = net->be->alloc(sizeof(float) * dlk_convt_scratch(&s))) ? 0 : 1;
}

static double convt_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * B * ((double)L->out_size + convt_values(L));
}

static const float *convt_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	struct dlk_conv_more s = convt_shape(L, batch);
	(void)training;
	dlk_convt_forward(net->be, x, net->params + L->w_off, net->params + L->b_off, &s, DLK_ACT_NONE, L->col, L->y);
	return L->y;
}

static float *convt_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	struct dlk_conv_more s = convt_shape(L, batch);
	dlk_convt_backward(net->be, L->x_used, net->params + L->w_off, g, &s, L->col, net->grads + L->w_off,
	                   net->grads + L->b_off, L->need_dx ? gout : NULL);
	dlk_layer_grads_ready(net, L);
	return L->need_dx ? gout : g;
}

const struct dlk_layer_ops dlk_layer_ops_convtranspose2d = {
	.check = convt_check,
	.shape = dlk_layer_shape,
	.params = convt_params,
	.decay = DLK_DECAY_WEIGHT,
	.reserve = convt_reserve,
	.batch_bytes = convt_bytes,
	.batch_values = convt_values,
	.forward = convt_forward,
	.backward = convt_backward,
};

/* ---- avgpool: a depthwise convolution of constant weights; L->col holds its scratch, then the
 * weights [C, 1, k, k], a zero bias [C] and the weight and bias gradients it discards ---- */

static struct dlk_conv_more avg_shape(const struct dlk_layer *L, int batch)
{
	return (struct dlk_conv_more){ .batch = batch, .c = L->in[0], .h = L->in[1], .w = L->in[2], .f = L->in[0],
		                       .k = L->spec.size, .stride = L->spec.stride, .pad = L->spec.padding,
		                       .oh = L->out[1], .ow = L->out[2], .groups = L->in[0] };
}

static int avg_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	if (ls->size <= 0 || ls->size > 1024 || ls->stride <= 0 || ls->stride > 1024 || ls->padding < 0 ||
	    2 * ls->padding > ls->size)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: size %d, stride %d, padding %d: size and stride positive, padding at "
		                "most half the size", w, ls->size, ls->stride, ls->padding);
	return 0;
}

static size_t avg_consts(const struct dlk_layer *L)
{
	size_t kk = (size_t)L->spec.size * (size_t)L->spec.size;
	return 2 * ((size_t)L->in[0] * kk + (size_t)L->in[0]);
}

static double avg_values(const struct dlk_layer *L)
{
	struct dlk_conv_more s = avg_shape(L, 1);
	return (double)dlk_conv_grouped_scratch(&s);
}

static int avg_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	struct dlk_conv_more s = avg_shape(L, (int)B);
	size_t scratch = dlk_conv_grouped_scratch(&s), kk = (size_t)L->spec.size * (size_t)L->spec.size;
	size_t nw = (size_t)L->in[0] * kk, n = avg_consts(L);
	if ((double)B * avg_values(L) > (double)INT32_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.batch_size: %zu samples make layer %d's column buffer too large",
		                B, i);
	if (dlk_layer_reserve_y(net, L, B))
		return 1;
	if (!(L->col = net->be->alloc(sizeof(float) * (scratch + n))))
		return 1;
	float *h = calloc(n, sizeof(float));
	if (!h)
		return 1;
	for (size_t j = 0; j < nw; j++)
		h[j] = 1.0f / (float)kk;
	net->be->to_device(L->col + scratch, h, sizeof(float) * n);
	free(h);
	return 0;
}

static double avg_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * (B * ((double)L->out_size + avg_values(L)) + (double)avg_consts(L));
}

static const float *avg_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	struct dlk_conv_more s = avg_shape(L, batch), full = avg_shape(L, net->batch_cap);
	float *w = L->col + dlk_conv_grouped_scratch(&full); /* where reserve put the constants */
	(void)training;
	dlk_conv_grouped_forward(net->be, x, w, w + (size_t)L->in[0] * L->spec.size * L->spec.size, &s, DLK_ACT_NONE,
	                         L->col, L->y);
	return L->y;
}

static float *avg_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	struct dlk_conv_more s = avg_shape(L, batch), full = avg_shape(L, net->batch_cap);
	size_t nw = (size_t)L->in[0] * L->spec.size * L->spec.size;
	float *w = L->col + dlk_conv_grouped_scratch(&full), *dw = w + nw + (size_t)L->in[0];
	if (!L->need_dx)
		return g;
	dlk_conv_grouped_backward(net->be, L->x_used, w, g, &s, L->col, dw, dw + nw, gout);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_avgpool = {
	.check = avg_check,
	.shape = dlk_layer_shape,
	.reserve = avg_reserve,
	.batch_bytes = avg_bytes,
	.batch_values = avg_values,
	.forward = avg_forward,
	.backward = avg_backward,
};
