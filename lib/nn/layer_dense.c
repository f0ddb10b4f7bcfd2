/* dense: y = x W^T + b (W is [units, in]), with the activation after it fused when plan_passes
 * says so (L->act). Over the last axis, as nn.Linear: a flat input [1, 1, in] is one row per
 * sample, a sequence [1, T, in] is T rows per sample, and the GEMMs run over batch * T rows. */
#include "lib/nn/layer_ops.h"

#include "lib/nn/kernels.h"

static int dense_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	char shp[64];

	if (ls->units <= 0 || ls->units > (1 << 24))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: units must be in 1..%d, not %d", w, 1 << 24, ls->units);
	if (L->in[0] != 1) {
		dlk_shape_str(L->in, shp, sizeof(shp));
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: expects a flat input or a sequence [1, T, D] but gets %s", w, shp);
		return dlk_err_hint(err, "add 'flatten' before it");
	}
	return 0;
}

/* the rows one GEMM runs over: a position of every sample */
static int dense_rows(const struct dlk_layer *L, int batch) { return batch * L->in[1]; }

static void dense_params(struct dlk_layer *L)
{
	L->fan_in = L->in[2];
	L->fan_out = L->spec.units;
	L->n_w = (size_t)L->spec.units * (size_t)L->in[2];
	L->n_b = (size_t)L->spec.units;
}

static int dense_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	(void)i, (void)err;
	return dlk_layer_reserve_y(net, L, B);
}

static double dense_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * B * (double)L->out_size;
}

static const float *dense_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	const struct dlk_backend *be = net->be;
	struct dlk_layer *L = &net->layers[i];
	const float *W = net->params + L->w_off, *b = net->params + L->b_off;
	int rows = dense_rows(L, batch);
	(void)training;

	if (L->spec.tie) {
		/* a tied head: the embedding's table as the weight, no bias, no fused activation */
		W = net->params + net->layers[L->spec.tie - 1].w_off;
		be->sgemm(0, 1, rows, L->out[2], L->in[2], 1.0f, x, L->in[2], W, L->in[2], 0.0f, L->y, L->out[2]);
		return L->y;
	}
	if (be->dense_forward) {
		be->dense_forward(x, W, b, rows, L->in[2], L->out[2], L->act, L->y);
	} else {
		be->sgemm(0, 1, rows, L->out[2], L->in[2], 1.0f, x, L->in[2], W, L->in[2], 0.0f, L->y, L->out[2]);
		be->bias_act(L->y, b, rows, L->out[2], L->act);
	}
	return L->y;
}

static float *dense_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	const struct dlk_backend *be = net->be;
	struct dlk_layer *L = &net->layers[i];
	const float *W = net->params + L->w_off;
	float *dW = net->grads + L->w_off, *db = net->grads + L->b_off;
	int in = L->in[2], out = L->out[2];
	int rows = dense_rows(L, batch);
	struct dlk_layer *A = i > 0 ? &net->layers[i - 1] : NULL;

	if (A)
		A->folded_bw = 0;
	if (L->spec.tie) {
		/* the table's gradient from the head, written first (backward runs from the last layer);
		 * the embedding adds its own and then says the table is ready */
		W = net->params + net->layers[L->spec.tie - 1].w_off;
		dW = net->grads + net->layers[L->spec.tie - 1].w_off;
		be->sgemm(1, 0, out, in, rows, 1.0f, g, out, L->x_used, in, 0.0f, dW, in);
	} else if (be->dense_backward_w) {
		be->dense_backward_w(g, L->x_used, rows, in, out, dW, db);
	} else {
		be->sgemm(1, 0, out, in, rows, 1.0f, g, out, L->x_used, in, 0.0f, dW, in);
		be->sum_rows(g, rows, out, db);
	}
	if (!L->spec.tie)
		dlk_layer_grads_ready(net, L);
	if (!L->need_dx)
		return g;
	if (be->dense_backward_x && !L->spec.tie) {
		/* an activation layer just below is differentiated in the same pass */
		int act = A && !net->graph ? dlk_layer_act(A->spec.kind) : DLK_ACT_NONE;
		be->dense_backward_x(g, W, rows, in, out, act, act != DLK_ACT_NONE ? A->y_used : NULL, gout);
		if (act != DLK_ACT_NONE)
			A->folded_bw = 1;
	} else {
		be->sgemm(0, 0, rows, in, out, 1.0f, g, out, W, in, 0.0f, gout, in);
	}
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_dense = {
	.check = dense_check,
	.shape = dlk_layer_shape,
	.params = dense_params,
	.decay = DLK_DECAY_WEIGHT,
	.reserve = dense_reserve,
	.batch_bytes = dense_bytes,
	.forward = dense_forward,
	.backward = dense_backward,
};
