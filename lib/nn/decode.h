/* Incremental forward for generation: a key/value cache per attention layer, so that each new
 * token costs one position's work instead of a forward over the whole sequence.
 *
 *   struct dlk_decode d;
 *   dlk_decode_begin(&d, net, batch, cap, &err);      the cache, for up to cap positions
 *   y = dlk_decode_step(&d, prompt_ids, n, &err);     the prompt (n ids per sample), at once
 *   y = dlk_decode_step(&d, next_ids, 1, &err);       then one (or more) ids at a time
 *   dlk_decode_reset(&d);                             a new sequence, same sizes
 *   dlk_decode_release(&d);
 *
 * A step runs the net over positions [len, len + n) of each sample, given their ids [batch, n]
 * (device, floats holding integers as every input), and returns the last layer's output for those
 * positions, [batch, n, W] (device, valid until the next step or forward): for a language model,
 * the logits of the token after each. The attention layers append the new positions' keys and
 * values (after rotary, at their absolute positions) to their cache and attend over everything
 * cached; the embedding adds the position rows [len, len + n). What the outputs equal: the same
 * positions of one dlk_net_forward over the whole sequence (evaluation, no dropout), up to float
 * rounding (the sums run in another order; test_nn_attention_decode checks within 1e-5 + 1e-4|y|).
 *
 * The net must be a causal sequence model over token ids: its input [1, 1, T] (or [T]) ids,
 * layers of the kinds embedding, dense, layernorm, gelu, relu, tanh, sigmoid, softmax, dropout
 * (the identity), add and causal attention without pad_id. cap <= T, the context the net was
 * built for (its buffers and position table are sized for it). The net's own per-batch buffers
 * are used (a dlk_net_forward between steps overwrites nothing the cache needs, but the returned
 * outputs). */
#ifndef DLK_NN_DECODE_H
#define DLK_NN_DECODE_H

#include "lib/nn/net.h"
#include "lib/util/err.h"

struct dlk_decode {
	struct dlk_net *net;
	int batch, cap, len;      /* samples, positions at most, positions done */
	float **k, **v;           /* per layer: an attention layer's cache [batch, cap, D]; NULL for others */
	float *qkv, *a, *scores;  /* scratch: [batch*cap, 3D], [batch*cap, D], [cap] (the widest layer) */
	const float **outs;       /* per layer: its output of the current step */
};
#define DLK_DECODE_INIT { 0 }

/* Checks that net can decode (the message names the layer that cannot) and allocates the cache
 * for batch samples of up to cap positions on net->be (and reserves the net for batch samples).
 * Returns 0, or -1 with err set (DLK_EXIT_CONFIG: the model; DLK_EXIT_FAIL: out of memory). */
int dlk_decode_begin(struct dlk_decode *d, struct dlk_net *net, int batch, int cap, struct dlk_err *err);
/* The next n positions (see above); NULL with err set when len + n would pass cap. */
const float *dlk_decode_step(struct dlk_decode *d, const float *ids, int n, struct dlk_err *err);
/* Forgets the cached positions (len = 0). */
void dlk_decode_reset(struct dlk_decode *d);
void dlk_decode_release(struct dlk_decode *d);

#endif
