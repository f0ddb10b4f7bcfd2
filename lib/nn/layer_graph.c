/* The kinds a graph needs: add and concat (two inputs), globalavgpool. They use only the
 * backend's copy, axpy and sgemm, so every backend runs them. How a gradient reaches each of a
 * layer's inputs (both of add's, its slice of concat's) is net.c's part (dlk_net_backward). */
#include "lib/nn/layer_ops.h"

static int y_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	(void)i, (void)err;
	return dlk_layer_reserve_y(net, L, B);
}

static double y_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * B * (double)L->out_size;
}

/* the second input of layer i: the output its forward read */
static const float *second_input(const struct dlk_net *net, const struct dlk_layer *L, const float *model_x)
{
	return L->spec.inputs[1] < 0 ? model_x : net->layers[L->spec.inputs[1]].y_used;
}

/* add: y = a + b */
static const float *add_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	size_t n = (size_t)batch * L->out_size;
	(void)training;

	if (net->be->add) {
		net->be->add(x, second_input(net, L, net->x_in), L->y, n);
		return L->y;
	}
	net->be->copy(L->y, x, sizeof(float) * n);
	net->be->axpy(n, 1.0f, second_input(net, L, net->x_in), L->y);
	return L->y;
}

/* both inputs get the gradient as it is */
static float *pass_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	(void)net, (void)i, (void)gout, (void)batch;
	return g;
}

const struct dlk_layer_ops dlk_layer_ops_add = {
	.reserve = y_reserve,
	.batch_bytes = y_bytes,
	.forward = add_forward,
	.backward = pass_backward,
};

/* concat: per sample, a's values then b's (along channels in NCHW) */
static const float *concat_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	const float *x2 = second_input(net, L, net->x_in);
	size_t na = L->in_size, nb = L->out_size - L->in_size;
	(void)training;

	size_t ld = sizeof(float) * L->out_size;
	dlk_be_copy_rows(net->be, L->y, ld, x, sizeof(float) * na, (size_t)batch, sizeof(float) * na);
	dlk_be_copy_rows(net->be, L->y + na, ld, x2, sizeof(float) * nb, (size_t)batch, sizeof(float) * nb);
	return L->y;
}

const struct dlk_layer_ops dlk_layer_ops_concat = {
	.reserve = y_reserve,
	.batch_bytes = y_bytes,
	.forward = concat_forward,
	.backward = pass_backward,
};

/* globalavgpool: y[s, c] = mean of x[s, c, :, :], one GEMM against a vector of 1/HW (L->col) */
static int gap_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	if (dlk_shape_flat(L->in))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: expects an image input [C, H, W] but its input is flat", w);
	return 0;
}

static int gap_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	size_t hw = (size_t)L->in[1] * L->in[2];
	(void)i, (void)err;
	if (dlk_layer_reserve_y(net, L, B) || !(L->col = net->be->alloc(sizeof(float) * hw)))
		return 1;
	net->be->fill(L->col, hw, 1.0f / (float)hw);
	return 0;
}

static double gap_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * B * (double)L->out_size + 4 * (double)L->in[1] * L->in[2];
}

static const float *gap_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	int hw = L->in[1] * L->in[2], rows = batch * L->in[0];
	(void)training;

	net->be->sgemm(0, 0, rows, 1, hw, 1.0f, x, hw, L->col, 1, 0.0f, L->y, 1);
	return L->y;
}

static float *gap_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	int hw = L->in[1] * L->in[2], rows = batch * L->in[0];

	net->be->sgemm(0, 0, rows, hw, 1, 1.0f, g, 1, L->col, hw, 0.0f, gout, hw);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_globalavgpool = {
	.check = gap_check,
	.shape = dlk_layer_shape,
	.reserve = gap_reserve,
	.batch_bytes = gap_bytes,
	.forward = gap_forward,
	.backward = gap_backward,
};
