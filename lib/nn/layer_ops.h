/* The operations of one layer kind: how lib/nn/net.c checks, sizes, runs and differentiates a
 * layer of that kind. net.c knows no kind by itself; it walks the layers and calls the entry of
 * dlk_layer_ops[] for each one's spec.kind.
 *
 * Adding a kind:
 *   1. lib/project: its enum value (project.h), its name (layers.c's dlk_layer_names), its shape
 *      (dlk_layer_shape) and its fields in the loader;
 *   2. a file lib/nn/layer_KIND.c defining `const struct dlk_layer_ops dlk_layer_ops_KIND`;
 *   3. one line in lib/nn/layer_ops.c's table: `[DLK_LAYER_KIND] = &dlk_layer_ops_KIND`.
 * A NULL function pointer below means "nothing to do" where its comment says so.
 *
 * Conventions: activations are [batch, C, H, W] (a flat one [batch, n]) on the net's backend;
 * L->in/L->out are per-sample shapes; parameters live in net->params at L->w_off (n_w floats)
 * and L->b_off (n_b floats), their gradients at the same offsets in net->grads. */
#ifndef DLK_NN_LAYER_OPS_H
#define DLK_NN_LAYER_OPS_H

#include <stddef.h>

#include "lib/nn/net.h"
#include "lib/project/layers.h"
#include "lib/util/err.h"
#include "lib/util/rng.h"

enum { DLK_DECAY_WEIGHT = 1, DLK_DECAY_BIAS = 2 };

struct dlk_layer_ops {
	/* Checks the layer's own sizes (a model.json can carry what a project file cannot) and what
	 * it needs of its input shape L->in; w names the layer in messages ("model.layers[4] (dense,
	 * dlk.yaml:23)"). Sets err (DLK_EXIT_CONFIG) and returns -1 on error. NULL: nothing to check. */
	int (*check)(const struct dlk_layer *L, const char *w, struct dlk_err *err);
	/* The output shape from L->spec and the input shape: dlk_layer_shape() (lib/project/layers.h),
	 * which the project loader shares, for every kind; -1 when a window does not fit. */
	int (*shape)(const struct dlk_layer_spec *ls, const long long in[3], long long out[3]);
	/* Sets L->n_w, L->n_b (parameter counts, weights then biases in the flat arrays) and
	 * L->fan_in, L->fan_out (what initialisation uses) from L->in and L->spec. NULL: no parameters. */
	void (*params)(struct dlk_layer *L);
	/* Initial values of the layer's parameters into w (n_w floats) and b (n_b), drawing from r
	 * (uniform in [0, 1)) as the scheme `how` says (PyTorch's module's own initialisation for
	 * torch and xavier, GPT-2's for gpt2). NULL: the model's scheme (model.init) from fan_in and
	 * fan_out, as dense and conv2d. */
	void (*init)(const struct dlk_layer *L, const struct dlk_init *how, float *w, float *b, struct dlk_rng *r);
	/* Which of its tensors weight decay applies to (DLK_DECAY_WEIGHT, DLK_DECAY_BIAS): those of two
	 * or more dimensions, nanoGPT's groups (matrices, kernels, embedding tables); 0 for a norm's
	 * scale and shift. A bias (one dimension) is never decayed; state never. */
	unsigned decay;
	/* Allocates the per-batch buffers (L->y, L->col, L->argmax, ...) for B samples on net->be.
	 * Returns 0, 1 when the device is out of memory, or -1 with err set (a buffer over 2^31 values).
	 * NULL: the layer needs none (its output aliases its input). */
	int (*reserve)(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err);
	/* The bytes reserve() allocates for B samples (as a double, which cannot overflow). */
	double (*batch_bytes)(const struct dlk_net *net, const struct dlk_layer *L, double B);
	/* The values one sample needs in the layer's largest buffer beyond its input and output (conv's
	 * im2col), which bounds the batch to 2^31 values; NULL: none. */
	double (*batch_values)(const struct dlk_layer *L);
	/* Runs layer i on x ([batch, in_size]) and returns its output ([batch, out_size]: L->y, or x
	 * itself where the layer aliases or another layer did the work). training turns dropout on. */
	const float *(*forward)(struct dlk_net *net, int i, const float *x, int batch, int training);
	/* Differentiates layer i: g is the gradient of its output (may be overwritten); gout a free
	 * buffer as large as any activation. Writes its parameters' gradients (then calls
	 * dlk_layer_grads_ready) and, where L->need_dx, returns the gradient of its input: g (done in
	 * place) or gout. NULL: the gradient passes through unchanged (flatten). A layer with two
	 * inputs returns the gradient of its output; net.c hands each input its part. */
	float *(*backward)(struct dlk_net *net, int i, float *g, float *gout, int batch);
};

/* The operations of each kind, indexed by enum dlk_layer_kind (lib/nn/layer_ops.c). */
extern const struct dlk_layer_ops *const dlk_layer_ops[DLK_LAYER_KINDS];

/* The kinds of today, each in its file lib/nn/layer_*.c */
extern const struct dlk_layer_ops dlk_layer_ops_dense, dlk_layer_ops_conv2d, dlk_layer_ops_maxpool,
	dlk_layer_ops_flatten, dlk_layer_ops_act, dlk_layer_ops_dropout;
/* the graph's kinds (lib/nn/layer_graph.c) */
extern const struct dlk_layer_ops dlk_layer_ops_add, dlk_layer_ops_concat, dlk_layer_ops_globalavgpool;
/* the kinds of transformers (lib/nn/layer_seq.c) */
extern const struct dlk_layer_ops dlk_layer_ops_layernorm, dlk_layer_ops_gelu, dlk_layer_ops_softmax,
	dlk_layer_ops_embedding;
/* upsampling and a sequence's mean (lib/nn/layer_seq.c too: parameter-free, one backend call each way) */
extern const struct dlk_layer_ops dlk_layer_ops_upsample, dlk_layer_ops_meanpool;
/* multi-head self-attention (lib/nn/layer_attention.c) */
extern const struct dlk_layer_ops dlk_layer_ops_attention;
/* batch normalisation (lib/nn/layer_batchnorm.c) */
extern const struct dlk_layer_ops dlk_layer_ops_batchnorm;
/* transposed convolution and average pooling (lib/nn/layer_conv_more.c) */
extern const struct dlk_layer_ops dlk_layer_ops_convtranspose2d, dlk_layer_ops_avgpool;

/* Tells the net's communicator that layer L's gradients are final (backward calls it); its state
 * (n_s values after the bias, whose gradient stays 0) goes with them. */
static inline void dlk_layer_grads_ready(struct dlk_net *net, const struct dlk_layer *L)
{
	if (net->grad_ready)
		net->grad_ready(net->grad_ready_ctx, net->grads, net->n_params, L->w_off, L->n_w + L->n_b + L->n_s);
}

/* The tensors a layer keeps in the flat parameter array, by the names the bundle's safetensors
 * gives them (PyTorch's): weight and bias, and batch norm's state -- running_mean, running_var
 * [C] and num_batches_tracked (one value, F32 in the bundle where PyTorch has int64). */
enum { DLK_TENSOR_WEIGHT, DLK_TENSOR_BIAS, DLK_TENSOR_RUNNING_MEAN, DLK_TENSOR_RUNNING_VAR,
       DLK_TENSOR_NUM_BATCHES, DLK_TENSOR_KINDS };
extern const char *const dlk_tensor_names[DLK_TENSOR_KINDS];
/* How many values tensor t of L has (0: L has none) and where in the flat array (*off). */
size_t dlk_layer_tensor(const struct dlk_layer *L, int t, size_t *off);

/* DLK_ACT_* of an activation layer kind, DLK_ACT_NONE for any other kind. */
int dlk_layer_act(enum dlk_layer_kind k);
/* Allocates L->y for B samples of L->out_size values: 0, or 1 when out of memory. */
int dlk_layer_reserve_y(struct dlk_net *net, struct dlk_layer *L, size_t B);
/* A shape "has no channels or rows": [1, 1, n] */
static inline int dlk_shape_flat(const int s[3]) { return s[0] == 1 && s[1] == 1; }

#endif
