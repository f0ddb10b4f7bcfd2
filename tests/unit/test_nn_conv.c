/* The CPU backend's convolution (lib/nn/cpu_conv.c) against a plain reference in double, on both
 * of its paths (shifted windows of the padded image or of its phases where the padding is below
 * the kernel size, an im2col copy otherwise), and
 * its promises: the same bits for any number of threads, with or without dx, and on AVX-512 and
 * AVX2 (both fuse the multiply-add). Max-pooling against a plain reference too. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/nn/backend.h"
#include "lib/nn/cpu_bgemm.h"
#include "lib/nn/cpu_conv.h"
#include "lib/util/parallel.h"

static float frand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static double act_ref(int act, double v)
{
	switch (act) {
	case DLK_ACT_RELU: return v > 0 ? v : 0;
	case DLK_ACT_TANH: return tanh(v);
	default: return v;
	}
}

/* y = act(conv + bias); dw, db, dx of the loss sum(y_pre * dy) (dy given for the pre-activation) */
static void conv_ref(const struct dlk_conv_shape *s, const float *x, const float *w, const float *bias,
                     const float *dy, int act, double *y, double *dw, double *db, double *dx)
{
	int C = s->c, F = s->f, k = s->k;
	memset(dw, 0, sizeof(double) * (size_t)F * C * k * k);
	memset(db, 0, sizeof(double) * (size_t)F);
	memset(dx, 0, sizeof(double) * (size_t)s->batch * C * s->h * s->w);
	for (int b = 0; b < s->batch; b++)
		for (int f = 0; f < F; f++)
			for (int oy = 0; oy < s->oh; oy++)
				for (int ox = 0; ox < s->ow; ox++) {
					size_t yi = (((size_t)b * F + f) * s->oh + oy) * s->ow + ox;
					double acc = bias[f], g = dy[yi];
					db[f] += g;
					for (int c = 0; c < C; c++)
						for (int i = 0; i < k; i++)
							for (int j = 0; j < k; j++) {
								int iy = oy * s->stride - s->pad + i, ix = ox * s->stride - s->pad + j;
								if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
									continue;
								size_t xi = (((size_t)b * C + c) * s->h + iy) * s->w + ix;
								size_t wi = (((size_t)f * C + c) * k + i) * k + j;
								acc += (double)w[wi] * x[xi];
								dw[wi] += g * x[xi];
								dx[xi] += g * w[wi];
							}
					y[yi] = act_ref(act, acc);
				}
}

static double worst_rel(const float *a, const double *b, size_t n)
{
	double scale = 0, worst = 0;
	for (size_t i = 0; i < n; i++)
		scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
	for (size_t i = 0; i < n; i++) {
		double d = fabs(a[i] - b[i]) / (scale > 0 ? scale : 1);
		worst = d > worst ? d : worst;
	}
	return worst;
}

struct out {
	float *y, *dw, *db, *dx;
};

static void run(const struct dlk_conv_shape *s, const float *x, const float *w, const float *bias, const float *dy,
                int act, int want_dx, struct out *o)
{
	const struct dlk_backend *cpu = dlk_backend_cpu();
	cpu->conv_forward(x, w, bias, s, act, o->y, NULL, NULL);
	cpu->conv_backward(x, w, NULL, NULL, dy, NULL, s, act, o->dw, o->db, want_dx ? o->dx : NULL);
}

static int same(const struct out *a, const struct out *b, size_t ny, size_t nw, size_t nb, size_t nx, int dx)
{
	return !memcmp(a->y, b->y, ny * 4) && !memcmp(a->dw, b->dw, nw * 4) && !memcmp(a->db, b->db, nb * 4) &&
	       (!dx || !memcmp(a->dx, b->dx, nx * 4));
}

static void out_alloc(struct out *o, size_t ny, size_t nw, size_t nb, size_t nx)
{
	o->y = calloc(ny, 4);
	o->dw = calloc(nw, 4);
	o->db = calloc(nb, 4);
	o->dx = calloc(nx, 4);
}

static void out_free(struct out *o)
{
	free(o->y);
	free(o->dw);
	free(o->db);
	free(o->dx);
}

/* o1 (run on 1 thread) again on 2 and 3 threads, and without dx: the same bits (o2 is scratch) */
static void repeatable(const struct dlk_conv_shape *s, const float *x, const float *w, const float *bias,
                       const float *dy, int act, const struct out *o1, struct out *o2, const char *what)
{
	size_t nx = (size_t)s->batch * s->c * s->h * s->w, nw = (size_t)s->f * s->c * s->k * s->k, nb = (size_t)s->f;
	size_t ny = (size_t)s->batch * s->f * s->oh * s->ow;
	int ok = 1;
	for (int t = 2; t <= 3; t++) {
		dlk_parallel_set_threads(t);
		run(s, x, w, bias, dy, act, 1, o2);
		ok &= same(o1, o2, ny, nw, nb, nx, 1);
	}
	CHECK_MSG(ok, "%s: the same bits on 1, 2 and 3 threads", what);
	dlk_parallel_set_threads(1);
	memset(o2->dw, 0xff, nw * 4);
	run(s, x, w, bias, dy, act, 0, o2);
	CHECK_MSG(same(o1, o2, ny, nw, nb, nx, 0), "%s: the same dw and db without dx", what);
}

static void check_shape(struct dlk_conv_shape s, int act, const char *isa2)
{
	unsigned seed = 7u * (unsigned)(s.batch + 3 * s.c + 5 * s.f + 11 * s.k + 13 * s.stride + 17 * s.pad);
	s.oh = (s.h + 2 * s.pad - s.k) / s.stride + 1;
	s.ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
	size_t nx = (size_t)s.batch * s.c * s.h * s.w, nw = (size_t)s.f * s.c * s.k * s.k, nb = (size_t)s.f;
	size_t ny = (size_t)s.batch * s.f * s.oh * s.ow;
	float *x = malloc(nx * 4), *w = malloc(nw * 4), *bias = malloc(nb * 4), *dy = malloc(ny * 4);
	double *y_r = malloc(ny * 8), *dw_r = malloc(nw * 8), *db_r = malloc(nb * 8), *dx_r = malloc(nx * 8);
	for (size_t i = 0; i < nx; i++)
		x[i] = frand(&seed);
	for (size_t i = 0; i < nw; i++)
		w[i] = frand(&seed);
	for (size_t i = 0; i < nb; i++)
		bias[i] = frand(&seed);
	for (size_t i = 0; i < ny; i++)
		dy[i] = frand(&seed);
	conv_ref(&s, x, w, bias, dy, act, y_r, dw_r, db_r, dx_r);

	char what[160];
	snprintf(what, sizeof(what), "batch %d c %d %dx%d f %d k %d stride %d pad %d act %d (%s path)", s.batch, s.c, s.h,
	         s.w, s.f, s.k, s.stride, s.pad, act, s.pad < s.k ? "direct" : "im2col");
	struct out o1, o2, o3;
	out_alloc(&o1, ny, nw, nb, nx);
	out_alloc(&o2, ny, nw, nb, nx);
	out_alloc(&o3, ny, nw, nb, nx);
	dlk_parallel_set_threads(1);
	run(&s, x, w, bias, dy, act, 1, &o1);
	double ey = worst_rel(o1.y, y_r, ny), ew = worst_rel(o1.dw, dw_r, nw), eb = worst_rel(o1.db, db_r, nb),
	       ex = worst_rel(o1.dx, dx_r, nx);
	CHECK_MSG(ey < 1e-5 && ew < 1e-5 && eb < 1e-5 && ex < 1e-5,
	          "%s: y, dw, db, dx match the reference (worst relative %.2g %.2g %.2g %.2g)", what, ey, ew, eb, ex);
	repeatable(&s, x, w, bias, dy, act, &o1, &o2, what);
	const char *was = dlk_cpu_conv_isa();
	if (isa2) {
		dlk_cpu_conv_force_isa(isa2);
		run(&s, x, w, bias, dy, act, 1, &o3);
		dlk_cpu_conv_force_isa(was);
		CHECK_MSG(same(&o1, &o3, ny, nw, nb, nx, 1), "%s: the same bits with the %s kernel as with %s", what, isa2,
		          was);
	}
	dlk_cpu_conv_force_isa("baseline");
	run(&s, x, w, bias, dy, act, 1, &o3);
	dlk_cpu_conv_force_isa(was);
	ey = worst_rel(o3.y, y_r, ny), ew = worst_rel(o3.dw, dw_r, nw), ex = worst_rel(o3.dx, dx_r, nx);
	CHECK_MSG(ey < 1e-5 && ew < 1e-5 && ex < 1e-5, "%s: the baseline kernel matches too (%.2g %.2g %.2g)", what, ey,
	          ew, ex);
	out_free(&o1);
	out_free(&o2);
	out_free(&o3);
	free(x);
	free(w);
	free(bias);
	free(dy);
	free(y_r);
	free(dw_r);
	free(db_r);
	free(dx_r);
}

static float bf(float x)
{
	return dlk_bf16_float(dlk_bf16_round(x));
}

/* training.precision: bf16. On a CPU with AVX512_BF16 a direct layer's products take operands
 * rounded to bf16 and sum them in fp32: y against the reference of the rounded x and w, dw of the
 * rounded dy and x, dx of the rounded dy and w, within fp32's rounding; db stays fp32. The same bits on 1, 2 and 3 threads and without dx, and not the
 * bits of fp32 (the products did change). Elsewhere, and through im2col, fp32's bits. */
static void check_bf16(struct dlk_conv_shape s, int act)
{
	unsigned seed = 11u * (unsigned)(s.batch + 3 * s.c + 5 * s.f + 11 * s.k + 13 * s.stride + 17 * s.pad);
	s.oh = (s.h + 2 * s.pad - s.k) / s.stride + 1;
	s.ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
	size_t nx = (size_t)s.batch * s.c * s.h * s.w, nw = (size_t)s.f * s.c * s.k * s.k, nb = (size_t)s.f;
	size_t ny = (size_t)s.batch * s.f * s.oh * s.ow;
	float *x = malloc(nx * 4), *w = malloc(nw * 4), *bias = malloc(nb * 4), *dy = malloc(ny * 4);
	float *xr = malloc(nx * 4), *wr = malloc(nw * 4), *dyr = malloc(ny * 4);
	double *y_r = malloc(ny * 8), *dw_r = malloc(nw * 8), *db_r = malloc(nb * 8), *dx_r = malloc(nx * 8);
	double *y_f = malloc(ny * 8), *dw_f = malloc(nw * 8), *db_f = malloc(nb * 8), *dx_f = malloc(nx * 8);
	for (size_t i = 0; i < nx; i++)
		xr[i] = bf(x[i] = frand(&seed));
	for (size_t i = 0; i < nw; i++)
		wr[i] = bf(w[i] = frand(&seed));
	for (size_t i = 0; i < nb; i++)
		bias[i] = frand(&seed);
	for (size_t i = 0; i < ny; i++)
		dyr[i] = bf(dy[i] = frand(&seed));
	conv_ref(&s, xr, wr, bias, dyr, act, y_r, dw_r, db_r, dx_r);
	conv_ref(&s, x, w, bias, dy, act, y_f, dw_f, db_f, dx_f);
	char what[160];
	snprintf(what, sizeof(what), "bf16: batch %d c %d %dx%d f %d k %d stride %d pad %d act %d", s.batch, s.c, s.h,
	         s.w, s.f, s.k, s.stride, s.pad, act);
	struct out o1, o2, o3;
	out_alloc(&o1, ny, nw, nb, nx);
	out_alloc(&o2, ny, nw, nb, nx);
	out_alloc(&o3, ny, nw, nb, nx);
	dlk_parallel_set_threads(1);
	run(&s, x, w, bias, dy, act, 1, &o3); /* fp32 */
	dlk_cpu_conv_set_precision(1);
	run(&s, x, w, bias, dy, act, 1, &o1);
	if (!dlk_cpu_conv_bf16() || s.pad >= s.k) {
		CHECK_MSG(same(&o1, &o3, ny, nw, nb, nx, 1), "%s: the same bits as fp32 (%s)", what,
		          s.pad >= s.k ? "a layer through im2col" : "no AVX512_BF16");
	} else {
		double ey = worst_rel(o1.y, y_r, ny), ew = worst_rel(o1.dw, dw_r, nw), eb = worst_rel(o1.db, db_f, nb),
		       ex = worst_rel(o1.dx, dx_r, nx);
		CHECK_MSG(ey < 1e-5 && ew < 1e-5 && eb < 1e-5 && ex < 1e-5,
		          "%s: y, dw, dx match the reference of the rounded operands, db that of fp32 (worst relative "
		          "%.2g %.2g %.2g %.2g)",
		          what, ey, ew, eb, ex);
		CHECK_MSG(memcmp(o1.y, o3.y, ny * 4) && memcmp(o1.dw, o3.dw, nw * 4) && memcmp(o1.dx, o3.dx, nx * 4),
		          "%s: y, dw and dx are not fp32's bits", what);
		repeatable(&s, x, w, bias, dy, act, &o1, &o2, what);
	}
	dlk_cpu_conv_set_precision(0);
	out_free(&o1);
	out_free(&o2);
	out_free(&o3);
	free(x);
	free(w);
	free(bias);
	free(dy);
	free(xr);
	free(wr);
	free(dyr);
	free(y_r);
	free(dw_r);
	free(db_r);
	free(dx_r);
	free(y_f);
	free(dw_f);
	free(db_f);
	free(dx_f);
}

/* conv + activation + max-pool in one call each way against the three separate passes: the same bits */
static void check_pooled(struct dlk_conv_shape s, int act, int size, int stride, int threads, int nan)
{
	const struct dlk_backend *cpu = dlk_backend_cpu();
	unsigned seed = 5;
	s.oh = (s.h + 2 * s.pad - s.k) / s.stride + 1;
	s.ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
	s.pool = size;
	s.pool_stride = stride;
	s.ph = (s.oh - size) / stride + 1;
	s.pw = (s.ow - size) / stride + 1;
	struct dlk_conv_shape u = s;
	u.pool = 0;
	size_t nx = (size_t)s.batch * s.c * s.h * s.w, nw = (size_t)s.f * s.c * s.k * s.k, nb = (size_t)s.f;
	size_t ny = (size_t)s.batch * s.f * s.oh * s.ow, np = (size_t)s.batch * s.f * s.ph * s.pw;
	float *x = malloc(nx * 4), *w = malloc(nw * 4), *bias = malloc(nb * 4), *dp = malloc(np * 4);
	float *p1 = malloc(np * 4), *p2 = malloc(np * 4), *dz = malloc(ny * 4);
	int32_t *a1 = malloc(np * 4), *a2 = malloc(np * 4);
	for (size_t i = 0; i < nx; i++)
		x[i] = frand(&seed);
	for (size_t i = 0; i < nw; i++)
		w[i] = frand(&seed);
	for (size_t i = 0; i < nb; i++)
		bias[i] = frand(&seed);
	for (size_t i = 0; i < np; i++)
		dp[i] = frand(&seed);
	if (nan) /* a NaN input makes NaN activations: the pool picks them, ReLU's derivative drops them */
		x[nx / 3] = NAN;
	struct out f, sep;
	out_alloc(&f, ny, nw, nb, nx);
	out_alloc(&sep, ny, nw, nb, nx);
	dlk_parallel_set_threads(threads);
	cpu->conv_forward(x, w, bias, &s, act, f.y, p1, a1);
	cpu->conv_backward(x, w, f.y, p1, dp, a1, &s, act, f.dw, f.db, f.dx);
	cpu->conv_forward(x, w, bias, &u, act, sep.y, NULL, NULL);
	cpu->maxpool_forward(sep.y, s.batch, s.f, s.oh, s.ow, size, stride, s.ph, s.pw, p2, a2);
	cpu->maxpool_backward(dp, a2, np, ny, dz);
	cpu->act_backward(act, sep.y, dz, dz, ny);
	cpu->conv_backward(x, w, NULL, NULL, dz, NULL, &u, act, sep.dw, sep.db, sep.dx);
	/* a 2x2 pool of stride 2 after ReLU or no activation needs no full activation: the CPU backend
	 * promises not to write it (its memory traffic is what that saves); elsewhere it is y */
	int yfree = size == 2 && stride == 2 && (act == DLK_ACT_RELU || act == DLK_ACT_NONE), untouched = 1;
	for (size_t i = 0; yfree && i < ny; i++)
		untouched &= f.y[i] == 0.0f;
	if (yfree)
		memcpy(f.y, sep.y, ny * 4);
	CHECK_MSG(untouched && same(&f, &sep, ny, nw, nb, nx, 1) && !memcmp(p1, p2, np * 4) && !memcmp(a1, a2, np * 4),
	          "conv %dx%d %dx%d stride %d pad %d, act %d, max-pool %d/%d, %d threads: fused, the same bits as the "
	          "separate passes (%s kernel%s)", s.h, s.w, s.k, s.k, s.stride, s.pad, act, size, stride, threads,
	          dlk_cpu_conv_isa(), nan ? ", a NaN input" : "");
	out_free(&f);
	out_free(&sep);
	free(x);
	free(w);
	free(bias);
	free(dp);
	free(p1);
	free(p2);
	free(dz);
	free(a1);
	free(a2);
}

static void check_maxpool(int batch, int c, int h, int w, int size, int stride)
{
	const struct dlk_backend *cpu = dlk_backend_cpu();
	int oh = (h - size) / stride + 1, ow = (w - size) / stride + 1;
	size_t nx = (size_t)batch * c * h * w, ny = (size_t)batch * c * oh * ow;
	float *x = malloc(nx * 4), *y = malloc(ny * 4);
	int32_t *am = malloc(ny * 4);
	unsigned seed = 99;
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)((int)(frand(&seed) * 8)); /* small integers: ties happen */
	for (size_t i = 5; i < nx; i += 37)
		x[i] = NAN; /* a NaN wins its window, the first of two NaNs */
	dlk_parallel_set_threads(2);
	cpu->maxpool_forward(x, batch, c, h, w, size, stride, oh, ow, y, am);
	int bad = 0;
	for (int p = 0; p < batch * c; p++)
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				size_t best = (size_t)p * h * w + (size_t)(oy * stride) * w + ox * stride;
				for (int i = 0; i < size; i++)
					for (int j = 0; j < size; j++) {
						size_t idx = (size_t)p * h * w + (size_t)(oy * stride + i) * w + ox * stride + j;
						if (x[idx] > x[best] || (isnan(x[idx]) && !isnan(x[best])))
							best = idx;
					}
				size_t o = ((size_t)p * oh + oy) * ow + ox;
				bad += memcmp(&y[o], &x[best], sizeof(float)) || am[o] != (int32_t)best;
			}
	CHECK_MSG(!bad, "max-pool %d/%d of %dx%dx%dx%d on 2 threads (%s kernel): the first maximum and its index (%d wrong)",
	          size, stride, batch, c, h, w, dlk_cpu_conv_isa(), bad);
	free(x);
	free(y);
	free(am);
}

int main(void)
{
	const char *isa = dlk_cpu_conv_isa(), *other = NULL;
	printf("# kernel: %s\n", isa);
	if (!strcmp(isa, "avx512"))
		other = "avx2";
	const struct dlk_conv_shape shapes[] = {
		{ .batch = 3, .c = 1, .h = 7, .w = 6, .f = 5, .k = 3, .stride = 1, .pad = 1 },
		{ .batch = 2, .c = 3, .h = 8, .w = 9, .f = 17, .k = 3, .stride = 1, .pad = 1 },
		{ .batch = 10, .c = 3, .h = 6, .w = 6, .f = 4, .k = 3, .stride = 1, .pad = 1 }, /* two weight groups */
		{ .batch = 2, .c = 2, .h = 5, .w = 5, .f = 3, .k = 2, .stride = 1, .pad = 0 },
		{ .batch = 2, .c = 1, .h = 6, .w = 5, .f = 3, .k = 3, .stride = 1, .pad = 2 },
		{ .batch = 2, .c = 2, .h = 9, .w = 7, .f = 4, .k = 3, .stride = 2, .pad = 1 },
		{ .batch = 3, .c = 1, .h = 5, .w = 5, .f = 2, .k = 2, .stride = 1, .pad = 2 }, /* pad >= k: im2col */
		{ .batch = 9, .c = 32, .h = 14, .w = 14, .f = 64, .k = 3, .stride = 1, .pad = 1 }, /* the bench's 2nd */
		/* strides above 1 read the phases of the padded image (dx through col2im) */
		{ .batch = 9, .c = 16, .h = 28, .w = 28, .f = 32, .k = 3, .stride = 2, .pad = 1 }, /* the ResNet's down */
		{ .batch = 9, .c = 16, .h = 28, .w = 28, .f = 32, .k = 1, .stride = 2, .pad = 0 }, /* its skip */
		{ .batch = 2, .c = 3, .h = 8, .w = 10, .f = 5, .k = 3, .stride = 2, .pad = 0 },
		{ .batch = 2, .c = 2, .h = 11, .w = 10, .f = 3, .k = 4, .stride = 3, .pad = 2 },
		{ .batch = 2, .c = 2, .h = 9, .w = 8, .f = 3, .k = 2, .stride = 2, .pad = 1 },
		{ .batch = 2, .c = 1, .h = 7, .w = 7, .f = 2, .k = 2, .stride = 2, .pad = 3 }, /* pad >= k: im2col */
		/* rows split in pieces of 32 columns (an odd width), a 1 x 1 kernel's unread phases */
		{ .batch = 2, .c = 2, .h = 9, .w = 37, .f = 3, .k = 3, .stride = 2, .pad = 1 },
		{ .batch = 2, .c = 3, .h = 8, .w = 33, .f = 4, .k = 1, .stride = 2, .pad = 0 },
	};
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		check_shape(shapes[i], i % 3 == 0 ? DLK_ACT_RELU : i % 3 == 1 ? DLK_ACT_NONE : DLK_ACT_TANH, other);
	const struct dlk_conv_shape bf16_shapes[] = {
		{ .batch = 9, .c = 1, .h = 28, .w = 28, .f = 32, .k = 3, .stride = 1, .pad = 1 }, /* one channel */
		{ .batch = 9, .c = 32, .h = 14, .w = 14, .f = 64, .k = 3, .stride = 1, .pad = 1 },
		{ .batch = 3, .c = 3, .h = 5, .w = 5, .f = 17, .k = 3, .stride = 1, .pad = 1 }, /* odd c, f and q */
		{ .batch = 2, .c = 2, .h = 5, .w = 5, .f = 3, .k = 2, .stride = 1, .pad = 0 },
		{ .batch = 9, .c = 16, .h = 28, .w = 28, .f = 32, .k = 3, .stride = 2, .pad = 1 },
		{ .batch = 9, .c = 16, .h = 28, .w = 28, .f = 32, .k = 1, .stride = 2, .pad = 0 },
		{ .batch = 2, .c = 3, .h = 11, .w = 10, .f = 5, .k = 4, .stride = 3, .pad = 2 },
		/* stride 2 of odd channels, rows of more than 32 columns, padding 0 and 1, unread phases */
		{ .batch = 2, .c = 3, .h = 9, .w = 37, .f = 5, .k = 3, .stride = 2, .pad = 0 },
		{ .batch = 2, .c = 5, .h = 7, .w = 33, .f = 4, .k = 1, .stride = 2, .pad = 0 },
		{ .batch = 2, .c = 2, .h = 9, .w = 8, .f = 3, .k = 2, .stride = 2, .pad = 1 },
		{ .batch = 3, .c = 1, .h = 5, .w = 5, .f = 2, .k = 2, .stride = 1, .pad = 2 }, /* im2col: fp32 */
	};
	for (size_t i = 0; i < sizeof(bf16_shapes) / sizeof(bf16_shapes[0]); i++)
		check_bf16(bf16_shapes[i], i % 2 ? DLK_ACT_NONE : DLK_ACT_RELU);
	/* the 2x2 pool of stride 2 has a kernel per instruction set: each against the separate passes and
	 * the reference, with odd sizes (an uncovered last row and column), rows of more than one vector
	 * of outputs, and NaNs */
	const struct {
		struct dlk_conv_shape s;
		int act, threads;
	} pooled[] = {
		{ { .batch = 9, .c = 2, .h = 8, .w = 8, .f = 5, .k = 3, .stride = 1, .pad = 1 }, DLK_ACT_RELU, 2 },
		{ { .batch = 4, .c = 2, .h = 7, .w = 7, .f = 3, .k = 3, .stride = 1, .pad = 1 }, DLK_ACT_RELU, 2 },
		{ { .batch = 3, .c = 1, .h = 5, .w = 71, .f = 2, .k = 3, .stride = 1, .pad = 1 }, DLK_ACT_RELU, 1 },
		{ { .batch = 4, .c = 1, .h = 7, .w = 7, .f = 4, .k = 2, .stride = 1, .pad = 0 }, DLK_ACT_NONE, 3 },
		{ { .batch = 3, .c = 2, .h = 9, .w = 9, .f = 3, .k = 3, .stride = 2, .pad = 1 }, DLK_ACT_RELU, 2 }, /* im2col */
		{ { .batch = 3, .c = 2, .h = 9, .w = 9, .f = 3, .k = 3, .stride = 1, .pad = 1 }, DLK_ACT_TANH, 2 }, /* separate */
	};
	const char *pool_isas[] = { isa, strcmp(isa, "baseline") ? "baseline" : NULL };
	for (int pi = 0; pi < 2 && pool_isas[pi]; pi++) {
		dlk_cpu_conv_force_isa(pool_isas[pi]);
		for (int nan = 0; nan <= 1; nan++)
			for (size_t i = 0; i < sizeof(pooled) / sizeof(pooled[0]); i++)
				check_pooled(pooled[i].s, pooled[i].act, 2, 2, pooled[i].threads, nan);
		check_maxpool(3, 5, 8, 6, 2, 2);
		check_maxpool(2, 3, 9, 67, 2, 2);
		check_maxpool(2, 3, 7, 33, 2, 2);
	}
	dlk_cpu_conv_force_isa(isa);
	check_pooled((struct dlk_conv_shape){ .batch = 3, .c = 2, .h = 9, .w = 9, .f = 3, .k = 3, .stride = 2, .pad = 1 },
	             DLK_ACT_TANH, 3, 1, 1, 0); /* overlapping windows: the gradients add up */
	check_maxpool(2, 3, 7, 7, 3, 2);
	check_maxpool(2, 2, 6, 6, 2, 1);
	dlk_parallel_set_threads(1);
	return CHECK_DONE();
}
