/* A bundle of random weights for the ONNX export test (tests/shell/t1785-export-onnx-kinds.sh),
 * and dlk's own forward pass of it:
 *   onnx_case PROJECT.yaml SEED OUT.dlk IN.f32 N OUT.f32
 * builds the project's model with PyTorch's initialisation from SEED, moves the parameters that
 * start at a constant (batch and layer normalisation's weight 1 and bias 0, batch norm's running
 * mean 0 and variance 1) to random values so that the export cannot pass by ignoring them, writes
 * the bundle to OUT.dlk, reads it back, runs its network (evaluation: running statistics, no
 * dropout) on the N samples of IN.f32 (the network's input, float32 in this machine's byte order,
 * token ids as floats) and writes the outputs to OUT.f32. */
#include <stdio.h>
#include <stdlib.h>

#include "lib/nn/net.h"
#include "lib/project/project.h"
#include "lib/train/bundle.h"
#include "lib/util/rng.h"

static int fail(const char *what, const struct dlk_err *err)
{
	fprintf(stderr, "onnx_case: %s: %s\n", what, err ? err->msg : "failed");
	return 1;
}

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_net net = DLK_NET_INIT, back = DLK_NET_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	struct dlk_project *p;
	struct dlk_rng r;

	if (argc != 7) {
		fprintf(stderr, "usage: onnx_case PROJECT.yaml SEED OUT.dlk IN.f32 N OUT.f32\n");
		return 2;
	}
	unsigned long long seed = strtoull(argv[2], NULL, 10);
	int n = atoi(argv[5]);
	if (!(p = project_load(argv[1], NULL, 0, &err)))
		return fail(argv[1], &err);
	if (dlk_net_build(&net, &p->model, argv[1], 0, dlk_backend_cpu(), &err) ||
	    dlk_net_init_params(&net, "torch", seed, &err))
		return fail("build", &err);
	dlk_rng_seed(&r, seed + 1);
	for (int i = 0; i < net.n_layers; i++) {
		struct dlk_layer *L = &net.layers[i];
		float *w = net.params + L->w_off, *bias = net.params + L->b_off, *s = net.params + L->s_off;
		if (L->spec.kind != DLK_LAYER_BATCHNORM && L->spec.kind != DLK_LAYER_LAYERNORM)
			continue;
		for (size_t j = 0; j < L->n_w; j++) {
			w[j] = 0.6f + 0.8f * dlk_rng_uniform(&r);
			bias[j] = dlk_rng_uniform(&r) - 0.5f;
		}
		for (size_t j = 0; L->n_s && j < L->n_w; j++) {
			s[j] = dlk_rng_uniform(&r) - 0.5f;              /* running_mean */
			s[L->n_w + j] = 0.5f + dlk_rng_uniform(&r);     /* running_var */
		}
	}
	struct dlk_bundle_info info = { .name = "onnx-case", .model = &p->model, .net = &net };
	if (dlk_bundle_write(argv[3], &info, &err) || dlk_bundle_read(argv[3], &b, &err) ||
	    dlk_bundle_net(&b, dlk_backend_cpu(), &back, &err) || dlk_net_reserve(&back, n, &err))
		return fail(argv[3], &err);

	float *x = malloc(sizeof(float) * back.input_size * (size_t)n);
	FILE *f = fopen(argv[4], "rb");
	if (!x || !f || fread(x, sizeof(float) * back.input_size, (size_t)n, f) != (size_t)n)
		return fail(argv[4], NULL);
	fclose(f);
	const float *y = dlk_net_forward(&back, x, n, 0);
	const struct dlk_layer *last = &back.layers[back.n_layers - 1];
	if (!(f = fopen(argv[6], "wb")) || fwrite(y, sizeof(float) * last->out_size, (size_t)n, f) != (size_t)n ||
	    fclose(f))
		return fail(argv[6], NULL);
	printf("%zu in, %zu out per sample\n", back.input_size, last->out_size);
	free(x);
	dlk_net_release(&back);
	dlk_net_release(&net);
	dlk_bundle_release(&b);
	project_free(p);
	return 0;
}
