/* The transformer layer kinds (layernorm, gelu, softmax, embedding) inside a network: shapes,
 * and upsample: PyTorch's initial values, and every parameter gradient of the whole network (loss included)
 * against central differences. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/nn/net.h"
#include "lib/util/rng.h"
#include "tests/unit/nn_check.h"

static const struct dlk_backend *be;

static void perturb(float *p, size_t n, uint64_t seed, float amount)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		p[i] += amount * (2 * dlk_rng_uniform(&r) - 1);
}

static void test_norm_gelu(void)
{
	struct dlk_layer_spec ls[] = {
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		{ .kind = DLK_LAYER_GELU, .approximate = DLK_GELU_TANH },
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 5 },
	};
	struct dlk_net net = DLK_NET_INIT;
	int batch = 3;
	if (!nn_build(&net, be, 1, 4, 6, ls, 4, batch, "layernorm, gelu, dense"))
		return;
	const struct dlk_layer *L = &net.layers[0];
	CHECK_MSG(L->n_w == 6 && L->n_b == 6 && net.params[L->w_off] == 1.0f && net.params[L->w_off + 5] == 1.0f &&
	                  net.params[L->b_off] == 0.0f,
	          "layernorm: weight [6] of ones and bias [6] of zeros, as nn.LayerNorm starts");
	perturb(net.params, net.n_params, 3, 0.3f); /* away from the symmetric start */
	float x[3 * 24];
	int32_t y[3] = { 0, 4, 2 };
	for (int i = 0; i < 72; i++)
		x[i] = (float)((i * 37) % 11) - 5.0f;
	grad_check_smooth(&net, x, y, batch, "layernorm -> gelu(tanh) -> flatten -> dense");
	dlk_net_release(&net);
}

static void test_embedding_softmax(void)
{
	struct dlk_layer_spec ls[] = {
		{ .kind = DLK_LAYER_EMBEDDING, .vocab = 7, .dim = 4 },
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		{ .kind = DLK_LAYER_GELU, .approximate = DLK_GELU_ERF },
		{ .kind = DLK_LAYER_SOFTMAX },
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 3 },
	};
	struct dlk_net net = DLK_NET_INIT;
	int batch = 2;
	if (!nn_build(&net, be, 1, 1, 5, ls, 6, batch, "embedding, layernorm, gelu, softmax, dense"))
		return;
	const struct dlk_layer *E = &net.layers[0];
	CHECK_MSG(E->out[0] == 1 && E->out[1] == 5 && E->out[2] == 4 && E->n_w == 28 && E->n_b == 0,
	          "embedding: 5 ids become [1, 5, 4]; one weight [7, 4], no bias");
	double m = 0, v = 0;
	for (size_t i = 0; i < E->n_w; i++)
		m += net.params[E->w_off + i], v += (double)net.params[E->w_off + i] * net.params[E->w_off + i];
	m /= (double)E->n_w;
	CHECK_MSG(fabs(m) < 0.6 && v / (double)E->n_w > 0.4 && v / (double)E->n_w < 2.0,
	          "embedding: starts near N(0, 1) as nn.Embedding (mean %.3f, mean square %.3f of 28)", m, v / (double)E->n_w);
	perturb(net.params + net.layers[1].w_off, 8, 5, 0.3f);
	float x[10] = { 3, 1, 3, 6, 0, 2, 2, 5, 1, 4 }; /* id 3 repeats */
	int32_t y[2] = { 1, 2 };
	grad_check_smooth(&net, x, y, batch, "embedding -> layernorm -> gelu -> softmax -> flatten -> dense");
	dlk_net_forward(&net, x, batch, 1);
	dlk_net_backward(&net, y, batch);
	/* a batch of ids 1 and 2 only: the other rows' gradient is zero, not last step's */
	float xs[10] = { 1, 1, 1, 1, 1, 2, 2, 2, 2, 2 };
	dlk_net_forward(&net, xs, batch, 1);
	dlk_net_backward(&net, y, batch);
	int untouched = 1;
	for (int r = 0; r < 7; r++)
		for (int d = 0; d < 4 && r != 1 && r != 2; d++)
			untouched &= net.grads[E->w_off + (size_t)r * 4 + d] == 0.0f;
	CHECK_MSG(untouched, "embedding: rows of ids not in the batch get no gradient (sparse), even after a step that used them");
	dlk_net_release(&net);
}

static void test_upsample(void)
{
	for (int mode = 0; mode <= 1; mode++) {
		struct dlk_layer_spec ls[] = {
			{ .kind = DLK_LAYER_CONV2D, .filters = 2, .kernel = 3, .stride = 1, .padding = 1 },
			{ .kind = DLK_LAYER_UPSAMPLE, .scale = 2, .mode = mode },
			{ .kind = DLK_LAYER_TANH },
			{ .kind = DLK_LAYER_FLATTEN },
			{ .kind = DLK_LAYER_DENSE, .units = 3 },
		};
		struct dlk_net net = DLK_NET_INIT;
		int batch = 2;
		const char *what = mode ? "conv2d -> upsample bilinear x2 -> tanh -> dense" : "conv2d -> upsample nearest x2 -> tanh -> dense";
		if (!nn_build(&net, be, 1, 3, 4, ls, 5, batch, what))
			continue;
		CHECK_MSG(net.layers[1].out[0] == 2 && net.layers[1].out[1] == 6 && net.layers[1].out[2] == 8,
		          "upsample x2: 2x3x4 becomes 2x6x8");
		float x[24];
		int32_t y[2] = { 0, 2 };
		for (int i = 0; i < 24; i++)
			x[i] = (float)((i * 7) % 5) - 2.0f;
		grad_check_smooth(&net, x, y, batch, what);
		dlk_net_release(&net);
	}
}

static void test_shape_errors(void)
{
	struct dlk_layer_spec ls[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 0, .dim = 4 } };
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = { .input = { 1, 1, 5 }, .input_rank = 1, .layers = ls, .n_layers = 1, .init = "torch" };
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "model.layers[0] (embedding): vocab must be in 1..");
	struct dlk_layer_spec ln[] = { { .kind = DLK_LAYER_LAYERNORM, .eps = 0 } };
	struct dlk_err e2 = DLK_ERR_INIT;
	m.layers = ln;
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 0, be, &e2) == -1);
	CHECK_CONTAINS(e2.msg, "eps must be in (0, 1]");
}

int main(void)
{
	be = dlk_backend_cpu();
	test_norm_gelu();
	test_embedding_softmax();
	test_upsample();
	test_shape_errors();
	return CHECK_DONE();
}
