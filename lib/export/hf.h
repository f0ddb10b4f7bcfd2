#ifndef DLK_EXPORT_HF_H
#define DLK_EXPORT_HF_H

#include <stddef.h>

#include "lib/nn/net.h"
#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

/* GPT-2 as a Hugging Face checkpoint: config.json (GPT2Config) and model.safetensors with GPT-2's
 * tensor names and shapes (transformers' GPT2LMHeadModel). A net is GPT-2 when its layers' kinds
 * and inputs are: embedding with positions (wte + wpe); blocks of layernorm, causal attention,
 * add, layernorm, dense, gelu(tanh), dense, add; a final layernorm and a dense tied to the
 * embedding. GPT-2's Conv1D keeps its weight [in, out] (y = x W + b), the transpose of the
 * [out, in] a dense layer keeps; attention's in_proj (q, k, v rows) is c_attn, its out_proj
 * c_proj. */

/* One GPT-2 tensor: its name, where it sits in the net's flat parameters, its shape in the
 * checkpoint ([in, out] for a Conv1D weight) and whether the net keeps it transposed. */
struct dlk_hf_tensor {
	char name[64];
	int layer;        /* the net's layer that holds it */
	size_t off;       /* into net->params */
	int rank;
	long long shape[2];
	int transpose;
};

struct dlk_hf_gpt2 {
	struct dlk_hf_tensor *t;
	int n, cap;
	int n_layer, heads, n_inner, D, V, P;
	float eps;
};

/* The mapping of the net's parameters to GPT-2's tensors, the one both directions use. -1 with
 * err (DLK_EXIT_CONFIG, naming the first layer that does not fit, as `file` places it) for a net
 * that is not GPT-2. */
int dlk_hf_gpt2_map(const struct dlk_net *net, const char *file, int importing, struct dlk_hf_gpt2 *m,
                    struct dlk_err *err);
void dlk_hf_gpt2_release(struct dlk_hf_gpt2 *m);

/* The bundle as config.json and model.safetensors. -1 with err for a model that is not GPT-2;
 * the buffers are then untouched. */
int dlk_hf_gpt2_export(const struct dlk_bundle *b, struct dlk_buf *config, struct dlk_buf *safetensors,
                       int *n_layer, struct dlk_err *err);

/* model.init_from: the checkpoint in dir (config.json and model.safetensors, F32, F16 or BF16,
 * names with or without "transformer.") into the built net's parameters. The config must agree
 * with the net (width, blocks, heads, MLP width, vocabulary, eps, tanh GELU); the checkpoint may
 * have more positions than the net, whose wpe is then its first rows. -1 with err (naming the
 * file, the tensor or field, and both shapes or values) otherwise; the parameters are then
 * untouched. `file` is the project file, for messages. */
int dlk_hf_gpt2_import(struct dlk_net *net, const char *dir, const char *file, struct dlk_err *err);

#endif
