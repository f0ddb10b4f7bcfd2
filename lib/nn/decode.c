/* The incremental forward of lib/nn/decode.h: each layer kind a causal language model is made of,
 * run over the rows of the new positions only (batch * n rows), and attention over its cache. */
#include "lib/nn/decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/cpu_gemv.h"
#include "lib/nn/kernels.h"
#include "lib/nn/layer_ops.h"
#include "lib/util/mem.h"

static int can_decode(const struct dlk_layer *L, const char *w, struct dlk_err *err)
{
	switch (L->spec.kind) {
	case DLK_LAYER_EMBEDDING:
	case DLK_LAYER_DENSE:
	case DLK_LAYER_LAYERNORM:
	case DLK_LAYER_GELU:
	case DLK_LAYER_RELU:
	case DLK_LAYER_TANH:
	case DLK_LAYER_SIGMOID:
	case DLK_LAYER_SOFTMAX:
	case DLK_LAYER_DROPOUT:
	case DLK_LAYER_ADD:
		break;
	case DLK_LAYER_ATTENTION:
		if (!L->spec.causal || L->spec.pad_id >= 0)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: generation needs causal attention without pad_id", w);
		break;
	default:
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: a %s layer cannot run one position at a time", w,
		                dlk_layer_name(L->spec.kind));
	}
	if (L->in[0] != 1 || (L->spec.kind != DLK_LAYER_EMBEDDING && L->in[1] != L->out[1]))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: not a layer over the positions of a sequence", w);
	return 0;
}

void dlk_decode_release(struct dlk_decode *d)
{
	if (!d->net)
		return;
	const struct dlk_backend *be = d->net->be;
	for (int i = 0; d->k && i < d->net->n_layers; i++) {
		be->free(d->k[i]);
		be->free(d->v[i]);
	}
	be->free(d->qkv);
	be->free(d->a);
	be->free(d->scores);
	free(d->k);
	free(d->v);
	free(d->outs);
	memset(d, 0, sizeof(*d));
}

int dlk_decode_begin(struct dlk_decode *d, struct dlk_net *net, int batch, int cap, struct dlk_err *err)
{
	const struct dlk_backend *be = net->be;
	char w[160];
	int T = net->input[0] * net->input[1] * net->input[2], width = 1, heads = 1;

	memset(d, 0, sizeof(*d));
	if (net->input[0] != 1 || net->input[1] != 1 || !net->n_layers ||
	    net->layers[0].spec.kind != DLK_LAYER_EMBEDDING)
		return dlk_errf(err, DLK_EXIT_CONFIG, "generation needs a model whose input is token ids and whose first "
		                "layer is an embedding");
	if (batch <= 0 || cap <= 0 || cap > T)
		return dlk_errf(err, DLK_EXIT_CONFIG, "generation: %d positions of %d samples do not fit the model's "
		                "context of %d", cap, batch, T);
	for (int i = 0; i < net->n_layers; i++) {
		const struct dlk_layer *L = &net->layers[i];
		dlk_layer_where(w, sizeof(w), i, &L->spec, NULL);
		if (can_decode(L, w, err))
			return -1;
		width = L->out[2] > width ? L->out[2] : width;
		heads = L->spec.kind == DLK_LAYER_ATTENTION && L->spec.heads > heads ? L->spec.heads : heads;
	}
	if (dlk_net_reserve(net, batch, err))
		return -1;
	d->net = net;
	d->batch = batch;
	d->cap = cap;
	d->k = xcalloc((size_t)net->n_layers, sizeof(*d->k));
	d->v = xcalloc((size_t)net->n_layers, sizeof(*d->v));
	d->outs = xcalloc((size_t)net->n_layers, sizeof(*d->outs));
	size_t rows = (size_t)batch * cap;
	int ok = (d->qkv = be->alloc(sizeof(float) * rows * 3 * width)) &&
	         (d->a = be->alloc(sizeof(float) * rows * width)) &&
	         (d->scores = be->alloc(sizeof(float) * ((size_t)2 * cap + rows * heads)));
	for (int i = 0; ok && i < net->n_layers; i++)
		if (net->layers[i].spec.kind == DLK_LAYER_ATTENTION)
			ok = (d->k[i] = be->alloc(sizeof(float) * rows * net->layers[i].in[2])) &&
			     (d->v[i] = be->alloc(sizeof(float) * rows * net->layers[i].in[2]));
	if (!ok) {
		dlk_decode_release(d);
		return dlk_errf(err, DLK_EXIT_FAIL, "%s: out of memory for a key/value cache of %d positions", be->name, cap);
	}
	return 0;
}

void dlk_decode_reset(struct dlk_decode *d) { d->len = 0; }

/* y[rows, n] = act(x[rows, k] W[n, k]^T + b); b NULL: x W^T alone (a tied head: no bias, no
 * activation) */
static void linear(const struct dlk_backend *be, const float *x, const float *W, const float *b, int rows, int k, int n,
                   int act, float *y)
{
	if (rows == 1 && be == dlk_backend_cpu()) { /* a step of one position (lib/nn/cpu_gemv.h says why) */
		dlk_cpu_gemv(W, x, k, n, y);
		if (b)
			be->bias_act(y, b, 1, n, act);
	} else if (b && be->dense_forward) {
		be->dense_forward(x, W, b, rows, k, n, act, y);
	} else {
		be->sgemm(0, 1, rows, n, k, 1.0f, x, k, W, k, 0.0f, y, n);
		if (b)
			be->bias_act(y, b, rows, n, act);
	}
}

static void attention_step(struct dlk_decode *d, int i, const float *x, int n, float *y)
{
	struct dlk_net *net = d->net;
	const struct dlk_backend *be = net->be;
	const struct dlk_layer *L = &net->layers[i];
	int D = L->in[2], H = L->spec.heads, hd = D / H, rows = d->batch * n;
	const float *W = net->params + L->w_off, *b = net->params + L->b_off;
	float scale = 1.0f / sqrtf((float)hd);

	linear(be, x, W, b, rows, D, 3 * D, DLK_ACT_NONE, d->qkv);
	if (L->spec.rotary)
		be->rotary(d->qkv, d->batch, n, H, hd, d->len, 0);
	for (int s = 0; s < d->batch; s++) /* the new keys and values join the cache */
		for (int t = 0; t < n; t++) {
			const float *r = d->qkv + ((size_t)s * n + t) * 3 * D;
			size_t at = ((size_t)s * d->cap + d->len + t) * D;
			be->copy(d->k[i] + at, r + D, sizeof(float) * D);
			be->copy(d->v[i] + at, r + 2 * D, sizeof(float) * D);
		}
	if (d->len == 0) { /* the prompt: the blocked attention over it, as a forward would */
		struct dlk_attn_shape sh = { .batch = d->batch, .T = n, .heads = H, .hd = hd, .causal = 1, .scale = scale };
		be->attention_forward(&sh, d->qkv, d->a, d->scores + 2 * d->cap);
	} else { /* each new query against the keys up to its own position */
		float *sc = d->scores, *p = d->scores + d->cap;
		for (int s = 0; s < d->batch; s++)
			for (int t = 0; t < n; t++)
				for (int h = 0; h < H; h++) {
					int m = d->len + t + 1;
					const float *q = d->qkv + ((size_t)s * n + t) * 3 * D + h * hd;
					const float *K = d->k[i] + (size_t)s * d->cap * D + h * hd;
					const float *V = d->v[i] + (size_t)s * d->cap * D + h * hd;
					be->sgemm(0, 1, 1, m, hd, scale, q, 3 * D, K, D, 0.0f, sc, m);
					be->softmax_forward(sc, p, 1, m);
					be->sgemm(0, 0, 1, hd, m, 1.0f, p, m, V, D, 0.0f, d->a + ((size_t)s * n + t) * D + h * hd, D);
				}
	}
	linear(be, d->a, W + (size_t)3 * D * D, b + 3 * D, rows, D, D, DLK_ACT_NONE, y);
}

const float *dlk_decode_step(struct dlk_decode *d, const float *ids, int n, struct dlk_err *err)
{
	struct dlk_net *net = d->net;
	const struct dlk_backend *be = net->be;
	const float *x = ids;

	if (n <= 0 || d->len + n > d->cap) {
		dlk_errf(err, DLK_EXIT_CONFIG, "generation: %d more positions after %d pass the cache's %d", n, d->len, d->cap);
		return NULL;
	}
	for (int i = 0; i < net->n_layers; i++) {
		struct dlk_layer *L = &net->layers[i];
		const float *P = net->params + L->w_off, *B = net->params + L->b_off;
		int W = L->out[2], rows = d->batch * n;
		size_t all = (size_t)rows * W;
		if (L->spec.n_inputs)
			x = L->spec.inputs[0] < 0 ? ids : d->outs[L->spec.inputs[0]];
		switch (L->spec.kind) {
		case DLK_LAYER_EMBEDDING:
			be->embedding_forward(x, P, rows, L->spec.vocab, W, L->y);
			if (L->n_b) /* each sample's rows plus the position rows [len, len + n) */
				be->bias_act(L->y, B + (size_t)d->len * W, d->batch, n * W, DLK_ACT_NONE);
			break;
		case DLK_LAYER_DENSE:
			if (L->spec.tie) /* a tied head: the embedding's table, no bias (as dense_forward) */
				linear(be, x, net->params + net->layers[L->spec.tie - 1].w_off, NULL, rows, L->in[2], W, DLK_ACT_NONE,
				       L->y);
			else
				linear(be, x, P, B, rows, L->in[2], W, L->act, L->y);
			break;
		case DLK_LAYER_LAYERNORM:
			be->layernorm_forward(x, P, B, rows, W, L->spec.eps, L->y, L->col, L->col + rows);
			break;
		case DLK_LAYER_GELU:
			be->gelu_forward(L->spec.approximate, x, L->y, all);
			break;
		case DLK_LAYER_SOFTMAX:
			be->softmax_forward(x, L->y, rows, W);
			break;
		case DLK_LAYER_RELU:
		case DLK_LAYER_TANH:
		case DLK_LAYER_SIGMOID:
			if (L->fused) { /* the dense before it applied it */
				d->outs[i] = x;
				continue;
			}
			be->act_forward(dlk_layer_act(L->spec.kind), x, L->y, all);
			break;
		case DLK_LAYER_DROPOUT:
			d->outs[i] = x;
			continue;
		case DLK_LAYER_ADD: {
			int src = L->spec.inputs[1];
			be->copy(L->y, x, sizeof(float) * all);
			be->axpy(all, 1.0f, src < 0 ? ids : d->outs[src], L->y);
			break;
		}
		case DLK_LAYER_ATTENTION:
			attention_step(d, i, x, n, L->y);
			break;
		default: /* dlk_decode_begin refused it */
			return NULL;
		}
		d->outs[i] = x = L->y;
	}
	d->len += n;
	return x;
}
