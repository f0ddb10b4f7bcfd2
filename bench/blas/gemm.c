/* bench/blas: the products of dlk's example GPT step through one CBLAS library, loaded with
 * dlopen, so that one program times OpenBLAS (dlk's), MKL (PyTorch's) and BLIS alike.
 *   dlk_blas_bench LIBRARY THREADS
 * Each shape runs 3 times, then is timed as the best of 15 calls; prints one JSON object: the
 * library, the threads, each shape's milliseconds and GFLOP/s, and their sum. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void sgemm_fn(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc);
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

/* the example GPT (batch 32 x 128 tokens, width 128, MLP 512, vocabulary 257): M N K and whether
 * A and B are transposed, for the forward products (x w^T), the weight gradients (dy^T x) and
 * the input gradients (dy w) */
static const int shapes[][5] = {
	{ 4096, 512, 128, 0, 1 }, { 4096, 128, 512, 0, 1 }, { 4096, 384, 128, 0, 1 }, { 4096, 257, 128, 0, 1 },
	{ 4096, 128, 128, 0, 1 }, { 512, 128, 4096, 1, 0 }, { 128, 512, 4096, 1, 0 }, { 384, 128, 4096, 1, 0 },
	{ 257, 128, 4096, 1, 0 }, { 4096, 128, 512, 0, 0 }, { 4096, 512, 128, 0, 0 }, { 4096, 128, 384, 0, 0 },
	{ 4096, 128, 257, 0, 0 },
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: dlk_blas_bench LIBRARY THREADS\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "dlk_blas_bench: %s\n", dlerror());
		return 1;
	}
	sgemm_fn *gemm = (sgemm_fn *)dlsym(h, "cblas_sgemm");
	if (!gemm) {
		fprintf(stderr, "dlk_blas_bench: %s has no cblas_sgemm\n", argv[1]);
		return 1;
	}
	int threads = atoi(argv[2]);
	/* each library's own way to set its threads */
	static const char *const setters[] = { "openblas_set_num_threads", "MKL_Set_Num_Threads",
	                                       "bli_thread_set_num_threads" };
	for (size_t i = 0; i < sizeof(setters) / sizeof(setters[0]); i++) {
		void (*set)(int) = (void (*)(int))dlsym(h, setters[i]);
		if (set) {
			set(threads);
			break;
		}
	}
	size_t n = (size_t)4096 * 512;
	float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *c = malloc(sizeof(float) * n);
	if (!a || !b || !c)
		return 1;
	srand(1);
	for (size_t i = 0; i < n; i++) {
		a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
		b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
	}
	double total = 0, flops = 0;
	printf("{\"library\": \"%s\", \"threads\": %d, \"shapes\": [", argv[1], threads);
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = shapes[s][3], tb = shapes[s][4];
		int lda = ta ? M : K, ldb = tb ? K : N;
		double best = 1e30;
		for (int r = 0; r < 18; r++) {
			double t0 = now();
			gemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N);
			double t = now() - t0;
			if (r >= 3 && t < best)
				best = t;
		}
		double f = 2.0 * M * N * K;
		total += best;
		flops += f;
		printf("%s{\"m\": %d, \"n\": %d, \"k\": %d, \"op\": \"%c%c\", \"ms\": %.4f, \"gflops\": %.1f}", s ? ", " : "", M, N,
		       K, ta ? 'T' : 'N', tb ? 'T' : 'N', best * 1e3, f / best * 1e-9);
	}
	printf("], \"ms\": %.4f, \"gflop\": %.4f}\n", total * 1e3, flops * 1e-9);
	free(a);
	free(b);
	free(c);
	return 0;
}
