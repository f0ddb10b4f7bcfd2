/* The graph: layers that name their inputs (a skip connection, add, concat) and
 * globalavgpool; forward by hand, finite-difference gradients through a residual block and a
 * concat of two branches (a tensor read twice gets the sum of its readers' gradients), the
 * same bits from the same seed, and errors that name the layer. */
#include "tests/unit/check.h"
#include "tests/unit/nn_check.h"

#include <math.h>
#include <stdlib.h>

#include "lib/nn/net.h"
#include "lib/project/layers.h"
#include "lib/util/rng.h"

static struct dlk_layer_spec IN(struct dlk_layer_spec s, int a, int b)
{
	s.n_inputs = b == -2 ? 1 : 2;
	s.inputs[0] = a;
	s.inputs[1] = b == -2 ? 0 : b;
	return s;
}

static void test_forward_by_hand(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_net net;

	/* input 2x2x2; layer 0 globalavgpool -> [mean c0, mean c1]; layer 1 flatten of the input
	 * (8); layer 2 concat of both (10); layer 3 add of layer 2 with itself (doubles) */
	struct dlk_layer_spec l[] = { L(DLK_LAYER_GLOBALAVGPOOL, 0), IN(L(DLK_LAYER_FLATTEN, 0), -1, -2),
		                      IN(L(DLK_LAYER_CONCAT, 0), 0, 1), IN(L(DLK_LAYER_ADD, 0), 2, 2) };
	struct dlk_model m = M(2, 2, 2, l, 4);
	int ok = dlk_net_build(&net, &m, NULL, 0, be, &err) == 0;
	CHECK_MSG(ok, "a graph builds (%s)", err.msg);
	if (!ok)
		return;
	CHECK(net.graph == 1 && net.n_classes == 10 && net.n_params == 0);
	CHECK(dlk_net_reserve(&net, 2, &err) == 0);
	float x[16] = { 1, 2, 3, 4, 10, 20, 30, 40, -1, -1, -1, -1, 0, 0, 0, 8 };
	const float *z = dlk_net_forward(&net, x, 2, 0);
	float want[20] = { 5, 50, 2, 4, 6, 8, 20, 40, 60, 80, -2, 4, -2, -2, -2, -2, 0, 0, 0, 16 };
	int same = 1;
	for (int i = 0; i < 20; i++)
		same = same && fabsf(z[i] - want[i]) < 1e-6f;
	CHECK_MSG(same, "globalavgpool, concat and add by hand");
	dlk_net_release(&net);
}

static void test_grads(void)
{
	/* a residual block: conv a, relu, conv (padding 1, keeps 6x6), add(a's relu, conv), relu,
	 * a strided conv with padding, globalavgpool, dense; relu r is read twice */
	struct dlk_layer_spec r[] = { L(DLK_LAYER_CONV2D, 3), L(DLK_LAYER_RELU, 0), L(DLK_LAYER_CONV2D, 3),
		                      IN(L(DLK_LAYER_ADD, 0), 1, 2), L(DLK_LAYER_TANH, 0), L(DLK_LAYER_CONV2D, 4),
		                      L(DLK_LAYER_GLOBALAVGPOOL, 0), L(DLK_LAYER_DENSE, 3) };
	r[0].padding = r[2].padding = r[5].padding = 1;
	r[5].stride = 2;
	check_grads("residual block", 2, 6, 6, r, 8, 3);

	/* two branches from the input, concatenated along channels, then pooled */
	struct dlk_layer_spec c[] = { L(DLK_LAYER_CONV2D, 2), IN(L(DLK_LAYER_CONV2D, 3), -1, -2),
		                      IN(L(DLK_LAYER_CONCAT, 0), 0, 1), L(DLK_LAYER_SIGMOID, 0), L(DLK_LAYER_MAXPOOL, 2),
		                      L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 3) };
	c[0].padding = 1;
	c[1].kernel = 1;
	check_grads("concat of two branches", 2, 4, 4, c, 7, 2);

	/* flat: a dense skip over a dense, and a concat of features */
	struct dlk_layer_spec d[] = { L(DLK_LAYER_DENSE, 5), L(DLK_LAYER_TANH, 0), L(DLK_LAYER_DENSE, 5),
		                      IN(L(DLK_LAYER_ADD, 0), 1, 2), IN(L(DLK_LAYER_CONCAT, 0), 3, 0),
		                      L(DLK_LAYER_DENSE, 4) };
	check_grads("dense skip and feature concat", 1, 1, 6, d, 6, 3);

	/* a branch the loss does not read: its gradients are 0, not stale */
	struct dlk_layer_spec u[] = { L(DLK_LAYER_DENSE, 4), IN(L(DLK_LAYER_DENSE, 3), -1, -2), L(DLK_LAYER_DENSE, 3) };
	check_grads("unused branch", 1, 1, 5, u, 3, 2);
}

/* an activation is fused into the conv before it only where it alone reads the conv's output */
static void test_fused_in_graph(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_net net;

	/* conv 0 read by its relu alone: fused; conv 2 read by its relu and by the add: not */
	struct dlk_layer_spec l[] = { L(DLK_LAYER_CONV2D, 3), L(DLK_LAYER_RELU, 0), L(DLK_LAYER_CONV2D, 3),
		                      L(DLK_LAYER_RELU, 0), IN(L(DLK_LAYER_ADD, 0), 2, 3), L(DLK_LAYER_GLOBALAVGPOOL, 0),
		                      L(DLK_LAYER_DENSE, 3) };
	l[0].padding = l[2].padding = 1;
	struct dlk_model m = M(2, 5, 5, l, 7);
	int ok = dlk_net_build(&net, &m, NULL, 0, be, &err) == 0;
	CHECK_MSG(ok, "a graph builds (%s)", err.msg);
	if (!ok)
		return;
	CHECK_MSG(net.layers[0].act == DLK_ACT_RELU && net.layers[1].fused, "the relu its conv's only reader is fused");
	CHECK_MSG(net.layers[2].act == DLK_ACT_NONE && !net.layers[3].fused, "a conv read by its relu and an add is not");
	dlk_net_release(&net);
	check_grads("conv read by its relu and an add", 2, 5, 5, l, 7, 3);
}

/* two nets from the same seed, trained the same steps, end with the same bits */
static void test_same_bits(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_layer_spec r[] = { L(DLK_LAYER_CONV2D, 4), L(DLK_LAYER_RELU, 0), L(DLK_LAYER_CONV2D, 4),
		                      IN(L(DLK_LAYER_ADD, 0), 1, 2), L(DLK_LAYER_GLOBALAVGPOOL, 0), L(DLK_LAYER_DENSE, 3) };
	r[0].padding = r[2].padding = 1;
	struct dlk_model m = M(1, 5, 5, r, 6);
	float *end[2] = { 0 };
	size_t np = 0;
	float x[4 * 25];
	int32_t y[4] = { 0, 1, 2, 1 };
	random_fill(x, 100, 5);
	for (int k = 0; k < 2; k++) {
		struct dlk_net net;
		CHECK(dlk_net_build(&net, &m, NULL, 0, be, &err) == 0);
		CHECK(dlk_net_init_params(&net, "torch", 42, &err) == 0 && dlk_net_reserve(&net, 4, &err) == 0);
		for (int step = 0; step < 3; step++) {
			dlk_net_forward(&net, x, 4, 1);
			dlk_net_backward(&net, y, 4);
			be->axpy(net.n_params, -0.1f, net.grads, net.params);
		}
		np = net.n_params;
		end[k] = malloc(sizeof(float) * np);
		memcpy(end[k], net.params, sizeof(float) * np);
		dlk_net_release(&net);
	}
	CHECK(np > 0 && memcmp(end[0], end[1], sizeof(float) * np) == 0);
	free(end[0]);
	free(end[1]);
}

static void test_errors(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_net net;

	struct dlk_layer_spec a[] = { L(DLK_LAYER_CONV2D, 4), L(DLK_LAYER_CONV2D, 4), IN(L(DLK_LAYER_ADD, 0), 0, 1),
		                      L(DLK_LAYER_GLOBALAVGPOOL, 0), L(DLK_LAYER_DENSE, 3) };
	a[2].line = 14;
	struct dlk_model m = M(1, 6, 6, a, 5);
	CHECK(dlk_net_build(&net, &m, "r.yaml", 0, be, &err) == -1);
	CHECK_STR(err.msg, "model.layers[2] (add, r.yaml:14): its inputs 4x4x4 and 4x2x2 do not fit together");

	struct dlk_layer_spec b[] = { L(DLK_LAYER_DENSE, 4), L(DLK_LAYER_ADD, 0), L(DLK_LAYER_DENSE, 3) };
	m = M(1, 1, 6, b, 3);
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(dlk_net_build(&net, &m, NULL, 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "model.layers[1] (add): reads 0 inputs, not the 2 it needs");

	struct dlk_layer_spec c[] = { L(DLK_LAYER_DENSE, 4), IN(L(DLK_LAYER_DENSE, 3), 1, -2) };
	m = M(1, 1, 6, c, 2);
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(dlk_net_build(&net, &m, NULL, 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "not one before it");

	struct dlk_layer_spec d[] = { L(DLK_LAYER_GLOBALAVGPOOL, 0), L(DLK_LAYER_DENSE, 3) };
	m = M(1, 1, 6, d, 2);
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(dlk_net_build(&net, &m, NULL, 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "model.layers[0] (globalavgpool): expects an image input");
}

int main(void)
{
	test_forward_by_hand();
	test_grads();
	test_fused_in_graph();
	test_same_bits();
	test_errors();
	return CHECK_DONE();
}
