#ifndef DLK_EXPORT_HF_H
#define DLK_EXPORT_HF_H

#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

/* A GPT-2 bundle as a Hugging Face checkpoint: config.json (GPT2Config) and model.safetensors
 * with GPT-2's tensor names and shapes (transformers' GPT2LMHeadModel loads it). The model is
 * recognised by its layers' kinds and inputs: embedding with positions (wte + wpe); blocks of
 * layernorm, causal attention, add, layernorm, dense, gelu(tanh), dense, add; a final layernorm
 * and a dense tied to the embedding. -1 with err (DLK_EXIT_CONFIG, naming the first layer that
 * does not fit) for anything else; the buffers are then untouched. */
int dlk_hf_gpt2_export(const struct dlk_bundle *b, struct dlk_buf *config, struct dlk_buf *safetensors,
                       int *n_layer, struct dlk_err *err);

#endif
