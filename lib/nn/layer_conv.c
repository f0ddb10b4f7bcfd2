/* conv2d: im2col and one GEMM per batch (or the backend's own convolution), with the activation
 * and a max-pool after it fused when plan_passes says so (L->act, L->pool_layer). */
#include "lib/nn/layer_ops.h"

#include <stdint.h>

#include "lib/nn/conv_more.h"

/* conv2d with groups > 1 (depthwise when groups = channels) runs lib/nn/conv_more.c's grouped
 * convolution, unfused (plan_passes leaves its activation and max-pool their own passes) */
static int grouped(const struct dlk_layer *L) { return L->spec.groups > 1; }

static struct dlk_conv_more grouped_shape(const struct dlk_layer *L, int batch)
{
	return (struct dlk_conv_more){ .batch = batch, .c = L->in[0], .h = L->in[1], .w = L->in[2], .f = L->out[0],
		                       .k = L->spec.kernel, .stride = L->spec.stride, .pad = L->spec.padding,
		                       .oh = L->out[1], .ow = L->out[2], .groups = L->spec.groups };
}

static int conv_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;

	if (ls->filters <= 0 || ls->filters > 65536 || ls->kernel <= 0 || ls->kernel > 1024 || ls->stride <= 0 ||
	    ls->stride > 1024 || ls->padding < 0 || ls->padding > 1024)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "%s: filters %d, kernel %d, stride %d, padding %d: each must be positive "
		                "(padding may be 0) and at most 65536/1024",
		                w, ls->filters, ls->kernel, ls->stride, ls->padding);
	if (grouped(L) && (L->in[0] % ls->groups || ls->filters % ls->groups))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: groups %d must divide its %d input channels and its %d filters", w,
		                ls->groups, L->in[0], ls->filters);
	return 0;
}

static void conv_params(struct dlk_layer *L)
{
	size_t kk = (size_t)L->spec.kernel * (size_t)L->spec.kernel;

	size_t g = grouped(L) ? (size_t)L->spec.groups : 1;

	/* PyTorch's fans of a grouped convolution: C/groups inputs per filter */
	L->fan_in = (int)((size_t)L->in[0] / g * kk);
	L->fan_out = (int)((size_t)L->spec.filters / g * kk);
	L->n_w = (size_t)L->spec.filters * ((size_t)L->in[0] / g) * kk;
	L->n_b = (size_t)L->spec.filters;
}

static double conv_values(const struct dlk_layer *L)
{
	return (double)L->in[0] * L->spec.kernel * L->spec.kernel * L->out[1] * L->out[2];
}

static int conv_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	size_t ckk = (size_t)L->in[0] * L->spec.kernel * L->spec.kernel;
	size_t ncol = B * L->out[1] * L->out[2];

	if (ckk * ncol > (size_t)INT32_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "training.batch_size: %zu samples make layer %d's im2col buffer too large",
		                B, i);
	if (dlk_layer_reserve_y(net, L, B))
		return 1;
	if (grouped(L)) {
		struct dlk_conv_more s = grouped_shape(L, (int)B);
		return (L->col = net->be->alloc(sizeof(float) * dlk_conv_grouped_scratch(&s))) ? 0 : 1;
	}
	/* a backend with its own convolution needs no im2col buffer of the batch */
	if (!net->be->conv_forward && !(L->col = net->be->alloc(sizeof(float) * ckk * ncol)))
		return 1;
	return 0;
}

static double conv_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	double bytes = 4 * B * (double)L->out_size;
	if (grouped(L))
		return bytes + 4 * B * (conv_values(L) + (double)L->out_size);
	if (!net->be->conv_forward)
		bytes += 4 * B * conv_values(L);
	return bytes;
}

static struct dlk_conv_shape conv_shape(const struct dlk_net *net, const struct dlk_layer *L, int batch)
{
	struct dlk_conv_shape s = { .batch = batch, .c = L->in[0], .h = L->in[1], .w = L->in[2], .f = L->out[0],
		                    .k = L->spec.kernel, .stride = L->spec.stride, .pad = L->spec.padding,
		                    .oh = L->out[1], .ow = L->out[2] };
	if (L->pool_layer) {
		const struct dlk_layer *M = &net->layers[L->pool_layer];
		s.pool = M->spec.size;
		s.pool_stride = M->spec.stride;
		s.ph = M->out[1];
		s.pw = M->out[2];
	}
	return s;
}

static const float *conv_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	const struct dlk_backend *be = net->be;
	struct dlk_layer *L = &net->layers[i];
	const float *W = net->params + L->w_off, *b = net->params + L->b_off;
	int k = L->spec.kernel, ohw = L->out[1] * L->out[2], ckk = L->in[0] * k * k;
	int ncol = batch * ohw;
	(void)training;

	if (grouped(L)) {
		struct dlk_conv_more s = grouped_shape(L, batch);
		dlk_conv_grouped_forward(be, x, W, b, &s, DLK_ACT_NONE, L->col, L->y);
		return L->y;
	}
	if (be->conv_forward) {
		struct dlk_conv_shape cs = conv_shape(net, L, batch);
		struct dlk_layer *M = L->pool_layer ? &net->layers[L->pool_layer] : NULL;
		be->conv_forward(x, W, b, &cs, L->act, L->y, M ? M->y : NULL, M ? M->argmax : NULL);
		return L->y;
	}
	be->im2col(x, batch, L->in[0], L->in[1], L->in[2], k, L->spec.stride, L->spec.padding, L->out[1], L->out[2],
	           L->col);
	/* the gradient buffers are idle during the forward pass: one holds the GEMM's
	 * [filters, batch*hw] result before it is reordered to NCHW */
	float *t = net->gbuf[0];
	be->sgemm(0, 0, L->out[0], ncol, ckk, 1.0f, W, ckk, L->col, ncol, 0.0f, t, ncol);
	be->conv_out(t, b, batch, L->out[0], ohw, L->act, L->y);
	return L->y;
}

static float *conv_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	const struct dlk_backend *be = net->be;
	struct dlk_layer *L = &net->layers[i];
	const float *W = net->params + L->w_off;
	float *dW = net->grads + L->w_off, *db = net->grads + L->b_off;
	int k = L->spec.kernel, ohw = L->out[1] * L->out[2], ckk = L->in[0] * k * k, f = L->out[0];
	int ncol = batch * ohw;

	if (grouped(L)) {
		struct dlk_conv_more s = grouped_shape(L, batch);
		dlk_conv_grouped_backward(be, L->x_used, W, g, &s, L->col, dW, db, L->need_dx ? gout : NULL);
		dlk_layer_grads_ready(net, L);
		return L->need_dx ? gout : g;
	}
	if (be->conv_backward) {
		struct dlk_conv_shape cs = conv_shape(net, L, batch);
		const struct dlk_layer *M = L->pool_layer ? &net->layers[L->pool_layer] : NULL;
		be->conv_backward(L->x_used, W, L->y, M ? M->y : NULL, g, M ? M->argmax : NULL, &cs, L->act, dW, db,
		                  L->need_dx ? gout : NULL);
		dlk_layer_grads_ready(net, L);
		return L->need_dx ? gout : g;
	}
	/* g is dead once reordered, and gout is written only by the final col2im, which
	 * no longer needs dt: so dt lives in gout's buffer */
	float *dt = gout;
	be->conv_grad_in(g, batch, f, ohw, dt);
	be->sgemm(0, 1, f, ckk, ncol, 1.0f, dt, ncol, L->col, ncol, 0.0f, dW, ckk);
	be->sum_cols(dt, f, ncol, db);
	dlk_layer_grads_ready(net, L);
	if (!L->need_dx)
		return g;
	/* the im2col buffer is no longer needed: it takes the column gradient */
	be->sgemm(1, 0, ckk, ncol, f, 1.0f, W, ckk, dt, ncol, 0.0f, L->col, ncol);
	be->col2im(L->col, batch, L->in[0], L->in[1], L->in[2], k, L->spec.stride, L->spec.padding, L->out[1],
	           L->out[2], gout);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_conv2d = {
	.check = conv_check,
	.shape = dlk_layer_shape,
	.params = conv_params,
	.decay = DLK_DECAY_WEIGHT,
	.reserve = conv_reserve,
	.batch_bytes = conv_bytes,
	.batch_values = conv_values,
	.forward = conv_forward,
	.backward = conv_backward,
};
