/* The CPU reference of ABI 7's layer operations (lib/nn/cpu_layers.h) through the backend
 * interface: every backward against central finite differences of L = sum(r * forward(x)) for a
 * random r, the values PyTorch's definitions give at known points, the edge cases (huge logits,
 * ids out of range, repeated ids) and the same bits at 1 and 3 threads.
 * Finite differences in float with step 1e-2 (1e-3 for softmax): agreement within 1e-2 * (1 + |g|). */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/nn/backend.h"
#include "lib/nn/conv_more.h"
#include "lib/util/parallel.h"
#include "lib/util/rng.h"

static const struct dlk_backend *B;

static float *rnd(size_t n, uint64_t seed)
{
	struct dlk_rng r;
	float *x = malloc(sizeof(float) * (n ? n : 1));
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = 2 * dlk_rng_uniform(&r) - 1;
	return x;
}

static double dot(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * (double)b[i];
	return s;
}

/* the operation under test as a function of one of its inputs, writing its output (n_out) */
typedef void (*forward_fn)(void *ctx, float *out);

/* Compares grad (the analytic gradient of sum(r * out) with respect to v[0..n)) with central
 * differences of that sum, perturbing v in place. */
static void fd_check(const char *what, forward_fn f, void *ctx, float *v, size_t n, const float *grad, const float *r,
                     size_t n_out, float h)
{
	float *out = malloc(sizeof(float) * n_out);
	size_t bad = 0, worst = 0;
	double wd = 0, num_w = 0;
	for (size_t i = 0; i < n; i++) {
		float keep = v[i];
		v[i] = keep + h;
		f(ctx, out);
		double lp = dot(out, r, n_out);
		v[i] = keep - h;
		f(ctx, out);
		double lm = dot(out, r, n_out);
		v[i] = keep;
		double num = (lp - lm) / (2.0 * h), d = fabs(num - grad[i]);
		if (d > 1e-2 * (1 + fabs(num)))
			bad++;
		if (d > wd)
			wd = d, worst = i, num_w = num;
	}
	CHECK_MSG(bad == 0, "%s: %zu gradients match finite differences (worst [%zu]: %.6g vs %.6g)", what, n, worst,
	          n ? (double)grad[worst] : 0.0, num_w);
	free(out);
}

/* ---- layer normalisation ---- */

struct ln_ctx {
	float *x, *w, *b, *mean, *rstd;
	int rows, n, affine;
};

static void ln_fwd(void *c, float *out)
{
	struct ln_ctx *l = c;
	B->layernorm_forward(l->x, l->affine ? l->w : NULL, l->affine ? l->b : NULL, l->rows, l->n, 1e-5f, out, l->mean,
	                     l->rstd);
}

static void test_layernorm(void)
{
	for (int affine = 0; affine <= 1; affine++) {
		int rows = 5, n = 7;
		size_t tot = (size_t)rows * n;
		struct ln_ctx l = { rnd(tot, 1), rnd(n, 2), rnd(n, 3), malloc(sizeof(float) * rows),
			            malloc(sizeof(float) * rows), rows, n, affine };
		float *y = malloc(sizeof(float) * tot), *r = rnd(tot, 4), *dx = malloc(sizeof(float) * tot);
		float *dw = malloc(sizeof(float) * n), *db = malloc(sizeof(float) * n);
		for (size_t i = 0; i < tot; i++)
			l.x[i] = 3 * l.x[i] + 2; /* an offset and a spread the normalisation must remove */
		ln_fwd(&l, y);
		if (!affine) {
			double m = 0, v = 0;
			for (int i = 0; i < n; i++)
				m += y[n + i];
			m /= n;
			for (int i = 0; i < n; i++)
				v += (y[n + i] - m) * (y[n + i] - m);
			CHECK_MSG(fabs(m) < 1e-6 && fabs(v / n - 1) < 1e-3, "layernorm: a row has mean 0 and variance 1 (%g, %g)",
			          m, v / n);
		}
		B->layernorm_backward(l.x, affine ? l.w : NULL, l.mean, l.rstd, r, rows, n, dx, affine ? dw : NULL,
		                      affine ? db : NULL);
		fd_check(affine ? "layernorm dx (affine)" : "layernorm dx", ln_fwd, &l, l.x, tot, dx, r, tot, 1e-2f);
		if (affine) {
			fd_check("layernorm dw", ln_fwd, &l, l.w, n, dw, r, tot, 1e-2f);
			fd_check("layernorm db", ln_fwd, &l, l.b, n, db, r, tot, 1e-2f);
		}
		free(l.x), free(l.w), free(l.b), free(l.mean), free(l.rstd), free(y), free(r), free(dx), free(dw), free(db);
	}
}

/* ---- GELU ---- */

struct gelu_ctx {
	float *x;
	size_t n;
	int approx;
};

static void gelu_fwd(void *c, float *out)
{
	struct gelu_ctx *g = c;
	B->gelu_forward(g->approx, g->x, out, g->n);
}

static void test_gelu(void)
{
	/* torch.nn.GELU()(1.0) = 0.8413447, GELU(approximate="tanh")(1.0) = 0.8411920, both at -3 */
	float x[2] = { 1.0f, -3.0f }, y[2];
	B->gelu_forward(DLK_GELU_ERF, x, y, 2);
	CHECK_MSG(fabs(y[0] - 0.8413447f) < 1e-6 && fabs(y[1] - -0.0040496886f) < 1e-6, "gelu (erf) at 1 and -3: %.7g %.7g",
	          (double)y[0], (double)y[1]);
	B->gelu_forward(DLK_GELU_TANH, x, y, 2);
	CHECK_MSG(fabs(y[0] - 0.8411920f) < 1e-6 && fabs(y[1] - -0.0036373436f) < 1e-6, "gelu (tanh) at 1 and -3: %.7g %.7g",
	          (double)y[0], (double)y[1]);
	for (int approx = 0; approx <= 1; approx++) {
		size_t n = 257;
		struct gelu_ctx g = { rnd(n, 10), n, approx };
		float *r = rnd(n, 11), *dx = malloc(sizeof(float) * n);
		for (size_t i = 0; i < n; i++)
			g.x[i] *= 4;
		B->gelu_backward(approx, g.x, r, dx, n);
		fd_check(approx ? "gelu (tanh) dx" : "gelu (erf) dx", gelu_fwd, &g, g.x, n, dx, r, n, 1e-2f);
		B->gelu_backward(approx, g.x, r, r, n); /* in place, as the interface allows */
		CHECK_MSG(!memcmp(r, dx, sizeof(float) * n), "gelu backward in place gives the same bits");
		free(g.x), free(r), free(dx);
	}
}

/* ---- softmax ---- */

struct sm_ctx {
	float *x;
	int rows, n;
};

static void sm_fwd(void *c, float *out)
{
	struct sm_ctx *s = c;
	B->softmax_forward(s->x, out, s->rows, s->n);
}

static void test_softmax(void)
{
	float big[4] = { 1000.0f, 0.0f, -1000.0f, 1000.0f }, y[4];
	B->softmax_forward(big, y, 1, 4);
	CHECK_MSG(y[0] == 0.5f && y[1] == 0.0f && y[2] == 0.0f && y[3] == 0.5f, "softmax of huge logits: no overflow (%g %g %g %g)",
	          (double)y[0], (double)y[1], (double)y[2], (double)y[3]);
	float masked[3] = { -INFINITY, 2.0f, -INFINITY };
	B->softmax_forward(masked, y, 1, 3);
	CHECK_MSG(y[0] == 0 && y[1] == 1 && y[2] == 0, "softmax: -inf (a mask) gives exactly 0");
	int rows = 4, n = 9;
	size_t tot = (size_t)rows * n;
	struct sm_ctx s = { rnd(tot, 20), rows, n };
	float *out = malloc(sizeof(float) * tot), *r = rnd(tot, 21), *dx = malloc(sizeof(float) * tot);
	sm_fwd(&s, out);
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += out[2 * n + i];
	CHECK_MSG(fabs(sum - 1) < 1e-6, "softmax: a row sums to 1 (%.9g)", sum);
	B->softmax_backward(out, r, dx, rows, n);
	fd_check("softmax dx", sm_fwd, &s, s.x, tot, dx, r, tot, 1e-3f);
	free(s.x), free(out), free(r), free(dx);
}

/* ---- embedding ---- */

struct emb_ctx {
	float *ids;
	float *table;
	int count, vocab, dim;
};

static void emb_fwd(void *c, float *out)
{
	struct emb_ctx *e = c;
	B->embedding_forward(e->ids, e->table, e->count, e->vocab, e->dim, out);
}

static void test_embedding(void)
{
	float ids[6] = { 3, 0, 3, 4, 3, 1 };
	struct emb_ctx e = { ids, rnd(5 * 4, 30), 6, 5, 4 };
	float y[24], *r = rnd(24, 31), dt[20];
	emb_fwd(&e, y);
	CHECK_MSG(!memcmp(y + 2 * 4, e.table + 3 * 4, sizeof(float) * 4) && !memcmp(y + 5 * 4, e.table + 4, sizeof(float) * 4),
	          "embedding: row i of the output is the table's row ids[i]");
	for (int i = 0; i < 20; i++)
		dt[i] = 7.0f; /* accumulates: what is there stays */
	B->embedding_backward(ids, r, 6, 5, 4, dt);
	float want = 7.0f + r[0 * 4 + 1];
	want += r[2 * 4 + 1];
	want += r[4 * 4 + 1];
	CHECK_MSG(dt[3 * 4 + 1] == want, "embedding: a repeated id's gradients add in order onto what was there");
	CHECK_MSG(dt[2 * 4 + 0] == 7.0f && dt[2 * 4 + 3] == 7.0f, "embedding: the row of an id not seen is untouched");
	for (int i = 0; i < 20; i++)
		dt[i] -= 7.0f;
	fd_check("embedding dtable", emb_fwd, &e, e.table, 20, dt, r, 24, 1e-2f);
	float bad[5] = { -1, 5, 2.5f, NAN, 2 };
	float yb[20], before[20];
	B->embedding_forward(bad, e.table, 5, 5, 4, yb);
	CHECK_MSG(yb[0] == 0 && yb[4] == 0 && yb[8] == 0 && yb[12] == 0 && yb[15] == 0 && yb[16] == e.table[8],
	          "embedding: ids out of range or not integers (-1, 5, 2.5, NaN) read zeros, no crash");
	memcpy(before, e.table, sizeof(before));
	B->embedding_backward(bad, r, 4, 5, 4, e.table);
	CHECK_MSG(!memcmp(before, e.table, sizeof(before)), "embedding: those ids add nothing");
	free(e.table), free(r);
}

/* ---- upsampling ---- */

struct up_ctx {
	float *x;
	int planes, h, w, s, mode;
};

static void up_fwd(void *c, float *out)
{
	struct up_ctx *u = c;
	B->upsample_forward(u->x, u->planes, u->h, u->w, u->s, u->mode, out);
}

static void test_upsample(void)
{
	/* F.interpolate([[0, 1]], scale_factor=2, mode="bilinear") rows: 0, .25, .75, 1 */
	float x[2] = { 0, 1 }, y[8];
	B->upsample_forward(x, 1, 1, 2, 2, DLK_UPSAMPLE_BILINEAR, y);
	CHECK_MSG(y[0] == 0 && y[1] == 0.25f && y[2] == 0.75f && y[3] == 1 && y[4] == 0 && y[7] == 1,
	          "bilinear x2 of [0 1]: [0 .25 .75 1] on both rows (%g %g %g %g)", (double)y[0], (double)y[1],
	          (double)y[2], (double)y[3]);
	B->upsample_forward(x, 1, 1, 2, 2, DLK_UPSAMPLE_NEAREST, y);
	CHECK_MSG(y[0] == 0 && y[1] == 0 && y[2] == 1 && y[3] == 1 && y[6] == 1, "nearest x2 of [0 1]: [0 0 1 1]");
	for (int mode = 0; mode <= 1; mode++)
		for (int s = 2; s <= 3; s++) {
			struct up_ctx u = { rnd(2 * 3 * 5, 40), 2, 3, 5, s, mode };
			size_t no = (size_t)2 * 3 * s * 5 * s;
			float *r = rnd(no, 41), *dx = malloc(sizeof(float) * 30);
			char what[64];
			B->upsample_backward(r, 2, 3, 5, s, mode, dx);
			snprintf(what, sizeof(what), "upsample %s x%d dx", mode ? "bilinear" : "nearest", s);
			fd_check(what, up_fwd, &u, u.x, 30, dx, r, no, 1e-2f);
			free(u.x), free(r), free(dx);
		}
}

/* ---- grouped and transposed convolution (lib/nn/conv_more.c) ---- */

struct cm_ctx {
	float *x, *w, *bias, *scratch;
	struct dlk_conv_more s;
	int transposed;
};

static void cm_fwd(void *c, float *out)
{
	struct cm_ctx *m = c;
	if (m->transposed)
		dlk_convt_forward(B, m->x, m->w, m->bias, &m->s, DLK_ACT_NONE, m->scratch, out);
	else
		dlk_conv_grouped_forward(B, m->x, m->w, m->bias, &m->s, DLK_ACT_NONE, m->scratch, out);
}

static void test_conv_more(void)
{
	struct {
		const char *what;
		struct dlk_conv_more s;
		int transposed;
	} cases[] = {
		{ "conv2d groups 2", { .batch = 2, .c = 4, .h = 5, .w = 6, .f = 6, .k = 3, .stride = 1, .pad = 1, .groups = 2 }, 0 },
		{ "conv2d depthwise stride 2", { .batch = 2, .c = 3, .h = 7, .w = 5, .f = 3, .k = 3, .stride = 2, .pad = 1, .groups = 3 }, 0 },
		{ "convtranspose2d stride 2 pad 1 output_padding 1",
		  { .batch = 2, .c = 3, .h = 4, .w = 3, .f = 2, .k = 3, .stride = 2, .pad = 1, .out_pad = 1 }, 1 },
		{ "convtranspose2d k 2 stride 2", { .batch = 1, .c = 2, .h = 3, .w = 3, .f = 3, .k = 2, .stride = 2 }, 1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cm_ctx m = { .s = cases[i].s, .transposed = cases[i].transposed };
		int ok = m.transposed ? dlk_convt_shape(&m.s) : dlk_conv_grouped_shape(&m.s);
		CHECK_MSG(ok == 0, "%s: the shape is accepted (%dx%d out)", cases[i].what, m.s.oh, m.s.ow);
		if (ok)
			continue;
		struct dlk_conv_more *s = &m.s;
		size_t nx = (size_t)s->batch * s->c * s->h * s->w, ny = (size_t)s->batch * s->f * s->oh * s->ow;
		size_t nw = m.transposed ? (size_t)s->c * s->f * s->k * s->k : (size_t)s->f * (s->c / s->groups) * s->k * s->k;
		size_t sc = m.transposed ? dlk_convt_scratch(s) : dlk_conv_grouped_scratch(s);
		m.x = rnd(nx, 60 + i), m.w = rnd(nw, 70 + i), m.bias = rnd(s->f, 80 + i), m.scratch = malloc(sizeof(float) * sc);
		float *r = rnd(ny, 90 + i), *dx = malloc(sizeof(float) * nx), *dw = malloc(sizeof(float) * nw);
		float *db = malloc(sizeof(float) * s->f);
		if (m.transposed)
			dlk_convt_backward(B, m.x, m.w, r, s, m.scratch, dw, db, dx);
		else
			dlk_conv_grouped_backward(B, m.x, m.w, r, s, m.scratch, dw, db, dx);
		char what[128];
		snprintf(what, sizeof(what), "%s dx", cases[i].what);
		fd_check(what, cm_fwd, &m, m.x, nx, dx, r, ny, 1e-2f);
		snprintf(what, sizeof(what), "%s dw", cases[i].what);
		fd_check(what, cm_fwd, &m, m.w, nw, dw, r, ny, 1e-2f);
		snprintf(what, sizeof(what), "%s db", cases[i].what);
		fd_check(what, cm_fwd, &m, m.bias, s->f, db, r, ny, 1e-2f);
		free(m.x), free(m.w), free(m.bias), free(m.scratch), free(r), free(dx), free(dw), free(db);
	}
	struct dlk_conv_more bad = { .batch = 1, .c = 3, .h = 4, .w = 4, .f = 4, .k = 3, .stride = 1, .groups = 2 };
	CHECK_MSG(dlk_conv_grouped_shape(&bad) == -1, "conv2d: channels not a multiple of groups are refused");
	struct dlk_conv_more badt = { .batch = 1, .c = 3, .h = 4, .w = 4, .f = 4, .k = 3, .stride = 2, .out_pad = 2 };
	CHECK_MSG(dlk_convt_shape(&badt) == -1, "convtranspose2d: output_padding not below stride is refused");
}

/* ---- the same bits whatever the thread count ---- */

static void run_all(float *out, size_t *n_out)
{
	int rows = 300, n = 129;
	size_t tot = (size_t)rows * n, k = 0;
	float *x = rnd(tot, 50), *w = rnd(n, 51), *b = rnd(n, 52), *dy = rnd(tot, 53);
	float *mean = malloc(sizeof(float) * rows), *rstd = malloc(sizeof(float) * rows);
	float *ids = malloc(sizeof(float) * rows);
	for (int i = 0; i < rows; i++)
		ids[i] = (float)((i * 7) % 13);
	B->layernorm_forward(x, w, b, rows, n, 1e-5f, out + k, mean, rstd), k += tot;
	B->layernorm_backward(x, w, mean, rstd, dy, rows, n, out + k, out + k + tot, out + k + tot + n), k += tot + 2 * n;
	B->gelu_forward(DLK_GELU_TANH, x, out + k, tot), k += tot;
	B->gelu_backward(DLK_GELU_ERF, x, dy, out + k, tot), k += tot;
	B->softmax_forward(x, out + k, rows, n), k += tot;
	B->softmax_backward(out + k - tot, dy, out + k, rows, n), k += tot;
	memset(out + k, 0, sizeof(float) * 13 * n);
	B->embedding_backward(ids, dy, rows, 13, n, out + k), k += (size_t)13 * n;
	B->upsample_backward(dy, 3, 10, 10, 2, DLK_UPSAMPLE_BILINEAR, out + k), k += 300;
	*n_out = k;
	free(x), free(w), free(b), free(dy), free(mean), free(rstd), free(ids);
}

static void test_threads(void)
{
	size_t cap = 8 * 300 * 129 + 20 * 129 + 300, n1, n3;
	float *a = malloc(sizeof(float) * cap), *c = malloc(sizeof(float) * cap);
	dlk_parallel_set_threads(1);
	run_all(a, &n1);
	dlk_parallel_set_threads(3);
	run_all(c, &n3);
	CHECK_MSG(n1 == n3 && !memcmp(a, c, sizeof(float) * n1), "1 and 3 threads: the same bits (%zu floats)", n1);
	dlk_parallel_set_threads(1);
	free(a), free(c);
}

int main(void)
{
	B = dlk_backend_cpu();
	test_layernorm();
	test_gelu();
	test_softmax();
	test_embedding();
	test_upsample();
	test_conv_more();
	test_threads();
	return CHECK_DONE();
}
