/* The bundle's GPT-2 as a Hugging Face checkpoint (see hf.h). GPT-2's Conv1D keeps its weight
 * [in, out] (y = x W + b), the transpose of PyTorch's nn.Linear [out, in] that the bundle keeps;
 * attention's in_proj (q, k, v rows) is c_attn and its out_proj c_proj. */
#include "lib/export/hf.h"

#include "lib/nn/layer_ops.h"
#include "lib/nn/kernels.h"
#include "lib/nn/net.h"
#include "lib/project/layers.h"
#include "lib/util/fsutil.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/safetensors.h"
#include "lib/util/utf8.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int refuse(const struct dlk_layer_spec *s, int i, const char *file, int importing, const char *why,
                  struct dlk_err *err)
{
	char w[256];

	dlk_layer_where(w, sizeof(w), i, s, file);
	dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s", w, why);
	if (importing)
		dlk_err_hint(err, "model.init_from loads GPT-2 into a GPT-2 project (examples/gpt: dlk init --example gpt)");
	else
		dlk_err_hint(err, "--hf writes GPT-2 (examples/gpt: dlk init --example gpt); other models: --onnx");
	return -1;
}

static void add(struct dlk_hf_gpt2 *m, const char *name, int layer, size_t off, long long d0, long long d1, int rank,
                int transpose)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 64;
		m->t = xrealloc(m->t, sizeof(*m->t) * (size_t)m->cap);
	}
	struct dlk_hf_tensor *t = &m->t[m->n++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->layer = layer;
	t->off = off;
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->rank = rank;
	t->transpose = transpose;
}

void dlk_hf_gpt2_release(struct dlk_hf_gpt2 *m)
{
	free(m->t);
	memset(m, 0, sizeof(*m));
}

int dlk_hf_gpt2_map(const struct dlk_net *net, const char *file, int importing, struct dlk_hf_gpt2 *m,
                    struct dlk_err *err)
{
	const struct dlk_layer *Ls = net->layers;
	const struct dlk_layer_spec *s = &Ls[0].spec;
	int n = net->n_layers, n_layer = 0, heads = 0, n_inner = 0, D, i;
	float eps = 0;
	char name[64];

	memset(m, 0, sizeof(*m));
	if (n < 3 || s->kind != DLK_LAYER_EMBEDDING || !reads(s, 0, -1))
		return refuse(s, 0, file, importing, "GPT-2 starts with an embedding of the model input", err);
	if (s->positions <= 0)
		return refuse(s, 0, file, importing, "GPT-2's embedding has learned positions (embedding: {positions: N})",
		              err);
	D = s->dim;
	m->D = D;
	m->V = s->vocab;
	m->P = s->positions;
	add(m, "transformer.wte.weight", 0, Ls[0].w_off, m->V, D, 2, 0);
	add(m, "transformer.wpe.weight", 0, Ls[0].b_off, m->P, D, 2, 0);
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
			dlk_hf_gpt2_release(m);
			return refuse(&Ls[bad].spec, bad, file, importing, why, err);
		}
		heads = L[1].spec.heads;
		n_inner = L[4].spec.units;
		eps = L[0].spec.eps;
#define T(suffix) (snprintf(name, sizeof(name), "transformer.h.%d." suffix, n_layer), name)
		add(m, T("ln_1.weight"), i, L[0].w_off, D, 0, 1, 0);
		add(m, T("ln_1.bias"), i, L[0].b_off, D, 0, 1, 0);
		add(m, T("attn.c_attn.weight"), i + 1, L[1].w_off, D, 3 * D, 2, 1);
		add(m, T("attn.c_attn.bias"), i + 1, L[1].b_off, 3 * D, 0, 1, 0);
		add(m, T("attn.c_proj.weight"), i + 1, L[1].w_off + (size_t)3 * D * D, D, D, 2, 1);
		add(m, T("attn.c_proj.bias"), i + 1, L[1].b_off + 3 * D, D, 0, 1, 0);
		add(m, T("ln_2.weight"), i + 3, L[3].w_off, D, 0, 1, 0);
		add(m, T("ln_2.bias"), i + 3, L[3].b_off, D, 0, 1, 0);
		add(m, T("mlp.c_fc.weight"), i + 4, L[4].w_off, D, n_inner, 2, 1);
		add(m, T("mlp.c_fc.bias"), i + 4, L[4].b_off, n_inner, 0, 1, 0);
		add(m, T("mlp.c_proj.weight"), i + 6, L[6].w_off, n_inner, D, 2, 1);
		add(m, T("mlp.c_proj.bias"), i + 6, L[6].b_off, D, 0, 1, 0);
#undef T
		n_layer++;
	}
	const char *why = NULL;
	int bad = i;
	if (!n_layer)
		bad = 1, why = "GPT-2 has at least one block (layernorm, attention, add, layernorm, dense, gelu, dense, "
		               "add) after its embedding";
	else if (i != n - 2 || Ls[i].spec.kind != DLK_LAYER_LAYERNORM || !reads(&Ls[i].spec, i, i - 1))
		why = "GPT-2 ends its blocks with a layernorm, then the head";
	else if (Ls[i].spec.eps != eps || !Ls[i].n_b)
		why = "GPT-2's final layernorm has the blocks' eps and a bias";
	else if (Ls[i + 1].spec.kind != DLK_LAYER_DENSE || Ls[i + 1].spec.tie != 1 || !reads(&Ls[i + 1].spec, i + 1, i))
		bad = i + 1, why = "GPT-2's head is a dense tied to the embedding (dense: {tie: NAME})";
	if (why) {
		dlk_hf_gpt2_release(m);
		return refuse(&Ls[bad].spec, bad, file, importing, why, err);
	}
	add(m, "transformer.ln_f.weight", i, Ls[i].w_off, D, 0, 1, 0);
	add(m, "transformer.ln_f.bias", i, Ls[i].b_off, D, 0, 1, 0);
	m->n_layer = n_layer;
	m->heads = heads;
	m->n_inner = n_inner;
	m->eps = eps;
	return 0;
}

int dlk_hf_gpt2_export(const struct dlk_bundle *b, struct dlk_buf *config, struct dlk_buf *safetensors,
                       int *n_layer_out, struct dlk_err *err)
{
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_hf_gpt2 m;
	struct dlk_st_list l = { NULL, 0, 0 };

	if (b->model.task != DLK_TASK_LM) {
		dlk_errf(err, DLK_EXIT_CONFIG, "--hf writes a language model (model.task lm); this bundle's task is not lm");
		return -1;
	}
	if (dlk_bundle_net(b, dlk_backend_cpu(), &net, err))
		return -1;
	if (dlk_hf_gpt2_map(&net, "model.json", 0, &m, err)) {
		dlk_net_release(&net);
		return -1;
	}
	for (int k = 0; k < m.n; k++)
		dlk_st_add(&l, m.t[k].name, b->weights + m.t[k].off, m.t[k].rank, m.t[k].shape, m.t[k].transpose);
	int n_layer = m.n_layer, heads = m.heads, n_inner = m.n_inner, D = m.D, V = m.V, P = m.P;
	float eps = m.eps;
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
	dlk_st_write(&l, safetensors);
	*n_layer_out = n_layer;
	dlk_st_list_release(&l);
	dlk_hf_gpt2_release(&m);
	dlk_net_release(&net);
	return 0;
}

/* ---- model.init_from ---- */

/* config.json's integer `key` must be `want` (the project's value, `what`); absent: `def`
 * (GPT2Config's default, or -1 when the field is required) */
static int config_int(const cJSON *c, const char *path, const char *key, long long def, long long want,
                      const char *what, const struct dlk_layer_spec *s, int li, const char *file, struct dlk_err *err)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(c, key);
	long long v = def;
	char w[256];

	if (x && !cJSON_IsNull(x)) {
		if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > 1e15)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s is not a whole number", path, key);
		v = (long long)x->valuedouble;
	} else if (def < 0) {
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s is missing", path, key);
	}
	if (v == want)
		return 0;
	dlk_layer_where(w, sizeof(w), li, s, file);
	dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s is %lld, but the project's %s is %lld (%s)", path, key, v, what, want, w);
	return dlk_err_hint(err, "make the project's model match the checkpoint's config.json");
}

static int check_config(const cJSON *c, const char *path, const struct dlk_hf_gpt2 *m, const struct dlk_net *net,
                        const char *file, struct dlk_err *err)
{
	const struct dlk_layer *Ls = net->layers;
	const cJSON *x;

	if (!cJSON_IsObject(c))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: not a JSON object", path);
	x = cJSON_GetObjectItemCaseSensitive(c, "model_type");
	if (x && (!cJSON_IsString(x) || strcmp(x->valuestring, "gpt2")))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: model_type is %s, not gpt2", path,
		                cJSON_IsString(x) ? dlk_visible(x->valuestring) : "not a string");
	if (config_int(c, path, "n_embd", 768, m->D, "width (embedding dim)", &Ls[0].spec, 0, file, err) ||
	    config_int(c, path, "vocab_size", 50257, m->V, "vocabulary", &Ls[0].spec, 0, file, err) ||
	    config_int(c, path, "n_layer", 12, m->n_layer, "number of blocks", &Ls[1].spec, 1, file, err) ||
	    config_int(c, path, "n_head", 12, m->heads, "attention heads", &Ls[2].spec, 2, file, err))
		return -1;
	x = cJSON_GetObjectItemCaseSensitive(c, "n_inner");
	if (!x || cJSON_IsNull(x)) { /* GPT2Config: 4 x n_embd */
		if (m->n_inner != 4 * m->D) {
			char w[256];
			dlk_layer_where(w, sizeof(w), 5, &Ls[5].spec, file);
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: n_inner is null (4 x n_embd = %d), but the project's MLP "
			                "width is %d (%s)", path, 4 * m->D, m->n_inner, w);
		}
	} else if (config_int(c, path, "n_inner", -1, m->n_inner, "MLP width", &Ls[5].spec, 5, file, err)) {
		return -1;
	}
	x = cJSON_GetObjectItemCaseSensitive(c, "n_positions");
	if (x && (!cJSON_IsNumber(x) || x->valuedouble < m->P)) {
		char w[256];
		dlk_layer_where(w, sizeof(w), 0, &Ls[0].spec, file);
		if (!cJSON_IsNumber(x))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: n_positions is not a number", path);
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: n_positions is %g, fewer than the project's %d positions (%s)",
		                path, x->valuedouble, m->P, w);
	}
	x = cJSON_GetObjectItemCaseSensitive(c, "layer_norm_epsilon");
	double eps = x && cJSON_IsNumber(x) ? x->valuedouble : 1e-5;
	if (fabs(eps - m->eps) > 1e-6 * fabs(eps)) {
		char w[256];
		dlk_layer_where(w, sizeof(w), 1, &Ls[1].spec, file);
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: layer_norm_epsilon is %g, but the project's layernorms have eps %g (%s)",
		         path, eps, (double)m->eps, w);
		return dlk_err_hint(err, "set layernorm: {eps: %g}", eps);
	}
	x = cJSON_GetObjectItemCaseSensitive(c, "activation_function");
	if (x && (!cJSON_IsString(x) ||
	          (strcmp(x->valuestring, "gelu_new") && strcmp(x->valuestring, "gelu_pytorch_tanh") &&
	           strcmp(x->valuestring, "gelu_fast")))) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: activation_function is %s; dlk's GPT-2 uses the tanh GELU (gelu_new)",
		         path, cJSON_IsString(x) ? dlk_visible(x->valuestring) : "not a string");
		return -1;
	}
	x = cJSON_GetObjectItemCaseSensitive(c, "tie_word_embeddings");
	if (x && cJSON_IsFalse(x))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: tie_word_embeddings is false; dlk's GPT-2 ties its head to "
		                "the embedding", path);
	return 0;
}

int dlk_hf_gpt2_import(struct dlk_net *net, const char *dir, const char *file, struct dlk_err *err)
{
	struct dlk_hf_gpt2 m;
	struct dlk_st_file f = { 0 };
	struct dlk_buf cfg = DLK_BUF_INIT;
	cJSON *c = NULL;
	char *cpath = xasprintf("%s/config.json", dir), *spath = xasprintf("%s/model.safetensors", dir), msg[256];
	void *map = MAP_FAILED;
	size_t len = 0;
	float *host = NULL;
	int rc = -1, fd = -1;

	if (dlk_hf_gpt2_map(net, file, 1, &m, err))
		goto out;
	if (dlk_buf_read_file(&cfg, cpath, 1 << 20, msg, sizeof(msg))) {
		dlk_errf(err, DLK_EXIT_CONFIG, "model.init_from: %s", msg);
		dlk_err_hint(err, "model.init_from names a Hugging Face GPT-2 directory (config.json, model.safetensors)");
		goto out;
	}
	c = cJSON_ParseWithLength(cfg.data, cfg.len);
	if (!c) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: not JSON", dlk_visible(cpath));
		goto out;
	}
	if (check_config(c, dlk_visible(cpath), &m, net, file, err))
		goto out;
	fd = dlk_open_regular(spath, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "model.init_from: cannot read '%s': %s", dlk_visible(spath),
		         fd < 0 ? dlk_open_strerror(errno) : strerror(errno));
		goto out;
	}
	len = (size_t)st.st_size;
	if (len && (map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
		dlk_errf(err, DLK_EXIT_FAIL, "model.init_from: cannot map '%s': %s", dlk_visible(spath), strerror(errno));
		goto out;
	}
	if (dlk_st_parse(len ? map : (const void *)"", len, dlk_visible(spath), &f, err))
		goto out;
	host = xmalloc(sizeof(float) * (net->n_params ? net->n_params : 1));
	net->be->to_host(host, net->params, sizeof(float) * net->n_params);
	for (int k = 0; k < m.n; k++) {
		const struct dlk_hf_tensor *h = &m.t[k];
		const struct dlk_st_tensor *t = dlk_st_find(&f, h->name);
		char w[256], a[96], b[96];
		if (!t) /* the hub's gpt2 names its tensors without "transformer." */
			t = dlk_st_find(&f, h->name + strlen("transformer."));
		dlk_layer_where(w, sizeof(w), h->layer, &net->layers[h->layer].spec, file);
		if (!t) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: has no tensor '%s' (for %s)", dlk_visible(spath), h->name, w);
			goto out;
		}
		/* wpe: the checkpoint may have more positions; the project takes the first rows */
		int wpe = !strcmp(h->name, "transformer.wpe.weight");
		if (t->rank != h->rank || (wpe ? t->shape[0] < h->shape[0] : t->shape[0] != h->shape[0]) ||
		    (h->rank == 2 && t->shape[1] != h->shape[1])) {
			dlk_st_shape_str(t->shape, t->rank, a, sizeof(a));
			dlk_st_shape_str(h->shape, h->rank, b, sizeof(b));
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor '%s' has shape %s, but %s needs %s%s", dlk_visible(spath),
			         dlk_visible(t->name), a, w, b, wpe ? " (or more rows)" : "");
			dlk_err_hint(err, "make the project's model match the checkpoint's config.json");
			goto out;
		}
		if (wpe && t->shape[0] > h->shape[0]) {
			struct dlk_st_tensor part = *t;
			part.shape[0] = h->shape[0];
			if (dlk_st_read_f32(&f, &part, 0, host + h->off, dlk_visible(spath), err))
				goto out;
		} else if (dlk_st_read_f32(&f, t, h->transpose, host + h->off, dlk_visible(spath), err)) {
			goto out;
		}
	}
	net->be->to_device(net->params, host, sizeof(float) * net->n_params);
	rc = 0;
out:
	dlk_hf_gpt2_release(&m);
	if (map != MAP_FAILED)
		munmap(map, len);
	if (fd >= 0)
		close(fd);
	cJSON_Delete(c);
	dlk_buf_release(&cfg);
	dlk_st_release(&f);
	free(host);
	free(cpath);
	free(spath);
	return rc;
}
