/* The CPU reference of ABI 6's layer operations on fixed inputs, for the PyTorch parity test
 * (tests/shell/t1720-layer-ops-torch.sh):
 *   layer_ops OUTDIR
 * writes every input, output and gradient as raw float32 / int32 (this machine's byte order) into
 * OUTDIR/NAME.f32 / NAME.i32; the shapes are the ones written below, which the test repeats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/backend.h"
#include "lib/nn/conv_more.h"
#include "lib/util/rng.h"

static const char *dir;
static int failed;

/* every buffer, freed at the end (the tool allocates a few dozen) */
static void *held[256];
static int n_held;
static void *keep(void *p)
{
	if (!p || n_held == 256) {
		fprintf(stderr, "layer_ops: out of memory\n");
		exit(1);
	}
	return held[n_held++] = p;
}

static void put(const char *name, const char *ext, const void *p, size_t bytes)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, ext);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f)) {
		fprintf(stderr, "layer_ops: cannot write '%s'\n", path);
		failed = 1;
	}
}
#define PUTF(name, p, n) put(name, "f32", p, sizeof(float) * (size_t)(n))

static float *rnd(size_t n, uint64_t seed, float scale)
{
	struct dlk_rng r;
	float *x = keep(malloc(sizeof(float) * n));
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = scale * (2 * dlk_rng_uniform(&r) - 1);
	return x;
}

static float *buf(size_t n) { return keep(calloc(n ? n : 1, sizeof(float))); }

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: layer_ops OUTDIR\n");
		return 2;
	}
	dir = argv[1];
	const struct dlk_backend *b = dlk_backend_cpu();

	/* layernorm: x [6, 10, 48] over the last axis, affine, eps 1e-5 */
	{
		int rows = 60, n = 48;
		size_t t = (size_t)rows * n;
		float *x = rnd(t, 1, 3), *w = rnd(n, 2, 1), *bb = rnd(n, 3, 1), *dy = rnd(t, 4, 1);
		float *y = buf(t), *m = buf(rows), *r = buf(rows), *dx = buf(t), *dw = buf(n), *db = buf(n);
		b->layernorm_forward(x, w, bb, rows, n, 1e-5f, y, m, r);
		b->layernorm_backward(x, w, m, r, dy, rows, n, dx, dw, db);
		PUTF("ln_x", x, t), PUTF("ln_w", w, n), PUTF("ln_b", bb, n), PUTF("ln_dy", dy, t);
		PUTF("ln_y", y, t), PUTF("ln_dx", dx, t), PUTF("ln_dw", dw, n), PUTF("ln_db", db, n);
	}
	/* gelu, both forms: x [4096] in [-6, 6] */
	{
		size_t n = 4096;
		float *x = rnd(n, 5, 6), *dy = rnd(n, 6, 1), *y = buf(n), *dx = buf(n);
		PUTF("gelu_x", x, n), PUTF("gelu_dy", dy, n);
		b->gelu_forward(DLK_GELU_ERF, x, y, n), b->gelu_backward(DLK_GELU_ERF, x, dy, dx, n);
		PUTF("gelu_erf_y", y, n), PUTF("gelu_erf_dx", dx, n);
		b->gelu_forward(DLK_GELU_TANH, x, y, n), b->gelu_backward(DLK_GELU_TANH, x, dy, dx, n);
		PUTF("gelu_tanh_y", y, n), PUTF("gelu_tanh_dx", dx, n);
	}
	/* softmax: x [32, 100] scaled to +-20 */
	{
		int rows = 32, n = 100;
		size_t t = (size_t)rows * n;
		float *x = rnd(t, 7, 20), *dy = rnd(t, 8, 1), *y = buf(t), *dx = buf(t);
		b->softmax_forward(x, y, rows, n);
		b->softmax_backward(y, dy, dx, rows, n);
		PUTF("sm_x", x, t), PUTF("sm_dy", dy, t), PUTF("sm_y", y, t), PUTF("sm_dx", dx, t);
	}
	/* embedding: ids [4, 16] into a [37, 24] table, many repeats */
	{
		int count = 64, vocab = 37, dim = 24;
		int32_t ids[64];
		float fids[64];
		for (int i = 0; i < count; i++)
			ids[i] = (i * i + 3 * i) % vocab, fids[i] = (float)ids[i];
		float *t = rnd((size_t)vocab * dim, 9, 1), *dy = rnd((size_t)count * dim, 10, 1);
		float *y = buf((size_t)count * dim), *dt = buf((size_t)vocab * dim);
		b->embedding_forward(fids, t, count, vocab, dim, y);
		b->embedding_backward(fids, dy, count, vocab, dim, dt);
		put("emb_ids", "i32", ids, sizeof(ids));
		PUTF("emb_w", t, vocab * dim), PUTF("emb_dy", dy, count * dim), PUTF("emb_y", y, count * dim);
		PUTF("emb_dw", dt, vocab * dim);
	}
	/* upsample: x [2, 3, 5, 7], x2 and x3, nearest and bilinear */
	{
		int planes = 6, h = 5, w = 7;
		size_t ni = (size_t)planes * h * w;
		float *x = rnd(ni, 11, 1);
		PUTF("up_x", x, ni);
		for (int mode = 0; mode <= 1; mode++)
			for (int s = 2; s <= 3; s++) {
				size_t no = ni * s * s;
				float *dy = rnd(no, 12 + s, 1), *y = buf(no), *dx = buf(ni);
				char name[64];
				b->upsample_forward(x, planes, h, w, s, mode, y);
				b->upsample_backward(dy, planes, h, w, s, mode, dx);
				const char *mn = mode ? "bilinear" : "nearest";
				snprintf(name, sizeof(name), "up_%s%d_dy", mn, s), PUTF(name, dy, no);
				snprintf(name, sizeof(name), "up_%s%d_y", mn, s), PUTF(name, y, no);
				snprintf(name, sizeof(name), "up_%s%d_dx", mn, s), PUTF(name, dx, ni);
			}
	}
	/* grouped conv2d (x [2, 4, 9, 8], w [6, 2, 3, 3], groups 2, stride 2, pad 1), depthwise
	 * (x [2, 4, 9, 8], w [4, 1, 3, 3], groups 4, pad 1), convtranspose2d (x [2, 4, 5, 4],
	 * w [4, 3, 3, 3], stride 2, pad 1, output_padding 1): forward, dx, dw, db */
	{
		struct dlk_conv_more cs[3] = {
			{ .batch = 2, .c = 4, .h = 9, .w = 8, .f = 6, .k = 3, .stride = 2, .pad = 1, .groups = 2 },
			{ .batch = 2, .c = 4, .h = 9, .w = 8, .f = 4, .k = 3, .stride = 1, .pad = 1, .groups = 4 },
			{ .batch = 2, .c = 4, .h = 5, .w = 4, .f = 3, .k = 3, .stride = 2, .pad = 1, .out_pad = 1 },
		};
		const char *names[3] = { "gconv", "dwconv", "convt" };
		for (int i = 0; i < 3; i++) {
			struct dlk_conv_more *s = &cs[i];
			int t = i == 2;
			if (t ? dlk_convt_shape(s) : dlk_conv_grouped_shape(s)) {
				fprintf(stderr, "layer_ops: %s: bad shape\n", names[i]);
				failed = 1;
				break;
			}
			size_t nx = (size_t)s->batch * s->c * s->h * s->w, ny = (size_t)s->batch * s->f * s->oh * s->ow;
			size_t nw = t ? (size_t)s->c * s->f * 9 : (size_t)s->f * (s->c / s->groups) * 9;
			float *x = rnd(nx, 20 + i, 1), *w = rnd(nw, 30 + i, 1), *bias = rnd(s->f, 40 + i, 1);
			float *dy = rnd(ny, 50 + i, 1), *y = buf(ny), *dx = buf(nx), *dw = buf(nw), *db = buf(s->f);
			float *sc = buf(t ? dlk_convt_scratch(s) : dlk_conv_grouped_scratch(s));
			char name[64];
			if (t) {
				dlk_convt_forward(b, x, w, bias, s, DLK_ACT_NONE, sc, y);
				dlk_convt_backward(b, x, w, dy, s, sc, dw, db, dx);
			} else {
				dlk_conv_grouped_forward(b, x, w, bias, s, DLK_ACT_NONE, sc, y);
				dlk_conv_grouped_backward(b, x, w, dy, s, sc, dw, db, dx);
			}
			snprintf(name, sizeof(name), "%s_x", names[i]), PUTF(name, x, nx);
			snprintf(name, sizeof(name), "%s_w", names[i]), PUTF(name, w, nw);
			snprintf(name, sizeof(name), "%s_b", names[i]), PUTF(name, bias, s->f);
			snprintf(name, sizeof(name), "%s_dy", names[i]), PUTF(name, dy, ny);
			snprintf(name, sizeof(name), "%s_y", names[i]), PUTF(name, y, ny);
			snprintf(name, sizeof(name), "%s_dx", names[i]), PUTF(name, dx, nx);
			snprintf(name, sizeof(name), "%s_dw", names[i]), PUTF(name, dw, nw);
			snprintf(name, sizeof(name), "%s_db", names[i]), PUTF(name, db, s->f);
		}
	}
	while (n_held)
		free(held[--n_held]);
	return failed;
}
