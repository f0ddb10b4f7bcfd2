/* The table of layer kinds: see lib/nn/layer_ops.h. */
#include "lib/nn/layer_ops.h"

#include "lib/nn/kernels.h"

const struct dlk_layer_ops *const dlk_layer_ops[DLK_LAYER_KINDS] = {
	[DLK_LAYER_DENSE] = &dlk_layer_ops_dense,
	[DLK_LAYER_CONV2D] = &dlk_layer_ops_conv2d,
	[DLK_LAYER_MAXPOOL] = &dlk_layer_ops_maxpool,
	[DLK_LAYER_FLATTEN] = &dlk_layer_ops_flatten,
	[DLK_LAYER_RELU] = &dlk_layer_ops_act,
	[DLK_LAYER_TANH] = &dlk_layer_ops_act,
	[DLK_LAYER_SIGMOID] = &dlk_layer_ops_act,
	[DLK_LAYER_DROPOUT] = &dlk_layer_ops_dropout,
	[DLK_LAYER_ADD] = &dlk_layer_ops_add,
	[DLK_LAYER_CONCAT] = &dlk_layer_ops_concat,
	[DLK_LAYER_GLOBALAVGPOOL] = &dlk_layer_ops_globalavgpool,
	[DLK_LAYER_LAYERNORM] = &dlk_layer_ops_layernorm,
	[DLK_LAYER_GELU] = &dlk_layer_ops_gelu,
	[DLK_LAYER_SOFTMAX] = &dlk_layer_ops_softmax,
	[DLK_LAYER_EMBEDDING] = &dlk_layer_ops_embedding,
	[DLK_LAYER_UPSAMPLE] = &dlk_layer_ops_upsample,
	[DLK_LAYER_ATTENTION] = &dlk_layer_ops_attention,
	[DLK_LAYER_BATCHNORM] = &dlk_layer_ops_batchnorm,
	[DLK_LAYER_AVGPOOL] = &dlk_layer_ops_avgpool,
	[DLK_LAYER_CONVTRANSPOSE2D] = &dlk_layer_ops_convtranspose2d,
	[DLK_LAYER_RESHAPE] = &dlk_layer_ops_flatten, /* a new shape over the same values, as flatten */
	[DLK_LAYER_MEANPOOL] = &dlk_layer_ops_meanpool,
};

const char *const dlk_tensor_names[DLK_TENSOR_KINDS] = { "weight", "bias", "running_mean", "running_var",
	                                                  "num_batches_tracked" };

size_t dlk_layer_tensor(const struct dlk_layer *L, int t, size_t *off)
{
	size_t c = L->n_s ? (L->n_s - 1) / 2 : 0; /* batch norm's state: mean [C], var [C], count */

	if (!L->n_w)
		return 0;
	switch (t) {
	case DLK_TENSOR_WEIGHT: *off = L->w_off; return L->n_w;
	case DLK_TENSOR_BIAS: *off = L->b_off; return L->n_b;
	case DLK_TENSOR_RUNNING_MEAN: *off = L->s_off; return c;
	case DLK_TENSOR_RUNNING_VAR: *off = L->s_off + c; return c;
	case DLK_TENSOR_NUM_BATCHES: *off = L->s_off + 2 * c; return L->n_s ? 1 : 0;
	default: return 0;
	}
}

int dlk_layer_act(enum dlk_layer_kind k)
{
	switch (k) {
	case DLK_LAYER_RELU: return DLK_ACT_RELU;
	case DLK_LAYER_TANH: return DLK_ACT_TANH;
	case DLK_LAYER_SIGMOID: return DLK_ACT_SIGMOID;
	default: return DLK_ACT_NONE;
	}
}

/* a plain per-sample output buffer: what most kinds reserve */
int dlk_layer_reserve_y(struct dlk_net *net, struct dlk_layer *L, size_t B)
{
	L->y = net->be->alloc(sizeof(float) * B * L->out_size);
	return L->y ? 0 : 1;
}
