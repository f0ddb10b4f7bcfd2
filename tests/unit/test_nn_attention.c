/* The layers of a transformer over a sequence [1, T, D]: dense over the last axis (nn.Linear on
 * each position), learned position embeddings, multi-head self-attention. Gradients of every
 * parameter against central differences; outputs against a direct computation. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

#include "lib/nn/net.h"
#include "lib/util/rng.h"

static const struct dlk_backend *be;

static double loss_at(struct dlk_net *net, const float *x, const int32_t *y, int batch)
{
	const float *z = dlk_net_forward(net, x, batch, 1);
	return net->be->softmax_ce(z, y, batch, net->n_classes, NULL);
}

/* every parameter: the analytic gradient within 2e-3 + 2e-2 |numeric| of the central difference */
static void grad_check(struct dlk_net *net, const float *x, const int32_t *y, int batch, const char *what)
{
	dlk_net_forward(net, x, batch, 1);
	dlk_net_backward(net, y, batch);
	float *g = malloc(sizeof(float) * net->n_params);
	memcpy(g, net->grads, sizeof(float) * net->n_params);
	size_t bad = 0, worst_i = 0;
	double worst = 0;
	for (size_t i = 0; i < net->n_params; i++) {
		float keep = net->params[i];
		const float h = 1e-3f;
		net->params[i] = keep + h;
		double lp = loss_at(net, x, y, batch);
		net->params[i] = keep - h;
		double lm = loss_at(net, x, y, batch);
		net->params[i] = keep;
		double num = (lp - lm) / (2.0 * h), d = fabs(num - g[i]);
		if (d > 2e-3 + 2e-2 * fabs(num))
			bad++;
		if (d > worst)
			worst = d, worst_i = i;
	}
	CHECK_MSG(bad == 0, "%s: %zu parameter gradients match finite differences (worst [%zu] off by %g)", what,
	          net->n_params, worst_i, worst);
	free(g);
}

static int build(struct dlk_net *net, int c, int h, int w, struct dlk_layer_spec *ls, int n, int batch, const char *what)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = { .input = { c, h, w }, .input_rank = 3, .layers = ls, .n_layers = n, .init = "torch" };
	int ok = dlk_net_build(net, &m, "dlk.yaml", 0, be, &err) == 0 && dlk_net_init_params(net, "torch", 7, &err) == 0 &&
	         dlk_net_reserve(net, batch, &err) == 0;
	CHECK_MSG(ok, "%s builds (%s)", what, err.msg);
	return ok;
}

static void fill_uniform(float *p, size_t n, uint64_t seed, float lo, float hi)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		p[i] = lo + (hi - lo) * dlk_rng_uniform(&r);
}

/* dense over the last axis: [1, T, D] -> [1, T, units], each position x_t W^T + b */
static void test_dense_sequence(void)
{
	struct dlk_layer_spec ls[] = {
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		{ .kind = DLK_LAYER_DENSE, .units = 5 },
		{ .kind = DLK_LAYER_RELU }, /* fused into the dense before it, and folded into the next's backward */
		{ .kind = DLK_LAYER_DENSE, .units = 3 },
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 4 },
	};
	struct dlk_net net = DLK_NET_INIT;
	int batch = 2, T = 3, D = 6;
	if (!build(&net, 1, T, D, ls, 6, batch, "layernorm, dense over positions"))
		return;
	const struct dlk_layer *A = &net.layers[1], *B = &net.layers[3];
	CHECK_MSG(A->out[0] == 1 && A->out[1] == T && A->out[2] == 5 && A->n_w == 30 && A->n_b == 5,
	          "dense on [1, 3, 6]: output [1, 3, 5], weight [5, 6] and bias [5] (got [%d, %d, %d])", A->out[0],
	          A->out[1], A->out[2]);
	CHECK_MSG(B->out[1] == T && B->out[2] == 3 && net.layers[5].in[2] == 9, "the second: [1, 3, 3], flattened to 9");
	float x[2 * 3 * 6];
	int32_t y[2] = { 1, 3 };
	fill_uniform(x, sizeof(x) / sizeof(x[0]), 3, -2.0f, 2.0f);
	fill_uniform(net.params, net.n_params, 5, -0.5f, 0.5f);
	/* the output of the first dense (after relu) against a direct per-position computation */
	dlk_net_forward(&net, x, batch, 0);
	const float *ln = net.layers[0].y, *W = net.params + A->w_off, *b = net.params + A->b_off;
	double worst = 0;
	for (int r = 0; r < batch * T; r++)
		for (int u = 0; u < 5; u++) {
			double s = b[u];
			for (int k = 0; k < D; k++)
				s += (double)ln[r * D + k] * W[u * D + k];
			s = s > 0 ? s : 0;
			worst = fmax(worst, fabs(s - A->y[r * 5 + u]));
		}
	CHECK_MSG(worst < 1e-5, "dense over positions = x_t W^T + b at each of batch*T rows (off by %g)", worst);
	grad_check(&net, x, y, batch, "dense over positions");
	dlk_net_release(&net);

	/* more than one channel is not a sequence: refused with the way out */
	struct dlk_layer_spec bad[] = { { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = { .input = { 2, 3, 4 }, .input_rank = 3, .layers = bad, .n_layers = 1, .init = "torch" };
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "expects a flat input or a sequence [1, T, D] but gets");
}

int main(void)
{
	be = dlk_backend_cpu();
	test_dense_sequence();
	return CHECK_DONE();
}
