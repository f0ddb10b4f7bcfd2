/* Batch normalisation's CPU reference over k training steps, for the PyTorch parity test
 * (tests/shell/t1731-batchnorm-torch.sh):
 *   bn_steps OUTDIR
 * For a [C, H, W] case (BatchNorm2d: B=4, C=3, H=2, W=3) and a flat one (BatchNorm1d: B=5, C=4)
 * it runs K=3 training forwards on batches whose channels have different means and scales, and
 * writes as raw float32 (this machine's byte order) into OUTDIR/CASE.NAME.f32: x (the K batches),
 * w, b, running (mean then var after each step, K x 2C), y (the last training forward), dy, dx,
 * dw, db (its backward), eval (an evaluation forward of the last batch) and nbt (the count). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/backend.h"
#include "lib/util/rng.h"

#define K 3

static const char *dir;
static int failed;

static void put(const char *cs, const char *name, const float *p, size_t n)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s.%s.f32", dir, cs, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, sizeof(float), n, f) != n || fclose(f)) {
		fprintf(stderr, "bn_steps: cannot write '%s'\n", path);
		failed = 1;
	}
}

static void run(const char *cs, int B, int C, int HW, uint64_t seed)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	size_t n = (size_t)B * C * HW;
	float *x = calloc(K * n, sizeof(float)), *y = calloc(n, sizeof(float)), *dy = calloc(n, sizeof(float));
	float *dx = calloc(n, sizeof(float)), *ev = calloc(n, sizeof(float));
	float *w = calloc((size_t)C, sizeof(float)), *b = calloc((size_t)C, sizeof(float));
	float *dw = calloc((size_t)C, sizeof(float)), *db = calloc((size_t)C, sizeof(float));
	float *rm = calloc((size_t)C, sizeof(float)), *rv = calloc((size_t)C, sizeof(float));
	float *m = calloc((size_t)C, sizeof(float)), *r = calloc((size_t)C, sizeof(float));
	float *running = calloc((size_t)K * 2 * C, sizeof(float)), nbt = 0;
	struct dlk_rng g;

	if (!x || !y || !dy || !dx || !ev || !w || !b || !dw || !db || !rm || !rv || !m || !r || !running) {
		fprintf(stderr, "bn_steps: out of memory\n");
		exit(1);
	}
	dlk_rng_seed(&g, seed);
	for (size_t s = 0; s < K; s++) /* channel c: mean about c - 1, scale 1 + c */
		for (int i = 0; i < B; i++)
			for (int c = 0; c < C; c++)
				for (int k = 0; k < HW; k++)
					x[s * n + ((size_t)i * C + c) * HW + k] =
						(float)(c - 1) + (float)(1 + c) * (2 * dlk_rng_uniform(&g) - 1) + 0.3f * (float)s;
	for (int c = 0; c < C; c++) {
		w[c] = 0.5f + dlk_rng_uniform(&g);
		b[c] = dlk_rng_uniform(&g) - 0.5f;
		rv[c] = 1.0f;
	}
	for (size_t i = 0; i < n; i++)
		dy[i] = 2 * dlk_rng_uniform(&g) - 1;
	for (int s = 0; s < K; s++) {
		be->batchnorm_forward(x + (size_t)s * n, w, b, B, C, HW, 1e-5f, 0.1f, 1, rm, rv, &nbt, y, m, r);
		memcpy(running + (size_t)s * 2 * C, rm, sizeof(float) * (size_t)C);
		memcpy(running + (size_t)s * 2 * C + C, rv, sizeof(float) * (size_t)C);
	}
	be->batchnorm_backward(x + (K - 1) * n, w, m, r, dy, B, C, HW, dx, dw, db);
	be->batchnorm_forward(x + (K - 1) * n, w, b, B, C, HW, 1e-5f, 0.1f, 0, rm, rv, &nbt, ev, NULL, NULL);
	put(cs, "x", x, K * n);
	put(cs, "w", w, (size_t)C);
	put(cs, "b", b, (size_t)C);
	put(cs, "running", running, (size_t)K * 2 * C);
	put(cs, "y", y, n);
	put(cs, "dy", dy, n);
	put(cs, "dx", dx, n);
	put(cs, "dw", dw, (size_t)C);
	put(cs, "db", db, (size_t)C);
	put(cs, "eval", ev, n);
	put(cs, "nbt", &nbt, 1);
	free(x), free(y), free(dy), free(dx), free(ev), free(w), free(b), free(dw), free(db), free(rm), free(rv);
	free(m), free(r), free(running);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: bn_steps OUTDIR\n");
		return 2;
	}
	dir = argv[1];
	run("bn2d", 4, 3, 6, 11);
	run("bn1d", 5, 4, 1, 12);
	return failed;
}
