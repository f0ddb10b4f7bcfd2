/* meanpool: a sequence's mean over its positions, the padding left out (pad_id). The forward
 * against means computed by hand (a sample all padding gives zeros); every gradient through it
 * against finite differences (an embedding's rows take the meanpool's input gradient; padding
 * rows get none), masked and not; the same bits at 1 and 3 threads; the shapes and inputs it
 * refuses, naming the layer. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/nn/net.h"
#include "lib/util/rng.h"
#include "tests/unit/nn_check.h"

static const struct dlk_backend *be;

#define MEANPOOL(pad) { .kind = DLK_LAYER_MEANPOOL, .pad_id = pad }

/* ids [3, 5] -> embedding (vocab 6, dim 4) -> meanpool(pad 0) -> dense(3). Sample 0 has two
 * padding positions, sample 1 none, sample 2 only padding. */
static const float ids[15] = { 3, 1, 0, 5, 0, /**/ 2, 2, 4, 1, 5, /**/ 0, 0, 0, 0, 0 };

static void test_forward(void)
{
	struct dlk_layer_spec ls[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 6, .dim = 4 }, MEANPOOL(0),
		                       { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_net net = DLK_NET_INIT;
	if (!nn_build(&net, be, 1, 1, 5, ls, 3, 3, "embedding, meanpool(pad 0), dense"))
		return;
	CHECK(net.layers[1].out[0] == 1 && net.layers[1].out[1] == 1 && net.layers[1].out[2] == 4);
	fill_uniform(net.params, net.n_params, 3, -1, 1);
	dlk_net_forward(&net, ids, 3, 0);
	const float *tab = net.params + net.layers[0].w_off, *y = net.layers[1].y;
	for (int d = 0; d < 4; d++) {
		float s0 = 0, s1 = 0;
		/* the order of t, as the backends sum */
		s0 += tab[3 * 4 + d], s0 += tab[1 * 4 + d], s0 += tab[5 * 4 + d];
		s1 += tab[2 * 4 + d], s1 += tab[2 * 4 + d], s1 += tab[4 * 4 + d], s1 += tab[1 * 4 + d], s1 += tab[5 * 4 + d];
		CHECK_MSG(y[d] == s0 / 3 && y[4 + d] == s1 / 5 && y[8 + d] == 0.0f,
		          "column %d: the mean of the kept positions (3 and 5 of them; none: 0)", d);
	}
	dlk_net_release(&net);

	/* without pad_id every position counts: the mean of all five */
	struct dlk_layer_spec all[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 6, .dim = 4 }, MEANPOOL(-1),
		                        { .kind = DLK_LAYER_DENSE, .units = 3 } };
	if (!nn_build(&net, be, 1, 1, 5, all, 3, 3, "embedding, meanpool, dense"))
		return;
	fill_uniform(net.params, net.n_params, 3, -1, 1);
	dlk_net_forward(&net, ids, 3, 0);
	tab = net.params + net.layers[0].w_off;
	float s = 0, s2 = 0;
	for (int t = 0; t < 5; t++)
		s += tab[(int)ids[t] * 4 + 2], s2 += tab[1];
	CHECK(net.layers[1].y[2] == s / 5 && net.layers[1].y[8 + 1] == s2 / 5);
	dlk_net_release(&net);
}

static void test_gradients(void)
{
	int32_t y[3] = { 2, 0, 1 };
	struct dlk_layer_spec ls[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 6, .dim = 4 }, MEANPOOL(0),
		                       { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_net net = DLK_NET_INIT;
	if (nn_build(&net, be, 1, 1, 5, ls, 3, 3, "meanpool(pad 0) gradients")) {
		fill_uniform(net.params, net.n_params, 5, -0.8f, 0.8f);
		grad_check_smooth(&net, ids, y, 3, "embedding, meanpool(pad 0), dense");
		/* the pad id's row of the table took no gradient: every position holding it is left out */
		const float *gt = net.grads + net.layers[0].w_off;
		CHECK(gt[0] == 0 && gt[1] == 0 && gt[2] == 0 && gt[3] == 0 && gt[4] != 0);
		dlk_net_release(&net);
	}
	/* a float sequence [1, 6, 5]: dense per position, gelu, meanpool, dense (its input gradient
	 * reaches the first dense's weights) */
	struct dlk_layer_spec seq[] = { { .kind = DLK_LAYER_DENSE, .units = 7 }, { .kind = DLK_LAYER_GELU }, MEANPOOL(-1),
		                        { .kind = DLK_LAYER_DENSE, .units = 3 } };
	if (nn_build(&net, be, 1, 6, 5, seq, 4, 3, "meanpool gradients over a float sequence")) {
		float x[90];
		fill_uniform(x, 90, 8, -1, 1);
		fill_uniform(net.params, net.n_params, 9, -0.8f, 0.8f);
		grad_check_smooth(&net, x, y, 3, "dense per position, gelu, meanpool, dense");
		dlk_net_release(&net);
	}
}

/* a long batch split over the threads: the same bits at 1 and 3 */
static void test_threads(void)
{
	int T = 300, D = 64, batch = 16;
	size_t nx = (size_t)batch * T * D;
	float *x = malloc(sizeof(float) * nx), *id = malloc(sizeof(float) * batch * T), *dy = malloc(sizeof(float) * batch * D);
	float *y[2], *dx[2];
	fill_uniform(x, nx, 1, -1, 1);
	fill_uniform(dy, (size_t)batch * D, 2, -1, 1);
	for (int i = 0; i < batch * T; i++)
		id[i] = (float)(i % T < 17 * (i / T) ? 1 + i % 5 : 0);
	for (int k = 0; k < 2; k++) {
		y[k] = malloc(sizeof(float) * batch * D);
		dx[k] = malloc(sizeof(float) * nx);
		be->set_threads(k ? 3 : 1);
		be->seqpool_forward(x, id, 0.0f, batch, T, D, y[k]);
		be->seqpool_backward(dy, id, 0.0f, batch, T, D, dx[k]);
	}
	CHECK(!memcmp(y[0], y[1], sizeof(float) * batch * D) && !memcmp(dx[0], dx[1], sizeof(float) * nx));
	be->set_threads(1);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dx[k]);
	free(x), free(id), free(dy);
}

static void test_refused(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_net net = DLK_NET_INIT;
	/* an image [3, 4, 4] is not a sequence */
	struct dlk_layer_spec img[] = { MEANPOOL(-1), { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_model m = { .input = { 3, 4, 4 }, .input_rank = 3, .layers = img, .n_layers = 2, .init = "torch" };
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 0, be, &err) != 0);
	CHECK_CONTAINS(err.msg, "model.layers[0] (meanpool): expects a sequence [1, T, D] but gets");
	dlk_err_clear(&err);
	/* pad_id masks by the model's input ids: after a dense, the input is not the T ids */
	struct dlk_layer_spec seq[] = { { .kind = DLK_LAYER_DENSE, .units = 4 }, MEANPOOL(0),
		                        { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_model ms = { .input = { 1, 6, 5 }, .input_rank = 3, .layers = seq, .n_layers = 3, .init = "torch" };
	int rc = dlk_net_build(&net, &ms, "dlk.yaml", 0, be, &err);
	CHECK(rc == 0 && dlk_net_init_params(&net, "torch", 1, &err) == 0 && dlk_net_reserve(&net, 2, &err) != 0);
	CHECK_CONTAINS(err.msg, "pad_id leaves out the positions whose model-input id is 0, so the model's input must be "
	                        "the 6 token ids, not 30 values");
	if (rc == 0)
		dlk_net_release(&net);
}

int main(void)
{
	be = dlk_backend_cpu();
	be->set_threads(1);
	test_forward();
	test_gradients();
	test_threads();
	test_refused();
	return CHECK_DONE();
}
