/* Helpers of the nn tests: a layer and a model in a line, and finite-difference checks of every
 * parameter gradient of a net through the CPU backend. */
#ifndef DLK_TESTS_NN_CHECK_H
#define DLK_TESTS_NN_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/net.h"
#include "lib/util/rng.h"
#include "tests/unit/check.h"

#define NN_CHECK_FN __attribute__((unused)) static

NN_CHECK_FN struct dlk_layer_spec L(enum dlk_layer_kind k, int a)
{
	struct dlk_layer_spec s = { .kind = k, .kernel = 3, .stride = 1, .padding = 0, .size = 2, .rate = 0.5f };
	if (k == DLK_LAYER_DENSE)
		s.units = a;
	if (k == DLK_LAYER_CONV2D)
		s.filters = a;
	if (k == DLK_LAYER_MAXPOOL)
		s.size = s.stride = a;
	return s;
}

NN_CHECK_FN struct dlk_model M(int c, int h, int w, struct dlk_layer_spec *layers, int n)
{
	struct dlk_model m = { .input = { c, h, w }, .input_rank = 3, .layers = layers, .n_layers = n, .init = "torch" };
	return m;
}

/* loss at the current parameters; dropout replays the mask starting at `counter` */
NN_CHECK_FN double loss_at(struct dlk_net *net, const float *x, const int32_t *y, int batch, uint64_t counter)
{
	net->dropout_counter = counter;
	const float *z = dlk_net_forward(net, x, batch, 1);
	return net->be->softmax_ce(z, y, batch, net->n_classes, NULL);
}

/* (L(p + h) - L(p - h)) / 2h for parameter i, dropout replaying the masks from counter */
NN_CHECK_FN double central_difference(struct dlk_net *net, const float *x, const int32_t *y, int batch, size_t i,
                                      float h, uint64_t counter)
{
	float keep = net->params[i];
	net->params[i] = keep + h;
	double lp = loss_at(net, x, y, batch, counter);
	net->params[i] = keep - h;
	double lm = loss_at(net, x, y, batch, counter);
	net->params[i] = keep;
	return (lp - lm) / (2.0 * h);
}

/* a copy of the analytic parameter gradients (to free), dropout drawing from counter */
NN_CHECK_FN float *analytic_grads(struct dlk_net *net, const float *x, const int32_t *y, int batch, uint64_t counter)
{
	net->dropout_counter = counter;
	dlk_net_forward(net, x, batch, 1);
	dlk_net_backward(net, y, batch);
	float *g = malloc(sizeof(float) * net->n_params);
	memcpy(g, net->grads, sizeof(float) * net->n_params);
	return g;
}

/* Compares every analytic parameter gradient with a central difference. Returns the number of
 * mismatches; prints the worst. */
NN_CHECK_FN int grad_check(struct dlk_net *net, const float *x, const int32_t *y, int batch, const char *what)
{
	uint64_t counter = 12345;
	float *analytic = analytic_grads(net, x, y, batch, counter);
	int bad = 0, kinks = 0;
	double worst = 0;
	for (size_t i = 0; i < net->n_params; i++) {
		double num[2];
		for (int k = 0; k < 2; k++)
			num[k] = central_difference(net, x, y, batch, i, k ? 1e-3f : 3e-3f, counter);
		double tol = 2e-3 + 2e-2 * fabs(num[1]);
		/* a ReLU or a max switching inside +-h makes the difference quotient depend on h:
		 * such points are not differentiable there and are counted, not compared */
		if (fabs(num[0] - num[1]) > tol) {
			kinks++;
			continue;
		}
		double diff = fabs(num[1] - analytic[i]);
		if (diff > worst)
			worst = diff;
		if (diff > tol) {
			if (bad < 3)
				printf("# %s: param %zu analytic %g numeric %g\n", what, i, analytic[i], num[1]);
			bad++;
		}
	}
	printf("# %s: %zu params, %d at kinks, worst abs diff %g\n", what, net->n_params, kinks, worst);
	if ((size_t)kinks * 10 > net->n_params)
		bad++;
	free(analytic);
	return bad;
}

NN_CHECK_FN void random_fill(float *x, size_t n, uint64_t seed)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = 2.0f * dlk_rng_uniform(&r) - 1.0f;
}

NN_CHECK_FN void check_grads(const char *what, int c, int h, int w, struct dlk_layer_spec *layers, int n, int batch)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_net net;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = M(c, h, w, layers, n);
	int ok = dlk_net_build(&net, &m, "dlk.yaml", 0, be, &err) == 0;
	CHECK_MSG(ok, "%s builds (%s)", what, err.msg);
	if (!ok)
		return;
	ok = dlk_net_init_params(&net, "torch", 7, &err) == 0 && dlk_net_reserve(&net, batch, &err) == 0;
	CHECK_MSG(ok, "%s allocates", what);
	size_t nx = (size_t)batch * net.input_size;
	float *x = malloc(sizeof(float) * nx);
	int32_t *y = malloc(sizeof(int32_t) * batch);
	random_fill(x, nx, 99);
	for (int b = 0; b < batch; b++)
		y[b] = b % net.n_classes;
	CHECK_MSG(grad_check(&net, x, y, batch, what) == 0, "%s: analytic gradients match finite differences", what);
	free(x);
	free(y);
	dlk_net_release(&net);
}

/* A net of these layers on a backend: PyTorch's initial values (seed 7) and room for batch. */
NN_CHECK_FN int nn_build(struct dlk_net *net, const struct dlk_backend *be, int c, int h, int w,
                         struct dlk_layer_spec *ls, int n, int batch, const char *what)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = M(c, h, w, ls, n);
	int ok = dlk_net_build(net, &m, "dlk.yaml", 0, be, &err) == 0 && dlk_net_init_params(net, "torch", 7, &err) == 0 &&
	         dlk_net_reserve(net, batch, &err) == 0;
	CHECK_MSG(ok, "%s builds (%s)", what, err.msg);
	return ok;
}

NN_CHECK_FN void fill_uniform(float *p, size_t n, uint64_t seed, float lo, float hi)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		p[i] = lo + (hi - lo) * dlk_rng_uniform(&r);
}

/* For nets with no kinks: every parameter's analytic gradient within 2e-3 + 2e-2 |numeric| of
 * one central difference (h = 1e-3), none skipped; dropout draws the same masks in every
 * forward. Checks it and returns how many disagree. */
NN_CHECK_FN int grad_check_smooth(struct dlk_net *net, const float *x, const int32_t *y, int batch, const char *what)
{
	float *g = analytic_grads(net, x, y, batch, 0);
	size_t bad = 0, worst_i = 0;
	double worst = 0;
	for (size_t i = 0; i < net->n_params; i++) {
		double num = central_difference(net, x, y, batch, i, 1e-3f, 0), d = fabs(num - g[i]);
		if (d > 2e-3 + 2e-2 * fabs(num))
			bad++;
		if (d > worst)
			worst = d, worst_i = i;
	}
	CHECK_MSG(bad == 0, "%s: %zu parameter gradients match finite differences (worst [%zu] off by %g)", what,
	          net->n_params, worst_i, worst);
	free(g);
	return (int)bad;
}

#endif
