/* The bundle's GPT-2 as a Hugging Face checkpoint (see hf.h). GPT-2's Conv1D keeps its weight
 * [in, out] (y = x W + b), the transpose of PyTorch's nn.Linear [out, in] that the bundle keeps;
 * attention's in_proj (q, k, v rows) is c_attn and its out_proj c_proj. */
#include "lib/export/hf.h"

#include "lib/nn/layer_ops.h"
#include "lib/nn/kernels.h"
#include "lib/nn/net.h"
#include "lib/project/layers.h"
#include "lib/util/jsonprint.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DLK_VERSION
#define DLK_VERSION "unknown"
#endif

/* the layer a layer reads as its k-th input: -1 the model input */
static int input_of(const struct dlk_layer_spec *s, int i, int k)
{
	if (s->n_inputs == 0)
		return k == 0 ? i - 1 : -2;
	return k < s->n_inputs ? s->inputs[k] : -2;
}

static int reads(const struct dlk_layer_spec *s, int i, int from)
{
	return (s->n_inputs <= 1) && input_of(s, i, 0) == from;
}

static int adds(const struct dlk_layer_spec *s, int a, int b)
{
	return s->kind == DLK_LAYER_ADD && s->n_inputs == 2 &&
	       ((s->inputs[0] == a && s->inputs[1] == b) || (s->inputs[0] == b && s->inputs[1] == a));
}

static int refuse(const struct dlk_layer_spec *s, int i, const char *why, struct dlk_err *err)
{
	char w[256];

	dlk_layer_where(w, sizeof(w), i, s, "model.json");
	dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s", w, why);
	dlk_err_hint(err, "--hf writes GPT-2 (examples/gpt: dlk init --example gpt); other models: --onnx");
	return -1;
}

struct st_tensor {
	char name[64];
	long long shape[2];
	int rank;
	const float *src;  /* the bundle's values, [rows, cols] row-major */
	int transpose;     /* write src^T (src is [shape[1], shape[0]]) */
};

struct st_list {
	struct st_tensor *t;
	int n, cap;
};

static void st_add(struct st_list *l, const char *name, const float *src, long long d0, long long d1, int rank,
                   int transpose)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->t = realloc(l->t, sizeof(*l->t) * (size_t)l->cap);
		if (!l->t)
			abort();
	}
	struct st_tensor *t = &l->t[l->n++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->rank = rank;
	t->src = src;
	t->transpose = transpose;
}

static size_t st_count(const struct st_tensor *t)
{
	return (size_t)t->shape[0] * (size_t)(t->rank == 2 ? t->shape[1] : 1);
}

static void put_le(struct dlk_buf *out, float f)
{
	uint32_t u;
	unsigned char le[4];

	memcpy(&u, &f, 4);
	for (int k = 0; k < 4; k++)
		le[k] = (unsigned char)(u >> (8 * k));
	dlk_buf_add(out, le, 4);
}

static void st_write(const struct st_list *l, struct dlk_buf *out)
{
	cJSON *h = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(h, "__metadata__");
	size_t off = 0;

	cJSON_AddStringToObject(meta, "format", "pt");
	cJSON_AddStringToObject(meta, "producer", "dlk " DLK_VERSION);
	for (int i = 0; i < l->n; i++) {
		const struct st_tensor *t = &l->t[i];
		size_t n = st_count(t);
		cJSON *o = cJSON_AddObjectToObject(h, t->name);
		cJSON_AddStringToObject(o, "dtype", "F32");
		cJSON *s = cJSON_AddArrayToObject(o, "shape");
		for (int d = 0; d < t->rank; d++)
			cJSON_AddItemToArray(s, cJSON_CreateNumber((double)t->shape[d]));
		cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
		cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off * 4)));
		cJSON_AddItemToArray(of, cJSON_CreateNumber((double)((off + n) * 4)));
		off += n;
	}
	char *js = cJSON_PrintUnformatted(h);
	cJSON_Delete(h);
	size_t len = strlen(js), padded = (len + 7) & ~(size_t)7;
	unsigned char hl[8];
	for (int i = 0; i < 8; i++)
		hl[i] = (unsigned char)((uint64_t)padded >> (8 * i));
	dlk_buf_add(out, hl, 8);
	dlk_buf_add(out, js, len);
	for (size_t i = len; i < padded; i++)
		dlk_buf_addc(out, ' ');
	free(js);
	for (int i = 0; i < l->n; i++) {
		const struct st_tensor *t = &l->t[i];
		if (!t->transpose) {
			size_t n = st_count(t);
			for (size_t k = 0; k < n; k++)
				put_le(out, t->src[k]);
			continue;
		}
		/* out [r, c] = src [c, r] */
		for (long long r = 0; r < t->shape[0]; r++)
			for (long long c = 0; c < t->shape[1]; c++)
				put_le(out, t->src[c * t->shape[0] + r]);
	}
}

int dlk_hf_gpt2_export(const struct dlk_bundle *b, struct dlk_buf *config, struct dlk_buf *safetensors,
                       int *n_layer_out, struct dlk_err *err)
{
	struct dlk_net net = DLK_NET_INIT;
	struct st_list l = { NULL, 0, 0 };
	const float *W = b->weights;
	int n = b->model.n_layers, rc = -1, n_layer = 0, heads = 0, n_inner = 0, D, V, P, i;
	float eps = 0;
	char name[64];

	if (b->model.task != DLK_TASK_LM) {
		dlk_errf(err, DLK_EXIT_CONFIG, "--hf writes a language model (model.task lm); this bundle's task is not lm");
		return -1;
	}
	if (dlk_bundle_net(b, dlk_backend_cpu(), &net, err))
		return -1;
	const struct dlk_layer *Ls = net.layers;
	const struct dlk_layer_spec *s = &Ls[0].spec;
	if (n < 3 || s->kind != DLK_LAYER_EMBEDDING || !reads(s, 0, -1)) {
		refuse(s, 0, "GPT-2 starts with an embedding of the model input", err);
		goto out;
	}
	if (s->positions <= 0) {
		refuse(s, 0, "GPT-2's embedding has learned positions (embedding: {positions: N})", err);
		goto out;
	}
	D = s->dim;
	V = s->vocab;
	P = s->positions;
	st_add(&l, "transformer.wte.weight", W + Ls[0].w_off, V, D, 2, 0);
	st_add(&l, "transformer.wpe.weight", W + Ls[0].b_off, P, D, 2, 0);
	/* the blocks: x = the block's input */
	for (i = 1; i + 8 <= n - 2; i += 8) {
		int x = i - 1;
		const struct dlk_layer *L = &Ls[i];
		const char *why = NULL;
		int bad = i;
		if (L[0].spec.kind != DLK_LAYER_LAYERNORM || !reads(&L[0].spec, i, x))
			why = "GPT-2's block starts with a layernorm of the block's input";
		else if (L[1].spec.kind != DLK_LAYER_ATTENTION || !reads(&L[1].spec, i + 1, i))
			bad = i + 1, why = "GPT-2's block has attention after its first layernorm";
		else if (!L[1].spec.causal || L[1].spec.rotary || L[1].spec.pad_id >= 0)
			bad = i + 1, why = !L[1].spec.causal ? "GPT-2's attention is causal (this one is bidirectional)" :
			                  L[1].spec.rotary ? "GPT-2's attention has no rotary positions" :
			                                     "GPT-2's attention masks no padding (pad_id)";
		else if (!adds(&L[2].spec, x, i + 1))
			bad = i + 2, why = "GPT-2's block adds the attention to the block's input";
		else if (L[3].spec.kind != DLK_LAYER_LAYERNORM || !reads(&L[3].spec, i + 3, i + 2))
			bad = i + 3, why = "GPT-2's block has a layernorm after the attention's residual";
		else if (L[4].spec.kind != DLK_LAYER_DENSE || L[4].spec.tie || !reads(&L[4].spec, i + 4, i + 3))
			bad = i + 4, why = "GPT-2's MLP is dense, gelu (tanh), dense";
		else if (L[5].spec.kind != DLK_LAYER_GELU || L[5].spec.approximate != DLK_GELU_TANH ||
		         !reads(&L[5].spec, i + 5, i + 4))
			bad = i + 5, why = "GPT-2's MLP is dense, gelu (tanh), dense: gelu {approximate: tanh}";
		else if (L[6].spec.kind != DLK_LAYER_DENSE || L[6].spec.tie || L[6].spec.units != D ||
		         !reads(&L[6].spec, i + 6, i + 5))
			bad = i + 6, why = "GPT-2's MLP is dense, gelu (tanh), dense back to the model's width";
		else if (!adds(&L[7].spec, i + 2, i + 6))
			bad = i + 7, why = "GPT-2's block adds the MLP to the attention's residual";
		else if (n_layer && (L[1].spec.heads != heads || L[4].spec.units != n_inner))
			bad = i + 1, why = "GPT-2's blocks all have the same heads and MLP width";
		else if ((n_layer && (L[0].spec.eps != eps || L[3].spec.eps != eps)) || L[0].spec.eps != L[3].spec.eps)
			bad = i, why = "GPT-2's layernorms all have the same eps";
		else if (!L[0].n_b || !L[1].n_b || !L[3].n_b || !L[4].n_b || !L[6].n_b)
			bad = i, why = "GPT-2's layernorms, attention and dense layers have biases";
		if (why) {
			refuse(&Ls[bad].spec, bad, why, err);
			goto out;
		}
		heads = L[1].spec.heads;
		n_inner = L[4].spec.units;
		eps = L[0].spec.eps;
#define T(suffix) (snprintf(name, sizeof(name), "transformer.h.%d." suffix, n_layer), name)
		st_add(&l, T("ln_1.weight"), W + L[0].w_off, D, 0, 1, 0);
		st_add(&l, T("ln_1.bias"), W + L[0].b_off, D, 0, 1, 0);
		st_add(&l, T("attn.c_attn.weight"), W + L[1].w_off, D, 3 * D, 2, 1);
		st_add(&l, T("attn.c_attn.bias"), W + L[1].b_off, 3 * D, 0, 1, 0);
		st_add(&l, T("attn.c_proj.weight"), W + L[1].w_off + (size_t)3 * D * D, D, D, 2, 1);
		st_add(&l, T("attn.c_proj.bias"), W + L[1].b_off + 3 * D, D, 0, 1, 0);
		st_add(&l, T("ln_2.weight"), W + L[3].w_off, D, 0, 1, 0);
		st_add(&l, T("ln_2.bias"), W + L[3].b_off, D, 0, 1, 0);
		st_add(&l, T("mlp.c_fc.weight"), W + L[4].w_off, D, n_inner, 2, 1);
		st_add(&l, T("mlp.c_fc.bias"), W + L[4].b_off, n_inner, 0, 1, 0);
		st_add(&l, T("mlp.c_proj.weight"), W + L[6].w_off, n_inner, D, 2, 1);
		st_add(&l, T("mlp.c_proj.bias"), W + L[6].b_off, D, 0, 1, 0);
#undef T
		n_layer++;
	}
	if (!n_layer) {
		refuse(&Ls[1].spec, 1, "GPT-2 has at least one block (layernorm, attention, add, layernorm, dense, "
		       "gelu, dense, add) after its embedding", err);
		goto out;
	}
	if (i != n - 2 || Ls[i].spec.kind != DLK_LAYER_LAYERNORM || !reads(&Ls[i].spec, i, i - 1)) {
		refuse(&Ls[i].spec, i, "GPT-2 ends its blocks with a layernorm, then the head", err);
		goto out;
	}
	if (Ls[i].spec.eps != eps || !Ls[i].n_b) {
		refuse(&Ls[i].spec, i, "GPT-2's final layernorm has the blocks' eps and a bias", err);
		goto out;
	}
	if (Ls[i + 1].spec.kind != DLK_LAYER_DENSE || Ls[i + 1].spec.tie != 1 || !reads(&Ls[i + 1].spec, i + 1, i)) {
		refuse(&Ls[i + 1].spec, i + 1, "GPT-2's head is a dense tied to the embedding (dense: {tie: NAME})", err);
		goto out;
	}
	st_add(&l, "transformer.ln_f.weight", W + Ls[i].w_off, D, 0, 1, 0);
	st_add(&l, "transformer.ln_f.bias", W + Ls[i].b_off, D, 0, 1, 0);

	cJSON *c = cJSON_CreateObject();
	cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
	cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
	cJSON_AddStringToObject(c, "model_type", "gpt2");
	cJSON_AddNumberToObject(c, "vocab_size", V);
	cJSON_AddNumberToObject(c, "n_positions", P);
	cJSON_AddNumberToObject(c, "n_ctx", P);
	cJSON_AddNumberToObject(c, "n_embd", D);
	cJSON_AddNumberToObject(c, "n_layer", n_layer);
	cJSON_AddNumberToObject(c, "n_head", heads);
	cJSON_AddNumberToObject(c, "n_inner", n_inner);
	cJSON_AddStringToObject(c, "activation_function", "gelu_new");
	cJSON_AddNumberToObject(c, "layer_norm_epsilon", eps);
	cJSON_AddNumberToObject(c, "resid_pdrop", 0);
	cJSON_AddNumberToObject(c, "embd_pdrop", 0);
	cJSON_AddNumberToObject(c, "attn_pdrop", 0);
	cJSON_AddBoolToObject(c, "scale_attn_weights", 1);
	cJSON_AddBoolToObject(c, "tie_word_embeddings", 1);
	cJSON_AddNullToObject(c, "bos_token_id"); /* GPT2Config's 50256 is outside a byte vocabulary */
	cJSON_AddNullToObject(c, "eos_token_id");
	cJSON_AddNumberToObject(c, "initializer_range", 0.02);
	cJSON_AddStringToObject(c, "torch_dtype", "float32");
	cJSON_AddStringToObject(c, "dlk_version", DLK_VERSION);
	cJSON_AddStringToObject(c, "dlk_weights_sha256", b->weights_sha256);
	char *js = dlk_json_print(c);
	cJSON_Delete(c);
	dlk_buf_add(config, js, strlen(js));
	dlk_buf_addc(config, '\n');
	free(js);
	st_write(&l, safetensors);
	*n_layer_out = n_layer;
	rc = 0;
out:
	free(l.t);
	dlk_net_release(&net);
	return rc;
}
