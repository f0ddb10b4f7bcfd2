/* The GPU benchmark's dlk side (bench/gpu/run.sh). Prints one JSON line.
 *   dlk_gpu_bench train mlp|cnn EPOCHS [LIMIT]   trains on Fashion-MNIST with lib/train on the CUDA
 *                                                backend: samples/s and test accuracy
 *   dlk_gpu_bench anatomy mlp|cnn BATCH          one training step (forward, backward, Adam) against
 *                                                the sum of its GEMMs timed alone: llm.c's rule, the
 *                                                GEMMs are what an expert implementation cannot beat
 * The models are bench/train's: the MLP 784-256-128-10 and the two-conv CNN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/train/fmnist.h"
#include "lib/nn/gpu.h"
#include "lib/train/train.h"
#include "lib/util/clock.h"

static struct dlk_layer_spec mlp[] = {
	{ .kind = DLK_LAYER_FLATTEN }, { .kind = DLK_LAYER_DENSE, .units = 256 }, { .kind = DLK_LAYER_RELU },
	{ .kind = DLK_LAYER_DENSE, .units = 128 }, { .kind = DLK_LAYER_RELU }, { .kind = DLK_LAYER_DENSE, .units = 10 },
};
static struct dlk_layer_spec cnn[] = {
	{ .kind = DLK_LAYER_CONV2D, .filters = 32, .kernel = 3, .stride = 1, .padding = 1 }, { .kind = DLK_LAYER_RELU },
	{ .kind = DLK_LAYER_MAXPOOL, .size = 2, .stride = 2 },
	{ .kind = DLK_LAYER_CONV2D, .filters = 64, .kernel = 3, .stride = 1, .padding = 1 }, { .kind = DLK_LAYER_RELU },
	{ .kind = DLK_LAYER_MAXPOOL, .size = 2, .stride = 2 }, { .kind = DLK_LAYER_FLATTEN },
	{ .kind = DLK_LAYER_DENSE, .units = 128 }, { .kind = DLK_LAYER_RELU }, { .kind = DLK_LAYER_DENSE, .units = 10 },
};

static const struct dlk_backend *gpu;

static struct dlk_model model_of(const char *kind)
{
	int c = !strcmp(kind, "cnn");
	struct dlk_model m = { .input = { 1, 28, 28 }, .input_rank = 3, .layers = c ? cnn : mlp, .n_layers = c ? 10 : 6,
	                       .init = "torch" };
	return m;
}

static struct dlk_training adam(int epochs, int batch)
{
	struct dlk_training tr = { .epochs = epochs, .batch_size = batch, .optimizer = DLK_OPT_ADAM, .lr = 1e-3,
	                           .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1, .seed = 42 };
	return tr;
}

static int train(const char *kind, int epochs, size_t limit)
{
	struct dlk_dataset tr_ds, te_ds;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = model_of(kind);
	struct dlk_training tr = adam(epochs, 128);
	struct dlk_train_opts o = DLK_TRAIN_OPTS_INIT;
	struct dlk_train_result r;

	if (fmnist_load("train", limit, &tr_ds, &err) || fmnist_load("test", 0, &te_ds, &err)) {
		fprintf(stderr, "dlk_gpu_bench: %s\n", err.msg);
		return 1;
	}
	o.model = &m;
	o.training = &tr;
	o.train = &tr_ds;
	o.test = &te_ds;
	o.backend = gpu;
	if (dlk_train_run(&o, &r, &err)) {
		fprintf(stderr, "dlk_gpu_bench: %s\n", err.msg);
		return 1;
	}
	printf("{\"impl\": \"dlk\", \"model\": \"%s\", \"device\": \"%s\", \"epochs\": %d, \"samples_per_sec\": %.1f, "
	       "\"step_ms\": %.4f, \"test_accuracy\": %.4f}\n",
	       kind, gpu->device, epochs, r.train_samples_per_sec, 1e3 * 128 / r.train_samples_per_sec, r.eval.accuracy);
	dlk_train_result_release(&r);
	dlk_dataset_release(&tr_ds);
	dlk_dataset_release(&te_ds);
	return 0;
}

/* ---- one step against its GEMMs ---- */

struct gemm_call {
	int dense; /* dense_forward (GEMM + epilogue) rather than sgemm */
	int ta, tb, m, n, k, lda, ldb, ldc, act;
	float alpha, beta;
	const float *a, *b, *bias;
	float *c;
};
static struct gemm_call calls[64];
static int n_calls, recording;

static void rec_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                      int ldb, float beta, float *c, int ldc)
{
	if (recording && n_calls < 64)
		calls[n_calls++] = (struct gemm_call){ 0, ta, tb, m, n, k, lda, ldb, ldc, 0, alpha, beta, a, b, NULL, c };
	gpu->sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void rec_dense(const float *x, const float *w, const float *bias, int batch, int in, int out, int act, float *y)
{
	if (recording && n_calls < 64)
		calls[n_calls++] = (struct gemm_call){ 1, 0, 1, batch, out, in, 0, 0, 0, act, 1, 0, x, w, bias, y };
	gpu->dense_forward(x, w, bias, batch, in, out, act, y);
}

static void replay(const struct gemm_call *g)
{
	if (g->dense)
		gpu->dense_forward(g->a, g->b, g->bias, g->m, g->k, g->n, g->act, g->c);
	else
		gpu->sgemm(g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->lda, g->b, g->ldb, g->beta, g->c, g->ldc);
}

static int anatomy(const char *kind, int batch)
{
	struct dlk_backend rec = *gpu;
	struct dlk_model m = model_of(kind);
	struct dlk_training tr = adam(1, batch);
	struct dlk_net net;
	struct dlk_optimizer opt;
	struct dlk_err err = DLK_ERR_INIT;
	char msg[512];
	const int warm = 20, steps = 200, reps = 200;

	rec.sgemm = rec_sgemm;
	if (gpu->dense_forward)
		rec.dense_forward = rec_dense;
	if (dlk_net_build(&net, &m, NULL, 10, &rec, &err) || dlk_net_init_params(&net, "torch", 42, &err) ||
	    dlk_net_reserve(&net, batch, &err) || dlk_optimizer_init(&opt, &tr, net.n_params, 1, steps, &rec, &err)) {
		fprintf(stderr, "dlk_gpu_bench: %s\n", err.msg);
		return 1;
	}
	size_t nx = (size_t)batch * net.input_size;
	float *x = malloc(sizeof(float) * nx);
	int32_t *y = malloc(sizeof(int32_t) * batch);
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
	for (int i = 0; i < batch; i++)
		y[i] = i % 10;
	float *xd = gpu->alloc(sizeof(float) * nx);
	int32_t *yd = gpu->alloc(sizeof(int32_t) * batch);
	gpu->to_device(xd, x, sizeof(float) * nx);
	gpu->to_device(yd, y, sizeof(int32_t) * batch);

	double t0 = 0;
	for (int s = 0; s < warm + steps; s++) {
		if (s == warm) {
			gpu->check(msg, sizeof(msg));
			t0 = dlk_now();
		}
		recording = s == warm;
		/* what lib/train does per step, less the host-side batch gathering */
		dlk_net_forward(&net, xd, batch, 1);
		dlk_net_backward(&net, yd, batch);
		dlk_optimizer_step(&opt, net.params, net.grads, 1e-3);
		gpu->check(msg, sizeof(msg));
	}
	double step_ms = 1e3 * (dlk_now() - t0) / steps;
	recording = 0;

	double gemm_ms = 0;
	for (int i = 0; i < n_calls; i++) {
		for (int r = 0; r < 10; r++)
			replay(&calls[i]);
		gpu->check(msg, sizeof(msg));
		double g0 = dlk_now();
		for (int r = 0; r < reps; r++)
			replay(&calls[i]);
		if (gpu->check(msg, sizeof(msg))) {
			fprintf(stderr, "dlk_gpu_bench: %s\n", msg);
			return 1;
		}
		gemm_ms += 1e3 * (dlk_now() - g0) / reps;
	}
	printf("{\"impl\": \"dlk\", \"model\": \"%s\", \"device\": \"%s\", \"batch\": %d, \"step_ms\": %.4f, "
	       "\"gemm_ms\": %.4f, \"gemms\": %d, \"samples_per_sec\": %.1f}\n",
	       kind, gpu->device, batch, step_ms, gemm_ms, n_calls, 1e3 * batch / step_ms);
	gpu->free(xd);
	gpu->free(yd);
	free(x);
	free(y);
	dlk_optimizer_release(&opt);
	dlk_net_release(&net);
	return 0;
}

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char lib[512];

	if (argc < 4 || (strcmp(argv[1], "train") && strcmp(argv[1], "anatomy")) ||
	    (strcmp(argv[2], "mlp") && strcmp(argv[2], "cnn"))) {
		fprintf(stderr, "usage: dlk_gpu_bench train mlp|cnn EPOCHS [LIMIT] | anatomy mlp|cnn BATCH\n");
		return 2;
	}
	snprintf(lib, sizeof(lib), "%s/" DLK_CUDA_LIB_NAME, build);
	gpu = dlk_backend_cuda(access(lib, F_OK) == 0 ? lib : NULL, 0, &err);
	if (!gpu) {
		fprintf(stderr, "dlk_gpu_bench: %s\n", err.msg);
		return 3;
	}
	if (!strcmp(argv[1], "train"))
		return train(argv[2], atoi(argv[3]), argc > 4 ? (size_t)atol(argv[4]) : 0);
	return anatomy(argv[2], atoi(argv[3]));
}
