/* avgpool's gradient (and that of the grouped and transposed convolutions the new kinds run on)
 * through a whole net against central finite differences: the softmax cross-entropy of a net
 * conv2d -> avgpool (padding counted) -> conv2d groups -> convtranspose2d -> flatten -> dense,
 * differentiated by dlk_net_backward, matches (L(p + h) - L(p - h)) / 2h over every parameter of
 * the layers before the pool (which get their gradient through the pool's backward) and the
 * later ones, within 2e-2 relative (a float forward, h = 1e-2); and avgpool of a constant is that
 * constant inside and smaller where the padding counts. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/backend.h"
#include "lib/nn/net.h"
#include "lib/project/project.h"
#include "lib/util/rng.h"

#define B 3

static double ce(struct dlk_net *net, const float *x, const int32_t *y)
{
	const float *z = dlk_net_forward(net, x, B, 0);
	double l = 0;
	for (int b = 0; b < B; b++) {
		double m = z[b * 2] > z[b * 2 + 1] ? z[b * 2] : z[b * 2 + 1];
		double s = exp(z[b * 2] - m) + exp(z[b * 2 + 1] - m);
		l += m + log(s) - z[b * 2 + y[b]];
	}
	return l / B;
}

static void test_gradients(void)
{
	struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_CONV2D, .filters = 2, .kernel = 3, .stride = 1, .padding = 1, .groups = 1 },
		{ .kind = DLK_LAYER_AVGPOOL, .size = 3, .stride = 2, .padding = 1 },
		{ .kind = DLK_LAYER_CONV2D, .filters = 4, .kernel = 1, .stride = 1, .groups = 2 },
		{ .kind = DLK_LAYER_CONVTRANSPOSE2D, .filters = 2, .kernel = 2, .stride = 2, .padding = 0 },
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 2 },
	};
	struct dlk_model model = { .input = { 1, 5, 5 }, .input_rank = 3, .layers = layers, .n_layers = 6 };
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	CHECK_MSG(!dlk_net_build(&net, &model, "dlk.yaml", 2, dlk_backend_cpu(), &err), "builds (%s)", err.msg);
	CHECK(!dlk_net_init_params(&net, "torch", 7, &err));
	CHECK(!dlk_net_reserve(&net, B, &err));
	/* 5x5 -> conv 2x5x5 -> avgpool 2x3x3 -> grouped 4x3x3 -> transposed 2x6x6 -> 72 -> 2 */
	CHECK(net.layers[1].out[1] == 3 && net.layers[3].out[0] == 2 && net.layers[3].out[1] == 6);
	CHECK(net.layers[1].n_w == 0 && net.layers[2].n_w == 4 * 1 && net.layers[3].n_w == 4 * 2 * 2 * 2);
	float x[B * 25];
	int32_t y[B] = { 0, 1, 1 };
	struct dlk_rng r;
	dlk_rng_seed(&r, 3);
	for (int i = 0; i < B * 25; i++)
		x[i] = 2 * dlk_rng_uniform(&r) - 1;
	dlk_net_forward(&net, x, B, 1);
	dlk_net_backward(&net, y, B);
	float *g = malloc(sizeof(float) * net.n_params);
	memcpy(g, net.grads, sizeof(float) * net.n_params);
	double worst = 0;
	size_t worst_at = 0;
	for (size_t p = 0; p < net.n_params; p++) {
		float keep = net.params[p];
		double h = 1e-2;
		net.params[p] = keep + (float)h;
		double lp = ce(&net, x, y);
		net.params[p] = keep - (float)h;
		double lm = ce(&net, x, y);
		net.params[p] = keep;
		double fd = (lp - lm) / (2 * h), e = fabs(fd - g[p]) / (1e-3 + fabs(fd));
		if (e > worst)
			worst = e, worst_at = p;
	}
	CHECK_MSG(worst < 2e-2, "every parameter's gradient against finite differences (worst relative %.2g at %zu)",
	          worst, worst_at);
	free(g);
	dlk_net_release(&net);
}

/* a constant 1: windows inside the image average to 1, a corner window of 3x3 with padding 1
 * covers 4 pixels of 9 */
static void test_values(void)
{
	struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_AVGPOOL, .size = 3, .stride = 1, .padding = 1 },
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 2 },
	};
	struct dlk_model model = { .input = { 2, 4, 4 }, .input_rank = 3, .layers = layers, .n_layers = 3 };
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	CHECK(!dlk_net_build(&net, &model, "dlk.yaml", 2, dlk_backend_cpu(), &err));
	CHECK(!dlk_net_init_params(&net, "torch", 1, &err));
	CHECK(!dlk_net_reserve(&net, 2, &err));
	float x[2 * 32];
	for (int i = 0; i < 64; i++)
		x[i] = 1;
	dlk_net_forward(&net, x, 2, 0);
	const float *p = net.layers[0].y;
	CHECK_MSG(fabsf(p[5] - 1) < 1e-6f && fabsf(p[32 + 16 + 10] - 1) < 1e-6f, "inside: 1 (%g)", (double)p[5]);
	CHECK_MSG(fabsf(p[0] - 4.0f / 9) < 1e-6f && fabsf(p[1] - 6.0f / 9) < 1e-6f, "corner 4/9 (%g), edge 6/9 (%g)",
	          (double)p[0], (double)p[1]);
	dlk_net_release(&net);
}

int main(void)
{
	test_gradients();
	test_values();
	return CHECK_DONE();
}
