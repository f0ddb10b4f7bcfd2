/* Benchmark driver: trains the MLP or the CNN of bench/train/README on Fashion-MNIST with
 * lib/train and prints one JSON line (samples/s, test accuracy, peak RSS). With "gemm" as the
 * model it times the MLP's GEMMs alone (the same calls a training step makes).
 * With $DLK_BENCH_BUNDLE set, the trained model is also written there as a bundle, so that the
 * PyTorch script can load its weights.safetensors and check it predicts the same.
 * "mlp-step" and "cnn-step" run STEPS training steps (forward, backward, Adam) of a batch of 128
 * random samples, no data set, no evaluation: the step alone, for callgrind and CPU time.
 *   dlk_bench mlp|cnn|gemm|info EPOCHS THREADS [LIMIT]
 *   dlk_bench mlp-step|cnn-step STEPS THREADS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/train/fmnist.h"
#include "lib/train/bundle.h"
#include "lib/train/train.h"
#include "lib/util/clock.h"
#include "lib/util/parallel.h"

/* user + system CPU time of the process: unlike wall time, barely moved by other users' load
 * (at one thread; with more, threads that spin while they wait count too) */
static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static long peak_rss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

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

/* the six GEMMs of one MLP step (forward 3, backward 5 less the unneeded first dx) */
/* $BENCH_PRECISION=bf16 (bench/train/run.sh's PRECISION): training.precision: bf16 */
static int bench_bf16(void)
{
	const char *p = getenv("BENCH_PRECISION");
	return p && !strcmp(p, "bf16");
}

static double gemm_only(int steps, int threads)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	be->set_threads(threads);
	be->set_precision(bench_bf16());
	int B = 128, dims[4] = { 784, 256, 128, 10 };
	float *a[4], *w[3], *g[4], *dw[3];
	for (int i = 0; i < 4; i++) {
		a[i] = be->alloc(sizeof(float) * B * dims[i]);
		g[i] = be->alloc(sizeof(float) * B * dims[i]);
	}
	for (int i = 0; i < 3; i++) {
		w[i] = be->alloc(sizeof(float) * dims[i] * dims[i + 1]);
		dw[i] = be->alloc(sizeof(float) * dims[i] * dims[i + 1]);
	}
	double t0 = dlk_now();
	for (int s = 0; s < steps; s++) {
		for (int i = 0; i < 3; i++)
			be->sgemm(0, 1, B, dims[i + 1], dims[i], 1, a[i], dims[i], w[i], dims[i], 0, a[i + 1], dims[i + 1]);
		for (int i = 2; i >= 0; i--) {
			be->sgemm(1, 0, dims[i + 1], dims[i], B, 1, g[i + 1], dims[i + 1], a[i], dims[i], 0, dw[i], dims[i]);
			if (i > 0)
				be->sgemm(0, 0, B, dims[i], dims[i + 1], 1, g[i + 1], dims[i + 1], w[i], dims[i], 0, g[i], dims[i]);
		}
	}
	double t = (dlk_now() - t0) / steps;
	for (int i = 0; i < 4; i++) {
		be->free(a[i]);
		be->free(g[i]);
	}
	for (int i = 0; i < 3; i++) {
		be->free(w[i]);
		be->free(dw[i]);
	}
	return t;
}

/* STEPS training steps of the model on one random batch; prints wall and CPU ms per step */
static int steps_only(const char *name, const struct dlk_model *model, int steps, int threads)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_training tr = { .epochs = 1, .batch_size = 128, .optimizer = DLK_OPT_ADAM, .lr = 1e-3,
		                   .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1 };
	struct dlk_net net;
	struct dlk_optimizer opt = DLK_OPTIMIZER_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	int B = 128;
	be->set_threads(threads);
	be->set_precision(bench_bf16());
	if (dlk_net_build(&net, model, "bench", 10, be, &err) || dlk_net_init_params(&net, "torch", 1, &err) ||
	    dlk_net_reserve(&net, B, &err) || dlk_optimizer_init(&opt, &tr, net.n_params, steps, steps, be, &err)) {
		fprintf(stderr, "dlk_bench: %s\n", err.msg);
		return 1;
	}
	float *x = be->alloc(sizeof(float) * B * net.input_size);
	int32_t *y = be->alloc(sizeof(int32_t) * B);
	uint64_t s = 1;
	for (size_t i = 0; i < (size_t)B * net.input_size; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		x[i] = (float)(s >> 40) / 16777216.0f;
	}
	for (int i = 0; i < B; i++)
		y[i] = i % 10;
	double t0 = dlk_now(), c0 = cpu_seconds();
	float loss = 0;
	for (int i = 0; i < steps; i++) {
		dlk_net_forward(&net, x, B, 1);
		loss = dlk_net_backward(&net, y, B);
		dlk_optimizer_step(&opt, net.params, net.grads, dlk_optimizer_lr(&opt, i));
	}
	printf("{\"model\":\"%s\",\"threads\":%d,\"steps\":%d,\"step_ms\":%.4f,\"cpu_ms_per_step\":%.4f,\"loss\":%.6f}\n",
	       name, threads, steps, 1e3 * (dlk_now() - t0) / steps, 1e3 * (cpu_seconds() - c0) / steps, (double)loss);
	be->free(x);
	be->free(y);
	dlk_optimizer_release(&opt);
	dlk_net_release(&net);
	return 0;
}

int main(int argc, char **argv)
{
	/* as dlk does (main.c): OpenBLAS' kernels for this CPU even when OpenBLAS is older than it */
	const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : dlk_cpu_blas_coretype();
	if (core && !setenv("OPENBLAS_CORETYPE", core, 1))
		execv("/proc/self/exe", argv);
	if (argc < 4) {
		fprintf(stderr, "usage: dlk_bench mlp|cnn|gemm EPOCHS THREADS [LIMIT]\n");
		return 2;
	}
	int epochs = atoi(argv[2]), threads = atoi(argv[3]);
	size_t limit = argc > 4 ? (size_t)atol(argv[4]) : 0;
	if (!strcmp(argv[1], "info")) {
		const char *ct = getenv("OPENBLAS_CORETYPE");
		printf("{\"device\":\"%s\",\"openblas_coretype\":\"%s\"}\n", dlk_backend_cpu()->device, ct ? ct : "");
		return 0;
	}
	if (!strcmp(argv[1], "mlp-step") || !strcmp(argv[1], "cnn-step")) {
		int c = argv[1][0] == 'c';
		struct dlk_model m = { .input = { 1, 28, 28 }, .input_rank = 3, .layers = c ? cnn : mlp,
			               .n_layers = c ? 10 : 6, .init = "torch" };
		return steps_only(argv[1], &m, epochs, threads);
	}
	if (!strcmp(argv[1], "gemm")) {
		double t = gemm_only(limit ? (int)limit : 400, threads); /* LIMIT: steps (fewer under valgrind) */
		printf("{\"model\":\"mlp-gemm-only\",\"step_ms\":%.4f}\n", t * 1e3);
		return 0;
	}
	struct dlk_dataset train, test;
	struct dlk_err lerr = DLK_ERR_INIT;
	if (fmnist_load("train", limit, &train, &lerr) || fmnist_load("test", 0, &test, &lerr)) {
		fprintf(stderr, "dlk_bench: %s\n", lerr.msg);
		return 1;
	}
	int is_cnn = !strcmp(argv[1], "cnn");
	struct dlk_model model = { .input = { 1, 28, 28 }, .input_rank = 3, .layers = is_cnn ? cnn : mlp,
	                           .n_layers = is_cnn ? 10 : 6, .init = "torch" };
	struct dlk_training tr = { .epochs = epochs, .batch_size = 128, .optimizer = DLK_OPT_ADAM, .lr = 1e-3,
	                           .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1,
	                           .seed = 42, .threads = threads, .eval_every_epoch = 0 };
	if (getenv("BENCH_SEED")) /* the same variable seeds torch_bench.py */
		tr.seed = strtoull(getenv("BENCH_SEED"), NULL, 10);
	tr.precision = bench_bf16() ? DLK_PRECISION_BF16 : DLK_PRECISION_FP32;
	struct dlk_train_opts o = DLK_TRAIN_OPTS_INIT;
	o.model = &model;
	o.training = &tr;
	o.train = &train;
	o.test = &test;
	struct dlk_train_result r;
	struct dlk_err err = DLK_ERR_INIT;
	double cpu0 = cpu_seconds();
	if (dlk_train_run(&o, &r, &err)) {
		fprintf(stderr, "dlk_bench: %s\n", err.msg);
		return 1;
	}
	/* how the compute pool ran: its jobs, the parts its workers took, how often they slept */
	struct dlk_parallel_stats ps;
	dlk_parallel_stats(&ps);
	printf("{\"impl\":\"dlk\",\"model\":\"%s\",\"epochs\":%d,\"threads\":%d,\"samples_per_sec\":%.1f,"
	       "\"step_ms\":%.4f,\"cpu_ms_per_step\":%.4f,\"test_accuracy\":%.4f,\"train_loss\":%.4f,\"seconds\":%.2f,"
	       "\"peak_rss_mb\":%.1f,\"pool\":{\"jobs\":%llu,\"worker_parts\":%llu,\"sleeps\":%llu}}\n",
	       argv[1], epochs, threads, r.train_samples_per_sec, 128e3 / r.train_samples_per_sec,
	       1e3 * (cpu_seconds() - cpu0) / (double)(r.steps > 0 ? r.steps : 1), r.eval.accuracy, r.train_loss,
	       r.seconds, peak_rss_kb() / 1024.0, ps.jobs, ps.worker_parts, ps.sleeps);
	const char *bundle = getenv("DLK_BENCH_BUNDLE");
	if (bundle && *bundle) {
		struct dlk_bundle_info bi = { .name = argv[1], .model = &model, .training = &tr, .net = &r.net,
		                              .eval = &r.eval, .train_loss = r.train_loss, .train = &train, .test = &test,
		                              .seed = tr.seed, .started_at = r.started_at, .finished_at = r.finished_at };
		if (dlk_bundle_write(bundle, &bi, &err)) {
			fprintf(stderr, "dlk_bench: %s\n", err.msg);
			return 1;
		}
	}
	dlk_train_result_release(&r);
	train.n = 60000;
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	return 0;
}
