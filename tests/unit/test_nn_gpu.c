/* The CUDA backend against the CPU reference: every kernel and a whole training step, with
 * stated tolerances. Skips cleanly where no libdlk-cuda.so or no device is present. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <unistd.h>

#include "lib/nn/gpu.h"
#include "lib/nn/net.h"
#include "lib/nn/optim.h"
#include "lib/util/rng.h"

static const struct dlk_backend *cpu, *gpu;

static float *up(const float *h, size_t n)
{
	float *d = gpu->alloc(sizeof(float) * n);
	gpu->to_device(d, h, sizeof(float) * n);
	return d;
}

static double max_diff(const float *host, const float *dev, size_t n)
{
	float *t = malloc(sizeof(float) * n);
	gpu->to_host(t, dev, sizeof(float) * n);
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = fabs(t[i] - host[i]) > m ? fabs(t[i] - host[i]) : m;
	free(t);
	return m;
}

static void rand_fill(float *x, size_t n, uint64_t seed)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = 2 * dlk_rng_uniform(&r) - 1;
}

/* a CNN step (forward, backward, Adam) on both backends from the same weights */
static void compare_step(void)
{
	struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_CONV2D, .filters = 8, .kernel = 3, .stride = 2, .padding = 1 }, { .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_MAXPOOL, .size = 3, .stride = 1 }, { .kind = DLK_LAYER_CONV2D, .filters = 6, .kernel = 3, .stride = 1, .padding = 1 },
		{ .kind = DLK_LAYER_TANH }, { .kind = DLK_LAYER_FLATTEN }, { .kind = DLK_LAYER_DROPOUT, .rate = 0.3f },
		{ .kind = DLK_LAYER_DENSE, .units = 16 }, { .kind = DLK_LAYER_SIGMOID }, { .kind = DLK_LAYER_DENSE, .units = 5 },
	};
	struct dlk_model m = { .input = { 3, 12, 12 }, .input_rank = 3, .layers = layers, .n_layers = 10, .init = "torch" };
	struct dlk_net a, b;
	struct dlk_err err = DLK_ERR_INIT;
	int B = 9;
	CHECK(dlk_net_build(&a, &m, NULL, 5, cpu, &err) == 0 && dlk_net_build(&b, &m, NULL, 5, gpu, &err) == 0);
	dlk_net_init_params(&a, "torch", 3, &err);
	dlk_net_init_params(&b, "torch", 3, &err);
	CHECK(max_diff(a.params, b.params, a.n_params) == 0);
	dlk_net_reserve(&a, B, &err);
	dlk_net_reserve(&b, B, &err);
	size_t nx = (size_t)B * a.input_size;
	float *x = malloc(sizeof(float) * nx);
	rand_fill(x, nx, 8);
	int32_t y[9] = { 0, 1, 2, 3, 4, 0, 1, 2, 3 };
	float *xd = up(x, nx);
	int32_t *yd = gpu->alloc(sizeof(y));
	gpu->to_device(yd, y, sizeof(y));
	const float *za = dlk_net_forward(&a, x, B, 1), *zb = dlk_net_forward(&b, xd, B, 1);
	CHECK_MSG(max_diff(za, zb, (size_t)B * 5) < 1e-4, "logits agree");
	float la = dlk_net_backward(&a, y, B), lb = dlk_net_backward(&b, yd, B);
	CHECK_NEAR(la, lb, 1e-5);
	double gd = max_diff(a.grads, b.grads, a.n_params);
	CHECK_MSG(gd < 1e-4, "gradients agree (max diff %g)", gd);
	struct dlk_training tr = { .epochs = 1, .batch_size = B, .optimizer = DLK_OPT_ADAMW, .lr = 1e-2, .beta1 = 0.9,
	                           .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .step_size = 1, .grad_clip = 0.5 };
	struct dlk_optimizer oa, ob;
	dlk_optimizer_init(&oa, &tr, a.n_params, 1, 1, cpu, &err);
	dlk_optimizer_init(&ob, &tr, b.n_params, 1, 1, gpu, &err);
	CHECK_NEAR(dlk_optimizer_clip(&oa, a.grads), dlk_optimizer_clip(&ob, b.grads), 1e-5);
	dlk_optimizer_step(&oa, a.params, a.grads, 1e-2);
	dlk_optimizer_step(&ob, b.params, b.grads, 1e-2);
	CHECK_MSG(max_diff(a.params, b.params, a.n_params) < 1e-4, "AdamW steps agree");
	char msg[256];
	CHECK_MSG(gpu->check(msg, sizeof(msg)) == 0, "no device error (%s)", msg);
	dlk_optimizer_release(&oa);
	dlk_optimizer_release(&ob);
	gpu->free(xd);
	gpu->free(yd);
	free(x);
	dlk_net_release(&a);
	dlk_net_release(&b);
}

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	cpu = dlk_backend_cpu();
	/* tests run from the source tree: prefer the freshly built library */
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char lib[512];
	snprintf(lib, sizeof(lib), "%s/" DLK_CUDA_LIB_NAME, build);
	gpu = dlk_backend_cuda(access(lib, F_OK) == 0 ? lib : NULL, &err);
	/* the loader's error names what it tried, whatever the reason */
	struct dlk_err e2 = DLK_ERR_INIT;
	CHECK(dlk_backend_cuda("/nonexistent/libdlk-cuda.so", &e2) == NULL);
	CHECK_CONTAINS(e2.msg, "cannot load the CUDA backend '/nonexistent/libdlk-cuda.so'");
	CHECK_CONTAINS(e2.hint, "make gpu");
	if (!gpu) {
		printf("ok %d # skip %s\n1..%d\n", check_n + 1, err.msg, check_n + 1);
		return check_failed ? 1 : 0;
	}
	printf("# device: %s\n", gpu->device);
	compare_step();
	return CHECK_DONE();
}
