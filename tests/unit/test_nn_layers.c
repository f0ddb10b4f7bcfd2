/* Layers: hand-computed forward results, shape inference errors, and finite-difference
 * gradient checks of every layer kind through the whole network (loss included). */
#include "tests/unit/check.h"
#include "tests/unit/nn_check.h"

#include <stdlib.h>

#include "lib/nn/net.h"
#include "lib/util/rng.h"

static void test_forward_by_hand(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_net net;

	/* dense: y = W x + b */
	struct dlk_layer_spec d[] = { L(DLK_LAYER_DENSE, 3) };
	struct dlk_model m = M(1, 1, 2, d, 1);
	CHECK(dlk_net_build(&net, &m, NULL, 3, be, &err) == 0);
	CHECK(net.n_params == 9);
	float p[9] = { 1, 0, 0, 1, 1, 1, 0.5f, 0, -1 };
	memcpy(net.params, p, sizeof(p));
	dlk_net_reserve(&net, 1, &err);
	float x[2] = { 1, 2 };
	const float *z = dlk_net_forward(&net, x, 1, 0);
	CHECK_NEAR(z[0], 1.5, 1e-6);
	CHECK_NEAR(z[1], 2.0, 1e-6);
	CHECK_NEAR(z[2], 2.0, 1e-6);
	dlk_net_release(&net);

	/* conv 2x2 of ones over 1..9, stride 1, no padding; then the same with padding 1, stride 2 */
	float img[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	struct dlk_layer_spec c[] = { L(DLK_LAYER_CONV2D, 1), L(DLK_LAYER_FLATTEN, 0) };
	c[0].kernel = 2;
	m = M(1, 3, 3, c, 2);
	CHECK(dlk_net_build(&net, &m, NULL, 4, be, &err) == 0);
	for (int i = 0; i < 4; i++)
		net.params[i] = 1;
	net.params[4] = 0;
	dlk_net_reserve(&net, 1, &err);
	z = dlk_net_forward(&net, img, 1, 0);
	CHECK(z[0] == 12 && z[1] == 16 && z[2] == 24 && z[3] == 28);
	dlk_net_release(&net);
	c[0].padding = 1;
	c[0].stride = 2;
	m = M(1, 3, 3, c, 2);
	CHECK(dlk_net_build(&net, &m, NULL, 4, be, &err) == 0);
	CHECK(net.layers[0].out[1] == 2 && net.layers[0].out[2] == 2);
	for (int i = 0; i < 4; i++)
		net.params[i] = 1;
	net.params[4] = 0.5f;
	dlk_net_reserve(&net, 1, &err);
	z = dlk_net_forward(&net, img, 1, 0);
	CHECK(z[0] == 1.5f && z[1] == 5.5f && z[2] == 11.5f && z[3] == 28.5f);
	dlk_net_release(&net);

	/* maxpool 2x2 over a 4x4 ramp picks each window's bottom-right corner; relu clamps */
	float ramp[16];
	for (int i = 0; i < 16; i++)
		ramp[i] = (float)i - 8;
	struct dlk_layer_spec mp[] = { L(DLK_LAYER_MAXPOOL, 2), L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_RELU, 0) };
	m = M(1, 4, 4, mp, 3);
	CHECK(dlk_net_build(&net, &m, NULL, 4, be, &err) == 0);
	dlk_net_reserve(&net, 1, &err);
	z = dlk_net_forward(&net, ramp, 1, 0);
	CHECK(z[0] == 0 && z[1] == 0 && z[2] == 5 && z[3] == 7);

	/* softmax cross-entropy: equal logits give log(k); a huge logit stays finite */
	float logits[4] = { 0, 0, 1000, -1000 };
	int32_t lab[2] = { 0, 1 };
	float dl[4];
	float loss = be->softmax_ce(logits, lab, 2, 2, dl);
	CHECK_NEAR(loss, (log(2.0) + 2000.0) / 2, 1e-5);
	CHECK_NEAR(dl[0], -0.25, 1e-6);
	CHECK_NEAR(dl[1], 0.25, 1e-6);
	CHECK_NEAR(dl[2], 0.5, 1e-6);
	CHECK_NEAR(dl[3], -0.5, 1e-6);
	dlk_net_release(&net);

	/* activations from kernels.h */
	CHECK_NEAR(dlk_k_sigmoid(0), 0.5, 1e-7);
	CHECK_NEAR(dlk_k_sigmoid(-100), 0, 1e-7);
	CHECK(isfinite(dlk_k_sigmoid(-1e30f)) && isfinite(dlk_k_sigmoid(1e30f)));
	CHECK_NEAR(dlk_k_tanh(0.5f), tanh(0.5), 1e-6);
	CHECK_NEAR(dlk_k_tanh_grad(0.5f, 2.0f), 1.5, 1e-6);
	CHECK(dlk_k_relu(-1) == 0 && dlk_k_relu_grad(0, 1) == 0 && dlk_k_relu_grad(2, 3) == 3);
}

static void test_dropout(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	size_t n = 100000;
	float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *y2 = malloc(sizeof(float) * n);
	for (size_t i = 0; i < n; i++)
		x[i] = 1;
	be->dropout_forward(x, y, n, 0.3f, 42, 0);
	size_t kept = 0;
	double sum = 0;
	for (size_t i = 0; i < n; i++) {
		kept += y[i] != 0;
		sum += y[i];
	}
	CHECK_NEAR((double)kept / n, 0.7, 0.01);
	CHECK_NEAR(sum / n, 1.0, 0.02); /* inverted: the expectation is preserved */
	be->dropout_forward(x, y2, n, 0.3f, 42, 0);
	CHECK(!memcmp(y, y2, sizeof(float) * n)); /* seeded: the same mask again */
	be->dropout_forward(x, y2, n, 0.3f, 43, 0);
	CHECK(memcmp(y, y2, sizeof(float) * n) != 0);
	free(x);
	free(y);
	free(y2);

	/* off at evaluation: the output is the input */
	struct dlk_layer_spec d[] = { L(DLK_LAYER_DROPOUT, 0), L(DLK_LAYER_DENSE, 2) };
	struct dlk_model m = M(1, 1, 4, d, 2);
	struct dlk_net net;
	struct dlk_err err = DLK_ERR_INIT;
	CHECK(dlk_net_build(&net, &m, NULL, 2, be, &err) == 0);
	dlk_net_reserve(&net, 1, &err);
	float in[4] = { 1, 2, 3, 4 };
	dlk_net_forward(&net, in, 1, 0);
	CHECK(net.layers[0].y_used == in);
	dlk_net_release(&net);
}

static void test_shape_errors(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_net net;
	struct dlk_err err = DLK_ERR_INIT;

	struct dlk_layer_spec a[] = { L(DLK_LAYER_CONV2D, 32), L(DLK_LAYER_MAXPOOL, 2), L(DLK_LAYER_CONV2D, 64),
	                              L(DLK_LAYER_MAXPOOL, 2), L(DLK_LAYER_DENSE, 10) };
	a[0].padding = a[2].padding = 1;
	a[4].line = 23;
	struct dlk_model m = M(1, 28, 28, a, 5);
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 10, be, &err) == -1);
	CHECK_STR(err.msg, "model.layers[4] (dense, dlk.yaml:23): expects a flat input or a sequence [1, T, D] but gets 64x7x7");
	CHECK_STR(err.hint, "add 'flatten' before it");
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK(net.layers == NULL && net.params == NULL);

	struct dlk_layer_spec b[] = { L(DLK_LAYER_CONV2D, 8), L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 10) };
	b[0].kernel = 5;
	m = M(1, 1, 784, b, 3);
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 10, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "model.layers[0] (conv2d): the 5x5 window is larger than its input 784");
	CHECK_CONTAINS(err.hint, "model.input");

	struct dlk_layer_spec c[] = { L(DLK_LAYER_DENSE, 128), L(DLK_LAYER_RELU, 0), L(DLK_LAYER_DENSE, 5) };
	c[2].line = 9;
	m = M(1, 1, 784, c, 3);
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(dlk_net_build(&net, &m, "p.yaml", 10, be, &err) == -1);
	CHECK_STR(err.msg, "model.layers[2] (dense, p.yaml:9): the model ends with 5 outputs but the data has 10 classes");

	struct dlk_layer_spec e[] = { L(DLK_LAYER_CONV2D, 4), L(DLK_LAYER_MAXPOOL, 2) };
	m = M(1, 8, 8, e, 2);
	CHECK(dlk_net_build(&net, &m, NULL, 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "not one value per class");

	struct dlk_layer_spec f[] = { L(DLK_LAYER_DROPOUT, 0), L(DLK_LAYER_DENSE, 3) };
	f[0].rate = 1.0f;
	m = M(1, 1, 4, f, 2);
	CHECK(dlk_net_build(&net, &m, NULL, 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "rate must be in [0, 1)");

	/* the MLP and CNN of the accuracy tests, with their parameter counts (as PyTorch counts) */
	struct dlk_layer_spec mlp[] = { L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 256), L(DLK_LAYER_RELU, 0),
	                                L(DLK_LAYER_DENSE, 128), L(DLK_LAYER_RELU, 0), L(DLK_LAYER_DENSE, 10) };
	m = M(1, 28, 28, mlp, 6);
	CHECK(dlk_net_build(&net, &m, NULL, 10, be, &err) == 0);
	CHECK(net.n_params == 784 * 256 + 256 + 256 * 128 + 128 + 1290);
	CHECK(net.layers[1].act == DLK_ACT_RELU && net.layers[2].fused);
	dlk_net_release(&net);
	struct dlk_layer_spec cnn[] = { L(DLK_LAYER_CONV2D, 32), L(DLK_LAYER_RELU, 0), L(DLK_LAYER_MAXPOOL, 2),
	                                L(DLK_LAYER_CONV2D, 64), L(DLK_LAYER_RELU, 0), L(DLK_LAYER_MAXPOOL, 2),
	                                L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 128), L(DLK_LAYER_RELU, 0),
	                                L(DLK_LAYER_DENSE, 10) };
	cnn[0].padding = cnn[3].padding = 1;
	m = M(1, 28, 28, cnn, 10);
	CHECK(dlk_net_build(&net, &m, NULL, 10, be, &err) == 0);
	CHECK(net.n_params == 320 + 18496 + 401536 + 1290);
	dlk_net_release(&net);
}

int main(void)
{
	test_forward_by_hand();
	test_dropout();
	test_shape_errors();

	struct dlk_layer_spec mlp[] = { L(DLK_LAYER_DENSE, 5), L(DLK_LAYER_TANH, 0), L(DLK_LAYER_DENSE, 4),
	                                L(DLK_LAYER_SIGMOID, 0), L(DLK_LAYER_DENSE, 3) };
	check_grads("dense+tanh+sigmoid", 1, 1, 6, mlp, 5, 4);

	struct dlk_layer_spec unfused[] = { L(DLK_LAYER_DENSE, 5), L(DLK_LAYER_DROPOUT, 0), L(DLK_LAYER_SIGMOID, 0),
	                                    L(DLK_LAYER_RELU, 0), L(DLK_LAYER_DENSE, 3) };
	unfused[1].rate = 0.4f;
	check_grads("dense+dropout(fixed mask)+stand-alone activations", 1, 1, 6, unfused, 5, 4);

	struct dlk_layer_spec conv[] = { L(DLK_LAYER_CONV2D, 3), L(DLK_LAYER_RELU, 0), L(DLK_LAYER_MAXPOOL, 2),
	                                 L(DLK_LAYER_CONV2D, 4), L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 3) };
	conv[0].stride = 2;
	conv[0].padding = 1;
	conv[2].stride = 1; /* overlapping windows: gradients add up */
	conv[3].kernel = 2;
	conv[3].padding = 1;
	check_grads("conv(stride 2, pad 1)+relu+maxpool(2, stride 1)+conv(pad 1)+dense", 2, 9, 8, conv, 6, 3);

	/* (a conv with padding 2 feeding an overlapping 3/2 max-pool has a near-tie, 4e-4 apart, in
	 * its first window with these inputs, which no finite difference can resolve; so the padding
	 * and the overlapping pool are checked in separate networks) */
	struct dlk_layer_spec t1[] = { L(DLK_LAYER_CONV2D, 2), L(DLK_LAYER_TANH, 0), L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 4) };
	t1[0].padding = 2;
	check_grads("conv(pad 2)+tanh+dense", 1, 7, 7, t1, 4, 2);
	struct dlk_layer_spec t2[] = { L(DLK_LAYER_CONV2D, 2), L(DLK_LAYER_MAXPOOL, 3), L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 4) };
	t2[1].stride = 2;
	check_grads("conv+maxpool(3, stride 2)", 1, 7, 7, t2, 4, 2);
	struct dlk_layer_spec t3[] = { L(DLK_LAYER_CONV2D, 2), L(DLK_LAYER_TANH, 0), L(DLK_LAYER_MAXPOOL, 3), L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 4) };
	t3[2].stride = 2;
	check_grads("conv+tanh+maxpool(3, stride 2)", 1, 7, 7, t3, 5, 2);
	/* (sigmoid, not relu: relu's exact zeros tie inside a window, where no difference quotient
	 * can tell which one the max took) */
	struct dlk_layer_spec p22[] = { L(DLK_LAYER_CONV2D, 3), L(DLK_LAYER_SIGMOID, 0), L(DLK_LAYER_MAXPOOL, 2),
	                                L(DLK_LAYER_FLATTEN, 0), L(DLK_LAYER_DENSE, 3) };
	p22[0].padding = 1;
	check_grads("conv(pad 1)+sigmoid+maxpool(2) (the unrolled 2x2 path)", 2, 6, 6, p22, 5, 3);
	return CHECK_DONE();
}
