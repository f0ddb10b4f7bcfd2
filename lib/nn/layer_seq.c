/* The layer kinds transformers are made of: layernorm, gelu, softmax and embedding. Each works on
 * the last axis of its [C, H, W] input (W), so a sequence of T vectors of width d is [1, T, d];
 * the operations are the backend's (ABI 7, lib/nn/backend.h). Parameters are laid out and
 * initialised as PyTorch's modules do, so the bundle's safetensors load into nn.LayerNorm and
 * nn.Embedding by name and shape. */
#include "lib/nn/layer_ops.h"

#include <math.h>

#include "lib/nn/kernels.h"

static size_t rows_of(const struct dlk_layer *L) { return (size_t)L->in[0] * (size_t)L->in[1]; }

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

/* ---- layernorm: nn.LayerNorm(W, eps), weight 1 and bias 0 at the start ---- */

static int layernorm_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	if (!(L->spec.eps > 0.0f && L->spec.eps <= 1.0f))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: eps must be in (0, 1], not %g", w, (double)L->spec.eps);
	return 0;
}

static void layernorm_params(struct dlk_layer *L)
{
	L->fan_in = L->fan_out = L->in[2];
	L->n_w = L->n_b = (size_t)L->in[2];
}

static void layernorm_init(const struct dlk_layer *L, const struct dlk_init *how, float *w, float *b,
                           struct dlk_rng *r)
{
	(void)how;
	(void)r;
	for (size_t j = 0; j < L->n_w; j++)
		w[j] = 1.0f, b[j] = 0.0f;
}

/* y, then the rows' mean and rstd in L->col */
static int layernorm_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	(void)i, (void)err;
	if (dlk_layer_reserve_y(net, L, B))
		return 1;
	return (L->col = net->be->alloc(sizeof(float) * 2 * B * rows_of(L))) ? 0 : 1;
}

static double layernorm_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * B * ((double)L->out_size + 2.0 * (double)rows_of(L));
}

static const float *layernorm_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	int rows = batch * (int)rows_of(L);
	(void)training;
	net->be->layernorm_forward(x, net->params + L->w_off, net->params + L->b_off, rows, L->in[2], L->spec.eps, L->y,
	                           L->col, L->col + rows);
	return L->y;
}

static float *layernorm_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	int rows = batch * (int)rows_of(L);
	net->be->layernorm_backward(L->x_used, net->params + L->w_off, L->col, L->col + rows, g, rows, L->in[2], gout,
	                            net->grads + L->w_off, net->grads + L->b_off);
	dlk_layer_grads_ready(net, L);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_layernorm = {
	.check = layernorm_check,
	.shape = dlk_layer_shape,
	.params = layernorm_params,
	.init = layernorm_init,
	.reserve = layernorm_reserve,
	.batch_bytes = layernorm_bytes,
	.forward = layernorm_forward,
	.backward = layernorm_backward,
};

/* ---- gelu: nn.GELU(approximate="none" | "tanh"); the backward needs the input ---- */

static int gelu_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	if (L->spec.approximate != DLK_GELU_ERF && L->spec.approximate != DLK_GELU_TANH)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: approximate must be none or tanh", w);
	return 0;
}

static const float *gelu_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	(void)training;
	net->be->gelu_forward(L->spec.approximate, x, L->y, (size_t)batch * L->out_size);
	return L->y;
}

static float *gelu_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	net->be->gelu_backward(L->spec.approximate, L->x_used, g, gout, (size_t)batch * L->out_size);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_gelu = {
	.check = gelu_check,
	.shape = dlk_layer_shape,
	.reserve = y_reserve,
	.batch_bytes = y_bytes,
	.forward = gelu_forward,
	.backward = gelu_backward,
};

/* ---- softmax over the last axis (torch.softmax(x, -1)); the backward needs the output ---- */

static const float *softmax_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	(void)training;
	net->be->softmax_forward(x, L->y, batch * (int)rows_of(L), L->in[2]);
	return L->y;
}

static float *softmax_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	(void)gout;
	net->be->softmax_backward(L->y_used, g, g, batch * (int)rows_of(L), L->in[2]);
	return g;
}

const struct dlk_layer_ops dlk_layer_ops_softmax = {
	.shape = dlk_layer_shape,
	.reserve = y_reserve,
	.batch_bytes = y_bytes,
	.forward = softmax_forward,
	.backward = softmax_backward,
};

/* ---- embedding: nn.Embedding(vocab, dim), N(0, 1) at the start; every input value is a token
 * id (an integer held in a float), [C, H, W] of them become [1, C*H*W, dim]. positions: P adds
 * learned position embeddings (GPT-2's wpe added to wte): the layer's bias, [P, dim], N(0, 1) as
 * another nn.Embedding, row t added at position t; P >= the sequence's length ---- */

static int embedding_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	if (ls->vocab <= 0 || ls->vocab > (1 << 24) || ls->dim <= 0 || ls->dim > (1 << 16))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: vocab must be in 1..%d and dim in 1..%d (got %d, %d)", w, 1 << 24,
		                1 << 16, ls->vocab, ls->dim);
	if (ls->positions < 0 || (ls->positions > 0 && (size_t)ls->positions < L->in_size))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: positions (%d) must cover the %zu ids of a sample", w,
		                ls->positions, L->in_size);
	return 0;
}

static void embedding_params(struct dlk_layer *L)
{
	L->fan_in = L->spec.vocab;
	L->fan_out = L->spec.dim;
	L->n_w = (size_t)L->spec.vocab * (size_t)L->spec.dim;
	L->n_b = (size_t)L->spec.positions * (size_t)L->spec.dim;
}

static void embedding_init(const struct dlk_layer *L, const struct dlk_init *how, float *w, float *b,
                           struct dlk_rng *r)
{
	/* the token table, then the positions'. gpt2: both N(0, 0.02^2), GPT-2's wte and wpe. torch:
	 * nn.Embedding's N(0, 1), but a table tied to a head starts at N(0, 0.02^2): N(0, 1) would
	 * give the head's logits a standard deviation of sqrt(dim) and a first loss far above ln V */
	int gpt2 = how->scheme == DLK_INIT_GPT2;
	for (size_t j = 0; j < L->n_w + L->n_b; j++) {
		float v = dlk_rng_normal(r);
		if (j < L->n_w)
			w[j] = gpt2 || L->tied_by ? how->std * v : v;
		else
			b[j - L->n_w] = gpt2 ? how->std * v : v;
	}
}

static const float *embedding_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	(void)training;
	net->be->embedding_forward(x, net->params + L->w_off, batch * (int)L->in_size, L->spec.vocab, L->spec.dim, L->y);
	if (L->n_b) /* each sample's [T, dim] plus the first T rows of the position table */
		net->be->bias_act(L->y, net->params + L->b_off, batch, (int)L->out_size, DLK_ACT_NONE);
	return L->y;
}

/* the sparse gradient: the table's gradient is zeroed, then only the rows of the ids receive
 * theirs; ids have no gradient (zeros, where a layer below asks for one) */
static float *embedding_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	/* a table tied to a head already holds the head's gradient: this use adds to it */
	if (!L->tied_by)
		net->be->fill(net->grads + L->w_off, L->n_w, 0.0f);
	net->be->embedding_backward(L->x_used, g, batch * (int)L->in_size, L->spec.vocab, L->spec.dim,
	                            net->grads + L->w_off);
	if (L->n_b) { /* the rows past the sequence's length get none */
		net->be->fill(net->grads + L->b_off + L->out_size, L->n_b - L->out_size, 0.0f);
		net->be->sum_rows(g, batch, (int)L->out_size, net->grads + L->b_off);
	}
	dlk_layer_grads_ready(net, L);
	if (!L->need_dx)
		return g;
	net->be->fill(gout, (size_t)batch * L->in_size, 0.0f);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_embedding = {
	.check = embedding_check,
	.shape = dlk_layer_shape,
	.params = embedding_params,
	.init = embedding_init,
	.decay = DLK_DECAY_WEIGHT | DLK_DECAY_BIAS, /* the token table and the position table */
	.reserve = y_reserve,
	.batch_bytes = y_bytes,
	.forward = embedding_forward,
	.backward = embedding_backward,
};

/* ---- upsample: nn.Upsample(scale_factor=s, mode="nearest" | "bilinear"), align_corners=False ---- */

static int upsample_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	if (ls->scale < 1 || ls->scale > 64 || (ls->mode != DLK_UPSAMPLE_NEAREST && ls->mode != DLK_UPSAMPLE_BILINEAR))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: scale must be in 1..64 and mode nearest or bilinear", w);
	return 0;
}

static const float *upsample_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	(void)training;
	net->be->upsample_forward(x, batch * L->in[0], L->in[1], L->in[2], L->spec.scale, L->spec.mode, L->y);
	return L->y;
}

static float *upsample_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	net->be->upsample_backward(g, batch * L->in[0], L->in[1], L->in[2], L->spec.scale, L->spec.mode, gout);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_upsample = {
	.check = upsample_check,
	.shape = dlk_layer_shape,
	.reserve = y_reserve,
	.batch_bytes = y_bytes,
	.forward = upsample_forward,
	.backward = upsample_backward,
};

/* ---- meanpool: a sequence [1, T, D] becomes its mean over positions, D features (the mean
 * pooling of sentence encoders: x.sum(1) / T, or with pad_id, (x * mask).sum(1) / mask.sum(1)
 * where mask is the model-input ids != pad_id, as attention's pad_id masks keys). No
 * parameters; a sample all padding gives zeros. ---- */

static int meanpool_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	char shp[64];
	if (L->in[0] != 1) {
		dlk_shape_str(L->in, shp, sizeof(shp));
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: expects a sequence [1, T, D] but gets %s", w, shp);
		return dlk_err_hint(err, "put an embedding before it, or use globalavgpool over channels");
	}
	if (L->spec.pad_id < -1)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: pad_id must be -1 (none) or a token id, not %d", w, L->spec.pad_id);
	return 0;
}

static int meanpool_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	if (L->spec.pad_id >= 0 && net->input_size != (size_t)L->in[1]) {
		char w[160];
		dlk_layer_where(w, sizeof(w), i, &L->spec, NULL);
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: pad_id leaves out the positions whose model-input id is %d, so "
		                "the model's input must be the %d token ids, not %zu values", w, L->spec.pad_id, L->in[1],
		                net->input_size);
	}
	return dlk_layer_reserve_y(net, L, B);
}

/* the model's input ids when pad_id masks, else NULL (every position) */
static const float *meanpool_ids(const struct dlk_net *net, const struct dlk_layer *L)
{
	return L->spec.pad_id >= 0 ? net->x_in : NULL;
}

static const float *meanpool_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	struct dlk_layer *L = &net->layers[i];
	(void)training;
	net->be->seqpool_forward(x, meanpool_ids(net, L), (float)L->spec.pad_id, batch, L->in[1], L->in[2], L->y);
	return L->y;
}

static float *meanpool_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	struct dlk_layer *L = &net->layers[i];
	if (!L->need_dx)
		return g;
	net->be->seqpool_backward(g, meanpool_ids(net, L), (float)L->spec.pad_id, batch, L->in[1], L->in[2], gout);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_meanpool = {
	.check = meanpool_check,
	.shape = dlk_layer_shape,
	.reserve = meanpool_reserve,
	.batch_bytes = y_bytes,
	.forward = meanpool_forward,
	.backward = meanpool_backward,
};
