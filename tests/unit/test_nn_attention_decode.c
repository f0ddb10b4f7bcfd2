/* The incremental forward of lib/nn/decode.h against the full forward: a prompt at once, then
 * one or two positions a step, every position's output within 1e-5 + 1e-4 |full| of the same
 * position of one dlk_net_forward over the whole sequence (the same math, sums in another order). */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

#include "lib/nn/decode.h"
#include "lib/util/rng.h"

static const struct dlk_backend *be;

static int build(struct dlk_net *net, int T, struct dlk_layer_spec *ls, int n, const char *what)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = { .input = { 1, 1, T }, .input_rank = 1, .layers = ls, .n_layers = n, .init = "torch",
		               .task = DLK_TASK_IMAGE, .loss = DLK_LOSS_MSE };
	int ok = dlk_net_build(net, &m, "dlk.yaml", 0, be, &err) == 0 && dlk_net_init_params(net, "torch", 9, &err) == 0 &&
	         dlk_net_reserve(net, 2, &err) == 0;
	CHECK_MSG(ok, "%s builds (%s)", what, err.msg);
	struct dlk_rng r;
	dlk_rng_seed(&r, 4);
	for (size_t i = 0; ok && i < net->n_params; i++) /* larger than the start values: sharper attention */
		net->params[i] = 0.8f * (2 * dlk_rng_uniform(&r) - 1);
	return ok;
}

/* steps: the positions each step takes, summing to T */
static void check_decode(struct dlk_layer_spec *ls, int n, int T, const int *steps, int n_steps, const char *what)
{
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_decode d = DLK_DECODE_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	int batch = 2;
	if (!build(&net, T, ls, n, what))
		return;
	float *ids = malloc(sizeof(float) * batch * T), *step_ids = malloc(sizeof(float) * batch * T);
	for (int i = 0; i < batch * T; i++)
		ids[i] = (float)((i * 5 + 3) % 13);
	int W = net.layers[n - 1].out[2];
	size_t ny = (size_t)batch * T * W;
	float *full = malloc(sizeof(float) * ny);
	memcpy(full, dlk_net_forward(&net, ids, batch, 0), sizeof(float) * ny);
	CHECK_MSG(dlk_decode_begin(&d, &net, batch, T, &err) == 0, "%s: the cache (%s)", what, err.msg);
	double worst = 0;
	int at = 0, fine = 1;
	for (int k = 0; k < n_steps && fine; k++) {
		int m = steps[k];
		for (int b = 0; b < batch; b++)
			memcpy(step_ids + (size_t)b * m, ids + (size_t)b * T + at, sizeof(float) * m);
		const float *y = dlk_decode_step(&d, step_ids, m, &err);
		if (!y) {
			CHECK_MSG(0, "%s: step %d (%s)", what, k, err.msg);
			fine = 0;
			break;
		}
		for (int b = 0; b < batch; b++)
			for (int t = 0; t < m; t++)
				for (int c = 0; c < W; c++) {
					double ref = full[((size_t)b * T + at + t) * W + c], got = y[((size_t)b * m + t) * W + c];
					double e = fabs(ref - got) / (1e-5 + 1e-4 * fabs(ref));
					worst = e > worst ? e : worst;
				}
		at += m;
	}
	if (fine)
		CHECK_MSG(worst <= 1.0, "%s: every position's output equals the full forward's (worst %.3g of the tolerance)",
		          what, worst);
	CHECK(dlk_decode_step(&d, step_ids, 1, &err) == NULL);
	CHECK_CONTAINS(err.msg, "pass the cache's");
	/* a new sequence: the same outputs again */
	dlk_decode_reset(&d);
	const float *y = dlk_decode_step(&d, ids, 1, &err);
	CHECK_MSG(y && fabsf(y[0] - full[0]) <= 1e-5f + 1e-4f * fabsf(full[0]), "%s: after a reset, position 0 again", what);
	dlk_decode_release(&d);
	dlk_net_release(&net);
	free(ids), free(step_ids), free(full);
}

#define ATT(h, r) { .kind = DLK_LAYER_ATTENTION, .heads = h, .causal = 1, .rotary = r, .pad_id = -1 }

int main(void)
{
	be = dlk_backend_cpu();
	/* a pre-norm GPT block (a graph: nothing fused) with learned positions */
	struct dlk_layer_spec gpt[] = {
		{ .kind = DLK_LAYER_EMBEDDING, .vocab = 13, .dim = 16, .positions = 12 },
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		ATT(4, 0),
		{ .kind = DLK_LAYER_ADD, .n_inputs = 2, .inputs = { 0, 2 } },
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		{ .kind = DLK_LAYER_DENSE, .units = 32 },
		{ .kind = DLK_LAYER_GELU, .approximate = DLK_GELU_TANH },
		{ .kind = DLK_LAYER_DENSE, .units = 16 },
		{ .kind = DLK_LAYER_ADD, .n_inputs = 2, .inputs = { 3, 7 } },
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		{ .kind = DLK_LAYER_DENSE, .units = 13 },
	};
	int steps[] = { 5, 1, 2, 1, 1, 1, 1 };
	check_decode(gpt, 11, 12, steps, 7, "a GPT block: a prompt of 5, then 1 and 2 at a time");
	/* a chain with rotary attention, two of them, and a relu fused into the dense before it */
	struct dlk_layer_spec chain[] = {
		{ .kind = DLK_LAYER_EMBEDDING, .vocab = 13, .dim = 8 },
		ATT(2, 1),
		{ .kind = DLK_LAYER_DROPOUT, .rate = 0.5f },
		ATT(1, 1),
		{ .kind = DLK_LAYER_DENSE, .units = 24 },
		{ .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_DENSE, .units = 13 },
	};
	int one[] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	check_decode(chain, 7, 10, one, 10, "a chain with rotary attention, one position a step from the first");

	/* what cannot decode says so, naming the layer */
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_decode d = DLK_DECODE_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_layer_spec bi[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 13, .dim = 8 },
		                       { .kind = DLK_LAYER_ATTENTION, .heads = 2, .causal = 0, .pad_id = -1 } };
	if (build(&net, 6, bi, 2, "bidirectional")) {
		CHECK(dlk_decode_begin(&d, &net, 1, 6, &err) == -1);
		CHECK_CONTAINS(err.msg, "model.layers[1] (attention): generation needs causal attention without pad_id");
		dlk_net_release(&net);
	}
	struct dlk_layer_spec ok[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 13, .dim = 8 }, ATT(2, 0) };
	struct dlk_err e2 = DLK_ERR_INIT;
	if (build(&net, 6, ok, 2, "causal")) {
		CHECK(dlk_decode_begin(&d, &net, 1, 7, &e2) == -1);
		CHECK_CONTAINS(e2.msg, "do not fit the model's context of 6");
		dlk_net_release(&net);
	}
	return CHECK_DONE();
}
