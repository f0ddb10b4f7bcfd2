/* Optimizer steps against closed-form values (PyTorch semantics), schedules, clipping, init. */
#include "tests/unit/check.h"

#include "lib/nn/net.h"
#include "lib/nn/optim.h"
#include "lib/util/rng.h"

static struct dlk_training T(enum dlk_optim o, double lr)
{
	struct dlk_training t = { .epochs = 1, .batch_size = 1, .optimizer = o, .lr = lr, .beta1 = 0.9,
	                          .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1 };
	return t;
}

/* two steps of the optimizer on p = 1 with gradients 0.5 then -0.25 */
static float two_steps(struct dlk_training tr)
{
	struct dlk_optimizer o;
	struct dlk_err err = DLK_ERR_INIT;
	float p = 1, g;
	if (dlk_optimizer_init(&o, &tr, 1, 10, 10, dlk_backend_cpu(), &err))
		return NAN;
	g = 0.5f;
	dlk_optimizer_step(&o, &p, &g, tr.lr);
	g = -0.25f;
	dlk_optimizer_step(&o, &p, &g, tr.lr);
	dlk_optimizer_release(&o);
	return p;
}

/* Adam by the book, in double */
static double adam_ref(double lr, double wd, int decoupled)
{
	double p = 1, m = 0, v = 0, g[2] = { 0.5, -0.25 };
	for (int t = 1; t <= 2; t++) {
		double gg = g[t - 1];
		if (decoupled)
			p *= 1 - lr * wd;
		else
			gg += wd * p;
		m = 0.9 * m + 0.1 * gg;
		v = 0.999 * v + 0.001 * gg * gg;
		double mh = m / (1 - pow(0.9, t)), vh = v / (1 - pow(0.999, t));
		p -= lr * mh / (sqrt(vh) + 1e-8);
	}
	return p;
}

int main(void)
{
	/* plain SGD: p - lr g, twice */
	struct dlk_training tr = T(DLK_OPT_SGD, 0.1);
	CHECK_NEAR(two_steps(tr), 1 - 0.05 + 0.025, 1e-6);
	/* momentum 0.9: buf = 0.5 -> p = 0.95; buf = 0.45 - 0.25 = 0.2 -> p = 0.93 */
	tr.momentum = 0.9;
	CHECK_NEAR(two_steps(tr), 0.93, 1e-6);
	/* Nesterov: g + mu buf: 0.5 + 0.45 = 0.95 -> 0.905; buf 0.2, -0.25 + 0.18 = -0.07 -> 0.912 */
	tr.nesterov = 1;
	CHECK_NEAR(two_steps(tr), 0.912, 1e-6);
	/* weight decay joins the gradient: g1 = 0.5 + 0.1 = 0.6 -> 0.94; g2 = -0.25 + 0.094 -> 0.9556 */
	tr = T(DLK_OPT_SGD, 0.1);
	tr.weight_decay = 0.1;
	CHECK_NEAR(two_steps(tr), 0.94 + 0.1 * (0.25 - 0.094), 1e-6);

	tr = T(DLK_OPT_ADAM, 0.01);
	CHECK_NEAR(two_steps(tr), adam_ref(0.01, 0, 0), 1e-6);
	/* the first Adam step moves by lr exactly (bias correction) */
	{
		struct dlk_optimizer o;
		struct dlk_err err = DLK_ERR_INIT;
		float p = 1, g = 0.5f;
		dlk_optimizer_init(&o, &tr, 1, 1, 1, dlk_backend_cpu(), &err);
		dlk_optimizer_step(&o, &p, &g, 0.01);
		CHECK_NEAR(p, 0.99, 1e-6);
		CHECK(o.t == 1);
		dlk_optimizer_release(&o);
	}
	tr.weight_decay = 0.1;
	CHECK_NEAR(two_steps(tr), adam_ref(0.01, 0.1, 0), 1e-6);
	tr = T(DLK_OPT_ADAMW, 0.01);
	tr.weight_decay = 0.1;
	CHECK_NEAR(two_steps(tr), adam_ref(0.01, 0.1, 1), 1e-6);
	/* AdamW decays decoupled: with a zero gradient only the decay moves p */
	{
		struct dlk_optimizer o;
		struct dlk_err err = DLK_ERR_INIT;
		float p = 2, g = 0;
		dlk_optimizer_init(&o, &tr, 1, 1, 1, dlk_backend_cpu(), &err);
		dlk_optimizer_step(&o, &p, &g, 0.01);
		CHECK_NEAR(p, 2 * (1 - 0.01 * 0.1), 1e-7);
		dlk_optimizer_release(&o);
	}
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_optimizer o;
	tr = T(DLK_OPT_ADAM, -1);
	CHECK(dlk_optimizer_init(&o, &tr, 1, 1, 1, dlk_backend_cpu(), &err) == -1);
	CHECK_CONTAINS(err.msg, "training.lr");

	/* schedules: step every 2 epochs of 10 steps; cosine over 100 steps to 0.01; warm-up 4 */
	tr = T(DLK_OPT_SGD, 0.1);
	tr.schedule = DLK_LR_STEP;
	tr.step_size = 2;
	tr.gamma = 0.5;
	dlk_optimizer_init(&o, &tr, 1, 10, 100, dlk_backend_cpu(), &err);
	CHECK_NEAR(dlk_optimizer_lr(&o, 0), 0.1, 1e-12);
	CHECK_NEAR(dlk_optimizer_lr(&o, 19), 0.1, 1e-12);
	CHECK_NEAR(dlk_optimizer_lr(&o, 20), 0.05, 1e-12);
	CHECK_NEAR(dlk_optimizer_lr(&o, 45), 0.025, 1e-12);
	dlk_optimizer_release(&o);
	tr.schedule = DLK_LR_COSINE;
	tr.min_lr = 0.01;
	tr.warmup_steps = 4;
	dlk_optimizer_init(&o, &tr, 1, 10, 100, dlk_backend_cpu(), &err);
	CHECK_NEAR(dlk_optimizer_lr(&o, 50), 0.055, 1e-12);
	CHECK_NEAR(dlk_optimizer_lr(&o, 100), 0.01, 1e-12);
	CHECK_NEAR(dlk_optimizer_lr(&o, 0), 0.1 * 0.25, 1e-12);
	CHECK_NEAR(dlk_optimizer_lr(&o, 3), 0.01 + 0.09 * (1 + cos(M_PI * 0.03)) / 2, 1e-9); /* warm-up over */
	dlk_optimizer_release(&o);

	/* global-norm clipping: [3, 4] has norm 5; clipped to 1 it becomes [0.6, 0.8] */
	tr = T(DLK_OPT_SGD, 0.1);
	tr.grad_clip = 1;
	dlk_optimizer_init(&o, &tr, 2, 1, 1, dlk_backend_cpu(), &err);
	float g[2] = { 3, 4 };
	CHECK_NEAR(dlk_optimizer_clip(&o, g), 5, 1e-6);
	CHECK_NEAR(g[0], 0.6, 1e-5);
	CHECK_NEAR(g[1], 0.8, 1e-5);
	float small[2] = { 0.3f, 0.4f };
	dlk_optimizer_clip(&o, small);
	CHECK(small[0] == 0.3f && small[1] == 0.4f);
	dlk_optimizer_release(&o);

	/* initialisation: torch's bound 1/sqrt(fan_in) for weights and biases; xavier's for weights,
	 * zero biases; the same seed gives the same weights */
	struct dlk_layer_spec d[] = { { .kind = DLK_LAYER_DENSE, .units = 100 } };
	struct dlk_model m = { .input = { 1, 1, 400 }, .layers = d, .n_layers = 1 };
	struct dlk_net net, net2;
	CHECK(dlk_net_build(&net, &m, NULL, 100, dlk_backend_cpu(), &err) == 0);
	CHECK(dlk_net_build(&net2, &m, NULL, 100, dlk_backend_cpu(), &err) == 0);
	dlk_net_init_params(&net, "torch", 1, &err);
	dlk_net_init_params(&net2, "torch", 1, &err);
	CHECK(!memcmp(net.params, net2.params, sizeof(float) * net.n_params));
	float mx = 0, mxb = 0;
	double mean = 0;
	for (size_t i = 0; i < 40000; i++) {
		mx = fabsf(net.params[i]) > mx ? fabsf(net.params[i]) : mx;
		mean += net.params[i];
	}
	for (size_t i = 40000; i < net.n_params; i++)
		mxb = fabsf(net.params[i]) > mxb ? fabsf(net.params[i]) : mxb;
	CHECK(mx <= 0.05f && mx > 0.049f);
	CHECK(mxb <= 0.05f && mxb > 0.04f);
	CHECK(fabs(mean / 40000) < 0.001);
	dlk_net_init_params(&net2, "xavier", 1, &err);
	mx = 0;
	for (size_t i = 0; i < 40000; i++)
		mx = fabsf(net2.params[i]) > mx ? fabsf(net2.params[i]) : mx;
	CHECK(mx <= sqrtf(6.0f / 500) && mx > 0.99f * sqrtf(6.0f / 500));
	CHECK(net2.params[40000] == 0);
	CHECK(dlk_net_init_params(&net2, "he", 1, &err) == -1);
	CHECK_CONTAINS(err.msg, "unknown scheme 'he'");
	dlk_net_release(&net);
	dlk_net_release(&net2);

	/* the generator: deterministic, uniform in [0, 1), unbiased below n */
	struct dlk_rng r1, r2;
	dlk_rng_seed(&r1, 5);
	dlk_rng_seed(&r2, 5);
	int same = 1, inrange = 1;
	for (int i = 0; i < 1000; i++) {
		float u = dlk_rng_uniform(&r1);
		same &= u == dlk_rng_uniform(&r2);
		inrange &= u >= 0 && u < 1;
		inrange &= dlk_rng_below(&r1, 7) < 7;
		dlk_rng_below(&r2, 7);
	}
	CHECK(same && inrange);
	return CHECK_DONE();
}
