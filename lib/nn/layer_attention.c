/* attention: multi-head self-attention over a sequence [1, T, D], with its own projections, as
 * nn.MultiheadAttention (batch_first) and GPT-2's c_attn/c_proj compute it:
 *   qkv = x Wqkv^T + bqkv            [T, 3D]: q, k, v, each [heads, hd], hd = D / heads
 *   (rotary: q and k rotated by position, rotate-half form)
 *   a_h = softmax(q_h k_h^T / sqrt(hd) + mask) v_h   per head, dropout on the weights
 *   y = a Wo^T + bo                  [T, D]
 * The mask: causal (key after query), and with pad_id >= 0 every key whose model-input id is
 * pad_id (the model's input holds the T token ids). Parameters: weight [4D, D] = Wqkv [3D, D]
 * (PyTorch's in_proj_weight; GPT-2's c_attn.weight transposed) then Wo [D, D] (out_proj.weight),
 * bias [4D] = bqkv then bo. The attention itself is the backend's (blocked, never a T x T matrix:
 * lib/nn/cpu_attention.c); the projections are GEMMs over batch*T rows. */
#include "lib/nn/layer_ops.h"

#include <math.h>

#include "lib/nn/kernels.h"

/* the per-sample floats of the layer's work buffer L->col: qkv [T, 3D], the attention's output
 * a [T, D], lse [heads, T], dqkv [T, 3D], da [T, D] */
static size_t work_per_sample(const struct dlk_layer *L)
{
	size_t T = (size_t)L->in[1], D = (size_t)L->in[2];
	return T * (8 * D + (size_t)L->spec.heads);
}

struct att_bufs {
	float *qkv, *a, *lse, *dqkv, *da;
};

static struct att_bufs bufs_of(const struct dlk_layer *L, size_t B)
{
	size_t T = (size_t)L->in[1], D = (size_t)L->in[2];
	struct att_bufs z;
	z.qkv = L->col;
	z.a = z.qkv + B * T * 3 * D;
	z.lse = z.a + B * T * D;
	z.dqkv = z.lse + B * T * (size_t)L->spec.heads;
	z.da = z.dqkv + B * T * 3 * D;
	return z;
}

static int attention_check(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	const struct dlk_layer_spec *ls = &L->spec;
	char shp[64];

	if (L->in[0] != 1) {
		dlk_shape_str(L->in, shp, sizeof(shp));
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: expects a sequence [1, T, D] but gets %s", w, shp);
		return dlk_err_hint(err, "put an embedding (or a dense over positions) before it");
	}
	if (ls->heads <= 0 || L->in[2] % ls->heads)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: heads (%d) must divide the width D = %d", w, ls->heads, L->in[2]);
	if (ls->rotary && (L->in[2] / ls->heads) % 2)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: rotary needs an even head width, not %d (D %d / %d heads)", w,
		                L->in[2] / ls->heads, L->in[2], ls->heads);
	if (!(ls->rate >= 0.0f && ls->rate < 1.0f))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: dropout must be in [0, 1), not %g", w, (double)ls->rate);
	if ((double)L->in[1] * (double)L->in[1] * ls->heads > 9e15)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: a sequence of %d positions is too long", w, L->in[1]);
	return 0;
}

static void attention_params(struct dlk_layer *L)
{
	size_t D = (size_t)L->in[2];
	L->fan_in = L->fan_out = L->in[2];
	L->n_w = 4 * D * D;
	L->n_b = 4 * D;
}

/* torch, xavier: nn.MultiheadAttention's, in_proj xavier-uniform over [3D, D], out_proj as
 * nn.Linear (U(+-1/sqrt(D))); gpt2: GPT-2's c_attn N(0, 0.02^2) and c_proj N(0, 0.02^2), or
 * the residual branch's scaled one where an add reads the layer; both biases 0 */
static void attention_init(const struct dlk_layer *L, const struct dlk_init *how, float *w, float *b,
                           struct dlk_rng *r)
{
	size_t D = (size_t)L->in[2];
	float a = sqrtf(6.0f / (float)(4 * D)), o = 1.0f / sqrtf((float)D);
	if (how->scheme == DLK_INIT_GPT2) {
		float so = how->residual ? how->resid_std : how->std;
		for (size_t j = 0; j < 4 * D * D; j++)
			w[j] = (j < 3 * D * D ? how->std : so) * dlk_rng_normal(r);
		for (size_t j = 0; j < 4 * D; j++)
			b[j] = 0.0f;
		return;
	}
	for (size_t j = 0; j < 3 * D * D; j++)
		w[j] = a * (2.0f * dlk_rng_uniform(r) - 1.0f);
	for (size_t j = 3 * D * D; j < 4 * D * D; j++)
		w[j] = o * (2.0f * dlk_rng_uniform(r) - 1.0f);
	for (size_t j = 0; j < 4 * D; j++)
		b[j] = 0.0f;
}

static int attention_reserve(struct dlk_net *net, struct dlk_layer *L, int i, size_t B, struct dlk_err *err)
{
	if (L->spec.pad_id >= 0 && net->input_size != (size_t)L->in[1]) {
		char w[160];
		dlk_layer_where(w, sizeof(w), i, &L->spec, NULL);
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: pad_id masks the keys whose model-input id is %d, so the model's "
		                "input must be the %d token ids, not %zu values", w, L->spec.pad_id, L->in[1], net->input_size);
	}
	if (dlk_layer_reserve_y(net, L, B))
		return 1;
	return (L->col = net->be->alloc(sizeof(float) * B * work_per_sample(L))) ? 0 : 1;
}

static double attention_bytes(const struct dlk_net *net, const struct dlk_layer *L, double B)
{
	(void)net;
	return 4 * B * ((double)L->out_size + (double)work_per_sample(L));
}

static double attention_values(const struct dlk_layer *L) { return (double)work_per_sample(L); }

static struct dlk_attn_shape shape_of(const struct dlk_net *net, const struct dlk_layer *L, int batch)
{
	struct dlk_attn_shape s = { .batch = batch, .T = L->in[1], .heads = L->spec.heads, .causal = L->spec.causal };
	s.hd = L->in[2] / L->spec.heads;
	s.scale = 1.0f / sqrtf((float)s.hd);
	if (L->spec.pad_id >= 0) {
		s.ids = net->x_in;
		s.pad = (float)L->spec.pad_id;
	}
	if (L->drop_active) {
		s.dropout = L->spec.rate;
		s.seed = net->dropout_seed;
		s.offset = L->drop_offset;
	}
	return s;
}

/* y[rows, n] = x[rows, k] W[n, k]^T + b */
static void linear(const struct dlk_backend *be, const float *x, const float *W, const float *b, int rows, int k, int n,
                   float *y)
{
	if (be->dense_forward) {
		be->dense_forward(x, W, b, rows, k, n, DLK_ACT_NONE, y);
	} else {
		be->sgemm(0, 1, rows, n, k, 1.0f, x, k, W, k, 0.0f, y, n);
		be->bias_act(y, b, rows, n, DLK_ACT_NONE);
	}
}

static const float *attention_forward(struct dlk_net *net, int i, const float *x, int batch, int training)
{
	const struct dlk_backend *be = net->be;
	struct dlk_layer *L = &net->layers[i];
	int T = L->in[1], D = L->in[2], rows = batch * T;
	const float *W = net->params + L->w_off, *b = net->params + L->b_off;
	struct att_bufs z = bufs_of(L, (size_t)net->batch_cap);

	L->drop_active = training && L->spec.rate > 0.0f;
	if (L->drop_active) {
		L->drop_offset = net->dropout_counter;
		net->dropout_counter += (uint64_t)batch * (uint64_t)L->spec.heads * (uint64_t)T * (uint64_t)T;
	}
	struct dlk_attn_shape s = shape_of(net, L, batch);
	linear(be, x, W, b, rows, D, 3 * D, z.qkv);
	if (L->spec.rotary)
		be->rotary(z.qkv, batch, T, s.heads, s.hd, 0, 0);
	be->attention_forward(&s, z.qkv, z.a, z.lse);
	linear(be, z.a, W + (size_t)3 * D * D, b + 3 * D, rows, D, D, L->y);
	return L->y;
}

static float *attention_backward(struct dlk_net *net, int i, float *g, float *gout, int batch)
{
	const struct dlk_backend *be = net->be;
	struct dlk_layer *L = &net->layers[i];
	int T = L->in[1], D = L->in[2], rows = batch * T;
	const float *W = net->params + L->w_off;
	float *dW = net->grads + L->w_off, *db = net->grads + L->b_off;
	struct att_bufs z = bufs_of(L, (size_t)net->batch_cap);
	struct dlk_attn_shape s = shape_of(net, L, batch);
	const float *Wo = W + (size_t)3 * D * D;

	/* the output projection */
	be->sgemm(1, 0, D, D, rows, 1.0f, g, D, z.a, D, 0.0f, dW + (size_t)3 * D * D, D);
	be->sum_rows(g, rows, D, db + 3 * D);
	be->sgemm(0, 0, rows, D, D, 1.0f, g, D, Wo, D, 0.0f, z.da, D);
	/* the attention, then the rotation back */
	be->attention_backward(&s, z.qkv, z.a, z.lse, z.da, z.dqkv);
	if (L->spec.rotary)
		be->rotary(z.dqkv, batch, T, s.heads, s.hd, 0, 1);
	/* the input projection */
	be->sgemm(1, 0, 3 * D, D, rows, 1.0f, z.dqkv, 3 * D, L->x_used, D, 0.0f, dW, D);
	be->sum_rows(z.dqkv, rows, 3 * D, db);
	dlk_layer_grads_ready(net, L);
	if (!L->need_dx)
		return g;
	be->sgemm(0, 0, rows, D, 3 * D, 1.0f, z.dqkv, 3 * D, W, D, 0.0f, gout, D);
	return gout;
}

const struct dlk_layer_ops dlk_layer_ops_attention = {
	.check = attention_check,
	.shape = dlk_layer_shape,
	.params = attention_params,
	.init = attention_init,
	.decay = DLK_DECAY_WEIGHT,
	.reserve = attention_reserve,
	.batch_bytes = attention_bytes,
	.batch_values = attention_values,
	.forward = attention_forward,
	.backward = attention_backward,
};
