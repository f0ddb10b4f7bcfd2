/* The CPU backend's convolution and max-pooling.
 *
 * The composition (im2col of the whole batch, one OpenBLAS GEMM, a reorder to NCHW with bias and
 * activation) wrote and read a column buffer of c*k*k x batch*oh*ow floats (29 MB for the
 * Fashion-MNIST CNN's second layer), zeroed it, and ran everything but the GEMM on one thread.
 * Here a convolution goes one image at a time: that image's im2col (a few hundred KB, it stays in
 * the core's L2) feeds a register-blocked kernel (cpu_conv_kernel.h) that writes the image's
 * output in NCHW, bias and activation applied on the way out. The backward pass recomputes the
 * image's im2col rather than keeping the batch's.
 *
 * The images are spread over the process' thread pool (lib/util/parallel.h), taken one by one
 * from a shared counter, so a thread that another process delays does not hold the others up. The weight gradient is summed per fixed group of CONV_CHUNK images and the
 * groups' sums are added in group order: the result depends on the batch alone, not on the
 * number of threads nor on which thread took which image. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/nn/cpu_bgemm.h"
#include "lib/nn/cpu_conv.h"
#include "lib/nn/kernels.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"

/* The element-wise loops are built for AVX-512, AVX2 and the baseline, as in cpu.c; they do the
 * same per-element operations in every clone, so the bits agree. */
#define CLONES DLK_CPU_CLONES

#define CONV_CHUNK 8  /* images per partial sum of the weight gradient */

/* ---- the kernels ---- */

/* the kernels' a * b + c is one fused multiply-add where the instruction set has it (C11's
 * default, kept for the element-wise loops so that they compute what cpu.c's do, would be a
 * multiply and an add) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif

#define KSUF base
#define KATTR
#define KVW 4
#define KNV 2
#include "lib/nn/cpu_conv_kernel.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define HAVE_X86 1
#define KSUF avx2
#define KATTR __attribute__((target("avx2,fma")))
#define KVW 8
#define KNV 3
#include "lib/nn/cpu_conv_kernel.h"
#define KSUF avx512
#define KATTR __attribute__((target("avx512f,fma")))
#define KVW 16
#define KNV 4
#include "lib/nn/cpu_conv_kernel.h"
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

typedef void gemm_fn(int M, int n, int J, const float *const *arow, size_t saj, const float *B,
                     const size_t *boff, float *C, size_t ldc, int acc);

/* ---- 2x2 max-pooling with stride 2, the CNNs' common case ----
 *
 * Forward: out = the maximum of each window by the rule of dlk_k_max_takes (a NaN wins and then
 * stays, the first maximum a tie), argmax its index into the image plane (plus base).
 * Backward (unpool2): the gradient of the pre-activation of one plane, every element written once
 * (no zeroing pass, no second pass for the activation): g goes to the window's argmax, multiplied
 * by the activation's derivative there (taken from the pooled output, which is y at the argmax),
 * and 0 elsewhere (rows and columns that no window covers included). Windows do not overlap, so
 * each element gets at most one g; ReLU's derivative selects g or 0, so this is bit for bit the
 * scatter-then-derivative of the separate passes. Only for ReLU and no activation: for tanh or
 * sigmoid a NaN activation off the argmax would turn the separate passes' 0 into NaN. The backward
 * has no vector version: one with AVX-512 made a CNN step 4% slower on an AMD EPYC, where the
 * scalar loop made it 2% faster than the separate passes; the pass waits on memory, not on
 * instructions. */
typedef void pool2_fn(const float *img, int w, int oh, int ow, int32_t base, float *out, int32_t *am);
/* dyT[oy * ldq + ox][f] = dy[f][oy * ow + ox] (transpose_dy) */
typedef void transpose_fn(const float *restrict dy, size_t F, size_t oh, size_t ow, size_t P, size_t ldq, size_t Fp,
                          float *restrict dyT);
static transpose_fn transpose_dy;
/* y[f][oy][ox] = act(out[f][oy * ldq + ox] + bias[f]) for one image (epilogue) */
typedef void epilogue_fn(const float *restrict out, size_t n, size_t ldq, const float *restrict bias, int act, size_t F,
                         int oh, int ow, float *restrict y);
static epilogue_fn epilogue;
/* dst[r * ldd + i] = src[r * lds + i] for rows r and i < n (copy_rows) */
typedef void copy_rows_fn(const float *restrict src, size_t lds, float *restrict dst, size_t ldd, size_t rows,
                          size_t n);
static copy_rows_fn copy_rows;
/* ev[t] = x[2 t] and od[t] = x[2 t + 1] for the n values of a row (either may be NULL: not
 * written): a row split into the two column phases of a stride of 2 (split2) */
typedef void split2_fn(const float *restrict x, size_t n, float *restrict ev, float *restrict od);
static split2_fn split2;

/* Whether a pooled layer's backward needs only the pooled output: then the forward pass does not
 * write the batch's activation y at all (each image's goes through a scratch buffer that stays in
 * the core's cache, on its way to the pool), and the backward takes ReLU's derivative at each
 * window's maximum from py, which holds that very value. */
static int pooled_y_free(const struct dlk_conv_shape *s, int act)
{
	return s->pool == 2 && s->pool_stride == 2 && (act == DLK_ACT_RELU || act == DLK_ACT_NONE);
}

static void pool2_base(const float *img, int w, int oh, int ow, int32_t base, float *out, int32_t *am)
{
	for (int oy = 0; oy < oh; oy++) {
		const float *r0 = img + (size_t)(2 * oy) * w, *r1 = r0 + w;
		int32_t i0 = base + 2 * oy * w;
		for (int ox = 0; ox < ow; ox++) {
			/* four loads and three branch-free selects per output */
			float v = r0[2 * ox], c1 = r0[2 * ox + 1], c2 = r1[2 * ox], c3 = r1[2 * ox + 1];
			int32_t bi = i0 + 2 * ox;
			int t1 = dlk_k_max_takes(c1, v);
			v = t1 ? c1 : v;
			bi = t1 ? i0 + 2 * ox + 1 : bi;
			int t2 = dlk_k_max_takes(c2, v);
			v = t2 ? c2 : v;
			bi = t2 ? i0 + w + 2 * ox : bi;
			int t3 = dlk_k_max_takes(c3, v);
			v = t3 ? c3 : v;
			bi = t3 ? i0 + w + 2 * ox + 1 : bi;
			out[oy * ow + ox] = v;
			am[oy * ow + ox] = bi;
		}
	}
}

static void unpool2(const float *g, const int32_t *am, int32_t base, const float *pooled, int relu, int h, int w,
                    int ph, int pw, float *dz)
{
	for (int py = 0; py < ph; py++) {
		float *r0 = dz + (size_t)(2 * py) * w, *r1 = r0 + w;
		for (int px = 0; px < pw; px++) {
			size_t o = (size_t)py * pw + px;
			int32_t a = am[o] - base;
			float v = relu ? dlk_k_relu_grad(pooled[o], g[o]) : g[o];
			r0[2 * px] = r0[2 * px + 1] = r1[2 * px] = r1[2 * px + 1] = 0;
			dz[a] = v;
		}
	}
	/* what no window covers: the last column of an odd width, the last row of an odd height */
	if (2 * pw < w)
		for (int r = 0; r < 2 * ph; r++)
			for (int c = 2 * pw; c < w; c++)
				dz[(size_t)r * w + c] = 0;
	if (2 * ph < h)
		memset(dz + (size_t)(2 * ph) * w, 0, sizeof(float) * (size_t)(h - 2 * ph) * w);
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

#define AVX512_ATTR __attribute__((target("avx512f")))

/* the even and the odd lanes of the 32 floats a:b */
#define EVEN_IDX _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define ODD_IDX _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)

AVX512_ATTR static inline __mmask16 takes16(__m512 x, __m512 m)
{
	/* dlk_k_max_takes: x > m (false when either is NaN) or x is NaN */
	return _mm512_cmp_ps_mask(x, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
}

/* masks for n (1..16) outputs: the 2n inputs of a row as two halves, and the n outputs */
static inline __mmask16 lo_mask(int n) { return n >= 8 ? 0xffff : (__mmask16)((1u << (2 * n)) - 1); }
static inline __mmask16 hi_mask(int n) { return n <= 8 ? 0 : (__mmask16)((1u << (2 * n - 16)) - 1); }
static inline __mmask16 n_mask(int n) { return (__mmask16)((1u << n) - 1); }

/* pool2_base with 16 outputs of a row at a time: each window's four elements are four vectors
 * (the even and odd lanes of two rows), compared in the same order */
AVX512_ATTR static void pool2_avx512(const float *img, int w, int oh, int ow, int32_t base, float *out, int32_t *am)
{
	const __m512i ev = EVEN_IDX, od = ODD_IDX; /* ev is also 2 i in lane i */
	for (int oy = 0; oy < oh; oy++) {
		const float *r0 = img + (size_t)(2 * oy) * w, *r1 = r0 + w;
		for (int ox = 0; ox < ow; ox += 16) {
			int n = ow - ox < 16 ? ow - ox : 16;
			__mmask16 ml = lo_mask(n), mh = hi_mask(n);
			__m512 a0 = _mm512_maskz_loadu_ps(ml, r0 + 2 * ox), a1 = _mm512_maskz_loadu_ps(mh, r0 + 2 * ox + 16);
			__m512 b0 = _mm512_maskz_loadu_ps(ml, r1 + 2 * ox), b1 = _mm512_maskz_loadu_ps(mh, r1 + 2 * ox + 16);
			__m512 c1 = _mm512_permutex2var_ps(a0, od, a1), c2 = _mm512_permutex2var_ps(b0, ev, b1);
			__m512 c3 = _mm512_permutex2var_ps(b0, od, b1), v = _mm512_permutex2var_ps(a0, ev, a1);
			/* the index of lane i's first element: base + 2 oy w + 2 (ox + i) */
			__m512i i0 = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * oy * w + 2 * ox), ev);
			__m512i bi = i0;
			__mmask16 t = takes16(c1, v);
			v = _mm512_mask_mov_ps(v, t, c1);
			bi = _mm512_mask_add_epi32(bi, t, i0, _mm512_set1_epi32(1));
			t = takes16(c2, v);
			v = _mm512_mask_mov_ps(v, t, c2);
			bi = _mm512_mask_add_epi32(bi, t, i0, _mm512_set1_epi32(w));
			t = takes16(c3, v);
			v = _mm512_mask_mov_ps(v, t, c3);
			bi = _mm512_mask_add_epi32(bi, t, i0, _mm512_set1_epi32(w + 1));
			__mmask16 mo = n_mask(n);
			_mm512_mask_storeu_ps(out + (size_t)oy * ow + ox, mo, v);
			_mm512_mask_storeu_epi32(am + (size_t)oy * ow + ox, mo, bi);
		}
	}
}

/* transpose_dy with 16 filters at a time: one gather of a column of dy, one store of a row of
 * dyT (the scalar loop stored one float at a time) */
AVX512_ATTR static void transpose_dy_avx512(const float *restrict dy, size_t F, size_t oh, size_t ow, size_t P,
                                            size_t ldq, size_t Fp, float *restrict dyT)
{
	const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
	                                       _mm512_set1_epi32((int)P));
	for (size_t oy = 0; oy < oh; oy++)
		for (size_t ox = 0; ox < ow; ox++) {
			const float *src = dy + oy * ow + ox;
			float *d = dyT + (oy * ldq + ox) * Fp;
			for (size_t f = 0; f < F; f += 16) {
				__mmask16 m = F - f >= 16 ? 0xffff : n_mask((int)(F - f));
				__m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, src + f * P, 4);
				_mm512_mask_storeu_ps(d + f, m, v);
			}
		}
}

/* epilogue for ReLU and no activation with masked vectors (the vectoriser left a scalar tail of
 * up to 15 of each row's 28 or 14 outputs); max(v, 0) is dlk_k_relu's v > 0 ? v : 0, NaN and -0
 * included (vmaxps returns its second operand unless the first is greater) */
AVX512_ATTR static void epilogue_avx512(const float *restrict out, size_t n, size_t ldq, const float *restrict bias,
                                        int act, size_t F, int oh, int ow, float *restrict y)
{
	if (act != DLK_ACT_RELU && act != DLK_ACT_NONE) {
		epilogue(out, n, ldq, bias, act, F, oh, ow, y);
		return;
	}
	const __m512 zero = _mm512_setzero_ps();
	for (size_t f = 0; f < F; f++) {
		__m512 bb = _mm512_set1_ps(bias[f]);
		for (int oy = 0; oy < oh; oy++) {
			const float *o = out + f * n + (size_t)oy * ldq;
			float *yr = y + (f * (size_t)oh + (size_t)oy) * (size_t)ow;
			for (int ox = 0; ox < ow; ox += 16) {
				__mmask16 m = ow - ox >= 16 ? 0xffff : n_mask(ow - ox);
				__m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, o + ox), bb);
				if (act == DLK_ACT_RELU)
					v = _mm512_max_ps(v, zero);
				_mm512_mask_storeu_ps(yr + ox, m, v);
			}
		}
	}
}

/* copy_rows with masked vectors: each row is ceil(n / 16) loads and stores, the masks computed
 * once (the vectorised loop spent its time entering and leaving each row of 7 to 28 floats) */
AVX512_ATTR static void copy_rows_avx512(const float *restrict src, size_t lds, float *restrict dst, size_t ldd,
                                         size_t rows, size_t n)
{
	if (n <= 32) {
		__mmask16 m0 = n >= 16 ? 0xffff : n_mask((int)n), m1 = n <= 16 ? 0 : n_mask((int)n - 16);
		for (size_t r = 0; r < rows; r++) {
			const float *s = src + r * lds;
			float *d = dst + r * ldd;
			_mm512_mask_storeu_ps(d, m0, _mm512_maskz_loadu_ps(m0, s));
			if (m1)
				_mm512_mask_storeu_ps(d + 16, m1, _mm512_maskz_loadu_ps(m1, s + 16));
		}
		return;
	}
	for (size_t r = 0; r < rows; r++) {
		const float *s = src + r * lds;
		float *d = dst + r * ldd;
		size_t i = 0;
		for (; i + 16 <= n; i += 16)
			_mm512_storeu_ps(d + i, _mm512_loadu_ps(s + i));
		if (i < n) {
			__mmask16 m = n_mask((int)(n - i));
			_mm512_mask_storeu_ps(d + i, m, _mm512_maskz_loadu_ps(m, s + i));
		}
	}
}

/* the r (1 to 32) values at x as two masked loads, their even and odd lanes permuted out; x NULL:
 * zeros. What split2 and its bf16 forms do with a row, 32 values at a time. */
AVX512_ATTR static inline __attribute__((always_inline)) void split32(const float *x, int r, __m512 *ev, __m512 *od)
{
	__mmask16 m0 = r >= 16 ? 0xffff : n_mask(r), m1 = r <= 16 ? 0 : n_mask(r - 16);
	__m512 a = x ? _mm512_maskz_loadu_ps(m0, x) : _mm512_setzero_ps();
	__m512 b = x ? _mm512_maskz_loadu_ps(m1, x + 16) : _mm512_setzero_ps();
	*ev = _mm512_permutex2var_ps(a, EVEN_IDX, b);
	*od = _mm512_permutex2var_ps(a, ODD_IDX, b);
}

/* split2 on a row's 32 values at a time (the vectorised loop did not vectorise a row of 28: it
 * was 6% of a ResNet's step) */
AVX512_ATTR static void split2_avx512(const float *restrict x, size_t n, float *restrict ev, float *restrict od)
{
	for (size_t i = 0; i < n; i += 32) {
		int r = n - i >= 32 ? 32 : (int)(n - i);
		__m512 e, o;
		split32(x + i, r, &e, &o);
		if (ev)
			_mm512_mask_storeu_ps(ev + i / 2, n_mask((r + 1) / 2), e);
		if (od)
			_mm512_mask_storeu_ps(od + i / 2, n_mask(r / 2), o);
	}
}

#endif

static copy_rows_fn *copy_rows_k = copy_rows;
static split2_fn *split2_k = split2;
static epilogue_fn *epilogue_k = epilogue;
static gemm_fn *gemm_k = kgemm_base;
static pool2_fn *pool2_k = pool2_base;
static transpose_fn *transpose_k = transpose_dy;
static const char *gemm_isa = "baseline";
static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;

static int have_isa(const char *isa)
{
	if (!strcmp(isa, "baseline"))
		return 1;
#ifdef HAVE_X86
	__builtin_cpu_init();
	if (!strcmp(isa, "avx512"))
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
	if (!strcmp(isa, "avx2"))
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
	return 0;
}

static void set_isa(const char *isa)
{
#ifdef HAVE_X86
	if (!strcmp(isa, "avx512")) {
		gemm_k = kgemm_avx512;
		pool2_k = pool2_avx512;
		transpose_k = transpose_dy_avx512;
		epilogue_k = epilogue_avx512;
		copy_rows_k = copy_rows_avx512;
		split2_k = split2_avx512;
		gemm_isa = "avx512";
		return;
	}
	pool2_k = pool2_base;
	transpose_k = transpose_dy;
	epilogue_k = epilogue;
	copy_rows_k = copy_rows;
	split2_k = split2;
	if (!strcmp(isa, "avx2")) {
		gemm_k = kgemm_avx2;
		gemm_isa = "avx2";
		return;
	}
#endif
	(void)isa;
	gemm_k = kgemm_base;
	pool2_k = pool2_base;
	transpose_k = transpose_dy;
	epilogue_k = epilogue;
	copy_rows_k = copy_rows;
	split2_k = split2;
	gemm_isa = "baseline";
}

static void pick_isa(void)
{
	set_isa(have_isa("avx512") ? "avx512" : have_isa("avx2") ? "avx2" : "baseline");
}

const char *dlk_cpu_conv_isa(void)
{
	pthread_once(&gemm_once, pick_isa);
	return gemm_isa;
}

int dlk_cpu_conv_force_isa(const char *isa)
{
	pthread_once(&gemm_once, pick_isa);
	if (!have_isa(isa))
		return -1;
	set_isa(isa);
	return 0;
}

/* ---- threads: the process' pool (lib/util/parallel.h) ---- */

/* One user of the scratch memory at a time (a second caller, from another thread, waits). */
static struct {
	pthread_mutex_t run;
	float *scratch;       /* guarded by run */
	size_t scratch_n;
} pool = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 };

struct region {
	void (*fn)(void *ctx, int t);
	void *ctx;
};

static void region_part(void *ctx, int part, int nparts)
{
	struct region *r = ctx;
	(void)nparts;
	r->fn(r->ctx, part);
}

/* Runs fn(ctx, t) once for each t = 0 .. nt-1 on the pool's threads (the caller holds pool.run):
 * t picks the scratch slice; the functions take their items (images, planes) from a shared
 * counter, so every item is done whoever does it and the results do not depend on the threads. */
static void parallel(void (*fn)(void *ctx, int t), void *ctx, int nt)
{
	struct region r = { fn, ctx };
	dlk_parallel_for(nt, region_part, &r);
}

static int pool_threads(int items)
{
	int n = dlk_parallel_threads();
	return n > items ? (items > 0 ? items : 1) : n;
}

/* the region's scratch memory, nt * per floats, kept for the next region (out of memory is
 * fatal, as for every allocation of the project's helpers) */
static float *pool_scratch(size_t per, int nt)
{
	size_t need = per * (size_t)nt;
	if (need > pool.scratch_n) {
		free(pool.scratch);
		pool.scratch = xmalloc(need * sizeof(float));
		pool.scratch_n = need;
	}
	return pool.scratch;
}

/* ---- max-pooling ---- */

/* planes [bc0, bc1) of x [*, h, w] -> y [*, oh, ow], argmax = index into x of each maximum */
static void pool_planes(const float *x, int h, int w, int size, int stride, int oh, int ow, size_t bc0, size_t bc1,
                        float *y, int32_t *argmax)
{
	for (size_t bc = bc0; bc < bc1; bc++) {
		const float *img = x + bc * h * w;
		int32_t base = (int32_t)(bc * h * w);
		float *out = y + bc * oh * ow;
		int32_t *am = argmax + bc * oh * ow;
		if (size == 2 && stride == 2) {
			pool2_k(img, w, oh, ow, base, out, am);
			continue;
		}
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				int y0 = oy * stride, x0 = ox * stride;
				int best = y0 * w + x0;
				float bv = img[best];
				for (int a = 0; a < size; a++)
					for (int b = 0; b < size; b++) {
						int idx = (y0 + a) * w + x0 + b;
						if (dlk_k_max_takes(img[idx], bv)) {
							bv = img[idx];
							best = idx;
						}
					}
				out[oy * ow + ox] = bv;
				am[oy * ow + ox] = base + best;
			}
	}
}

struct pool_job {
	const float *x;
	float *y;
	int32_t *argmax;
	int h, w, size, stride, oh, ow;
	int items;          /* batch * channels planes */
	atomic_int next;
};

#define POOL_PLANES 16  /* planes per item */

static void maxpool_part(void *ctx, int t)
{
	struct pool_job *j = ctx;
	(void)t;
	for (int it; (it = atomic_fetch_add(&j->next, POOL_PLANES)) < j->items;) {
		int end = it + POOL_PLANES < j->items ? it + POOL_PLANES : j->items;
		pool_planes(j->x, j->h, j->w, j->size, j->stride, j->oh, j->ow, (size_t)it, (size_t)end, j->y, j->argmax);
	}
}

void dlk_cpu_maxpool_forward(const float *x, int batch, int c, int h, int w, int size, int stride, int oh, int ow,
                             float *y, int32_t *argmax)
{
	struct pool_job j = { .x = x, .y = y, .argmax = argmax, .h = h, .w = w, .size = size, .stride = stride,
		              .oh = oh, .ow = ow, .items = batch * c };
	atomic_init(&j.next, 0);
	pthread_once(&gemm_once, pick_isa);
	int nt = pool_threads((j.items + POOL_PLANES - 1) / POOL_PLANES);
	pthread_mutex_lock(&pool.run);
	parallel(maxpool_part, &j, nt);
	pthread_mutex_unlock(&pool.run);
}

/* ---- one image ---- */

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

/* For output column ox, the input column is ox*stride + off; the valid ox form [lo, hi). */
static void valid_range(int out, int in, int stride, int off, int *lo, int *hi)
{
	int a = off < 0 ? (-off + stride - 1) / stride : 0;
	int b = in - off <= 0 ? 0 : (in - off + stride - 1) / stride;
	b = b > out ? out : b;
	*lo = a > b ? b : a;
	*hi = b;
}

/* x: one image [c, h, w] -> col [c*k*k][ld] (columns oh*ow .. ld zero) */
CLONES static void im2col1(const float *x, const struct dlk_conv_shape *s, float *col, size_t ld)
{
	int k = s->k, st = s->stride, pad = s->pad, oh = s->oh, ow = s->ow;
	size_t P = (size_t)oh * ow;
	for (int ch = 0; ch < s->c; ch++)
		for (int ki = 0; ki < k; ki++)
			for (int kj = 0; kj < k; kj++) {
				float *restrict row = col + ((size_t)(ch * k + ki) * k + kj) * ld;
				const float *restrict img = x + (size_t)ch * s->h * s->w;
				int xlo, xhi, ylo, yhi;
				valid_range(ow, s->w, st, kj - pad, &xlo, &xhi);
				valid_range(oh, s->h, st, ki - pad, &ylo, &yhi);
				for (int oy = 0; oy < oh; oy++) {
					float *restrict o = row + (size_t)oy * ow;
					if (oy < ylo || oy >= yhi) {
						memset(o, 0, sizeof(float) * (size_t)ow);
						continue;
					}
					const float *restrict src = img + (size_t)(oy * st + ki - pad) * s->w + (kj - pad);
					for (int ox = 0; ox < xlo; ox++)
						o[ox] = 0;
					if (st == 1)
						memcpy(o + xlo, src + xlo, sizeof(float) * (size_t)(xhi - xlo));
					else if (st == 2) /* a constant stride: a vector loop of permutes */
						for (int ox = xlo; ox < xhi; ox++)
							o[ox] = src[2 * ox];
					else
						for (int ox = xlo; ox < xhi; ox++)
							o[ox] = src[ox * st];
					for (int ox = xhi; ox < ow; ox++)
						o[ox] = 0;
				}
				for (size_t p = P; p < ld; p++)
					row[p] = 0;
			}
}

/* the adjoint: dx (one image, overwritten) = the sum of col's contributions */
CLONES static void col2im1(const float *col, size_t ld, const struct dlk_conv_shape *s, float *dx)
{
	int k = s->k, st = s->stride, pad = s->pad, oh = s->oh, ow = s->ow;
	memset(dx, 0, sizeof(float) * (size_t)s->c * s->h * s->w);
	for (int ch = 0; ch < s->c; ch++)
		for (int ki = 0; ki < k; ki++)
			for (int kj = 0; kj < k; kj++) {
				const float *restrict row = col + ((size_t)(ch * k + ki) * k + kj) * ld;
				float *restrict img = dx + (size_t)ch * s->h * s->w;
				int xlo, xhi, ylo, yhi;
				valid_range(ow, s->w, st, kj - pad, &xlo, &xhi);
				valid_range(oh, s->h, st, ki - pad, &ylo, &yhi);
				for (int oy = ylo; oy < yhi; oy++) {
					const float *restrict o = row + (size_t)oy * ow;
					float *restrict dst = img + (size_t)(oy * st + ki - pad) * s->w + (kj - pad);
					for (int ox = xlo; ox < xhi; ox++)
						dst[ox * st] += o[ox];
				}
			}
}

/* copies rows of n floats: inline vector loops (the rows are short, 7 to 28 floats in the
 * example CNNs, and a memcpy call each cost more than the copy; GCC would make the loop one) */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_MEMCPY_CALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_MEMCPY_CALLS
#endif
CLONES static void split2(const float *restrict x, size_t n, float *restrict ev, float *restrict od)
{
	if (ev)
		for (size_t t = 0; 2 * t < n; t++)
			ev[t] = x[2 * t];
	if (od)
		for (size_t t = 0; 2 * t + 1 < n; t++)
			od[t] = x[2 * t + 1];
}

CLONES NO_MEMCPY_CALLS static void copy_rows(const float *restrict src, size_t lds, float *restrict dst, size_t ldd, size_t rows,
                             size_t n)
{
	for (size_t r = 0; r < rows; r++)
		for (size_t i = 0; i < n; i++)
			dst[r * ldd + i] = src[r * lds + i];
}

/* copies one [c][h][w] image into the interior of a zero-bordered [c][h + 2p][w + 2p] one */
static void pad_image(const float *x, int c, int h, int w, int p, float *xp)
{
	size_t wp = (size_t)w + 2 * (size_t)p, hp = (size_t)h + 2 * (size_t)p;
	for (int ch = 0; ch < c; ch++)
		copy_rows_k(x + (size_t)ch * h * w, (size_t)w, xp + ((size_t)ch * hp + (size_t)p) * wp + (size_t)p, wp,
		            (size_t)h, (size_t)w);
}

/* Stride 2: where row iy of a channel goes in its padded image's phases (load_image's layout,
 * `plane` values a channel): its even and odd columns' rows, NULL for a phase no tap reads
 * (a 1 x 1 kernel reads one of the four); 0 when no tap reads the row at all */
static int phase_rows(const struct dlk_conv_shape *s, size_t hp, size_t wp, size_t iy, size_t *ev, size_t *od)
{
	size_t p = (size_t)s->pad, k = (size_t)s->k, r = iy + p, be = p % 2, bo = (p + 1) % 2;
	if (r % 2 >= k)
		return 0;
	size_t row = (r % 2 * 2 * hp + r / 2) * wp;
	/* column ix is padded column ix + p: phase (ix + p) % 2, at (ix + p) / 2 */
	*ev = be < k ? row + be * hp * wp + p / 2 : SIZE_MAX;
	*od = bo < k ? row + bo * hp * wp + (p + 1) / 2 : SIZE_MAX;
	return 1;
}

/* copies one [c][h][w] image into the phases of its zero-padded [c][h + 2p][w + 2p] version: phase
 * (a, b) of channel ch is [hp][wp] at ((ch S + a) S + b) hp wp; a stride of 1 has one phase, the
 * padded image itself (its borders, and what no phase position holds, stay as they were: zero) */
CLONES static void load_image(const float *x, const struct dlk_conv_shape *s, size_t hp, size_t wp, float *xp)
{
	size_t S = (size_t)s->stride, p = (size_t)s->pad, w = (size_t)s->w;
	if (S == 1) {
		pad_image(x, s->c, s->h, s->w, s->pad, xp);
		return;
	}
	if (S == 2) { /* each row split into its even and odd columns at once (split2) */
		size_t plane = 4 * hp * wp, ev, od;
		for (size_t ch = 0; ch < (size_t)s->c; ch++)
			for (size_t iy = 0; iy < (size_t)s->h; iy++)
				if (phase_rows(s, hp, wp, iy, &ev, &od))
					split2_k(x + (ch * (size_t)s->h + iy) * w, w, ev == SIZE_MAX ? NULL : xp + ch * plane + ev,
					         od == SIZE_MAX ? NULL : xp + ch * plane + od);
		return;
	}
	for (size_t ch = 0; ch < (size_t)s->c; ch++)
		for (size_t iy = 0; iy < (size_t)s->h; iy++) {
			size_t r = iy + p;
			float *row = xp + ((ch * S + r % S) * S * hp + r / S) * wp;
			const float *restrict src = x + (ch * (size_t)s->h + iy) * w;
			for (size_t b = 0; b < S; b++) {
				size_t ix0 = (b + S - p % S) % S; /* the first column with (ix + p) % S == b */
				float *restrict d = row + b * hp * wp + (ix0 + p) / S;
				for (size_t ix = ix0, t = 0; ix < w; ix += S, t++)
					d[t] = src[ix];
			}
		}
}

/* A layer is either "direct" (padding below the kernel size: every im2col row is a shifted window
 * of the zero-padded image, so the kernel reads the padded image through a table of offsets and
 * computes outputs over q = oy * wp + ox, where the columns ox >= ow are junk that is dropped) or
 * goes through an im2col copy of each image. With a stride S > 1 the padded image is first split
 * into its S x S phases (phase (a, b) holds the padded pixels (S i + a, S j + b) at (i, j), hp x wp
 * each), and the window of kernel tap (ki, kj) is the phase (ki % S, kj % S) shifted by
 * (ki / S, kj / S): the same sums, in the same order of taps, as over an im2col copy, without one.
 * dx is the convolution of the padded dy with the flipped kernels at stride 1 (direct_dx), and the
 * im2col adjoint (dcol = w^T dy, then col2im) otherwise. */

struct conv_job {
	const struct dlk_conv_shape *s;
	const float *x, *w, *bias, *dy, *yact;  /* yact: the activation's output (pooled backward) */
	const float *pooled;       /* the pooled output (pooled backward) */
	int yfree;                 /* pooled_y_free(): y is not written, an image's goes through yimg */
	const int32_t *argmax;
	float *y, *py, *dx, *partials;
	int32_t *pargmax;
	int act, direct, direct_dx, items;
	size_t K, F, Fp, P, Pp;    /* c*k*k, filters, f padded, oh*ow, P padded (im2col) */
	size_t hp, wp, Q, Qp, xpad_n;       /* direct: padded input (a phase of it), outputs over q */
	size_t pq, hq, wq, Qx, Qxp, dypad_n; /* direct dx: dy padded by k-1-pad, dx over q */
	const float **wrow;        /* F: the rows of w */
	const float **wcol;        /* K: w + k, read with stride K (dcol of the im2col path) */
	const float **w2row;       /* C: the rows of the flipped kernels (direct dx) */
	size_t *boff_x;            /* K: window offsets into the padded image, or j * Pp */
	size_t *boff_dy;           /* F*k*k: window offsets into the padded dy */
	size_t *lin_fp;            /* j * Fp, j < max(P, Q) */
	size_t *lin_pp;            /* j * Pp, j < F */
	float *w2;
	size_t per;                /* scratch floats per thread */
	atomic_int next;
	float *scratch;
	void *tables;
	/* bf16 (bf16_init): the products on dlk_bgemm_rows */
	int bf16;
	size_t plane;              /* floats of one channel of the padded image, all its phases */
	size_t kp_x, x2_n;         /* forward: pairs of the sum (channel pairs x taps), words of the paired image */
	size_t kp_q;               /* weight gradient: pairs of outputs */
	size_t kp_dy, dy2_n;       /* dx: pairs of the sum (filter pairs x taps), words of the paired dy */
	const uint16_t **w2x_row;  /* F: the forward's paired weights */
	const uint16_t **w2d_row;  /* C: dx's paired flipped kernels */
	size_t *boff2_x, *boff2_dy, *lin2_fp; /* offsets in bf16 halves */
	void *tables2;
};

static void job_init(struct conv_job *j, const struct dlk_conv_shape *s, const float *w, int backward)
{
	size_t k = (size_t)s->k, C = (size_t)s->c, S = (size_t)s->stride;
	j->s = s;
	j->w = w;
	j->K = C * k * k;
	j->F = (size_t)s->f;
	j->Fp = pad16(j->F);
	j->P = (size_t)s->oh * s->ow;
	j->Pp = pad16(j->P);
	j->direct = s->pad < s->k;
	j->direct_dx = j->direct && S == 1;
	j->hp = ((size_t)s->h + 2 * (size_t)s->pad + S - 1) / S;
	j->wp = ((size_t)s->w + 2 * (size_t)s->pad + S - 1) / S;
	j->Q = (size_t)s->oh * j->wp;
	j->Qp = pad16(j->Q);
	/* the last window starts below C S S hp wp and the kernel reads Qp floats of it */
	j->xpad_n = S == 1 ? (C - 1) * j->hp * j->wp + (k - 1) * j->wp + k + j->Qp + 16
	                   : C * S * S * j->hp * j->wp + j->Qp + 16;
	j->pq = k - 1 - (size_t)(s->pad < s->k ? s->pad : 0);
	j->hq = (size_t)s->oh + 2 * j->pq;
	j->wq = (size_t)s->ow + 2 * j->pq;
	j->Qx = (size_t)s->h * j->wq;
	j->Qxp = pad16(j->Qx);
	j->dypad_n = (j->F - 1) * j->hq * j->wq + (k - 1) * j->wq + k + j->Qxp + 16;
	atomic_init(&j->next, 0);

	size_t nlin = j->P > j->Q ? j->P : j->Q;
	size_t bytes = sizeof(float *) * (j->F + j->K + C) + sizeof(size_t) * (j->K + j->F * k * k + nlin + j->F) +
	               (backward && j->direct_dx ? sizeof(float) * C * j->F * k * k : 0);
	char *m = xmalloc(bytes);
	j->tables = m;
	j->wrow = (const float **)m;
	j->wcol = j->wrow + j->F;
	j->w2row = j->wcol + j->K;
	j->boff_x = (size_t *)(j->w2row + C);
	j->boff_dy = j->boff_x + j->K;
	j->lin_fp = j->boff_dy + j->F * k * k;
	j->lin_pp = j->lin_fp + nlin;
	j->w2 = (float *)(j->lin_pp + j->F);
	for (size_t f = 0; f < j->F; f++) {
		j->wrow[f] = w + f * j->K;
		j->lin_pp[f] = f * j->Pp;
	}
	for (size_t i = 0; i < j->K; i++) {
		size_t ch = i / (k * k), ki = i / k % k, kj = i % k;
		j->wcol[i] = w + i;
		j->boff_x[i] = j->direct ? ((ch * S * S + ki % S * S + kj % S) * j->hp + ki / S) * j->wp + kj / S : i * j->Pp;
	}
	for (size_t i = 0; i < nlin; i++)
		j->lin_fp[i] = i * j->Fp;
	for (size_t i = 0; i < j->F * k * k; i++) {
		size_t f = i / (k * k), a = i / k % k, b = i % k;
		j->boff_dy[i] = (f * j->hq + a) * j->wq + b;
	}
	if (backward && j->direct_dx) {
		/* w2[c][f][a][b] = w[f][c][k-1-a][k-1-b] */
		for (size_t ch = 0; ch < C; ch++) {
			j->w2row[ch] = j->w2 + ch * j->F * k * k;
			for (size_t f = 0; f < j->F; f++)
				for (size_t a = 0; a < k; a++)
					for (size_t b = 0; b < k; b++)
						j->w2[((ch * j->F + f) * k + a) * k + b] =
							w[((f * C + ch) * k + (k - 1 - a)) * k + (k - 1 - b)];
		}
	}
}

/* training.precision: bf16 (dlk_cpu_conv_set_precision) */
static int conv_bf16;

void dlk_cpu_conv_set_precision(int bf16)
{
	conv_bf16 = bf16 != 0;
}

int dlk_cpu_conv_bf16(void)
{
	return conv_bf16 && dlk_bgemm_native();
}

/* bf16 products (training.precision: bf16 on a CPU with AVX512_BF16). A direct layer's three
 * products run on dlk_bgemm_rows, the operands rounded once an image and paired as VDPBF16PS
 * reads them, so that every window is still read in place:
 *   forward: the padded image's channels in pairs (at each position channel 2i's value in the low
 *     half, 2i + 1's in the high), a tap's window of pairs, times the weights paired the same way
 *     (once a call); the sum runs over channel pairs and taps;
 *   weight gradient: pairs of outputs q: the rounded padded image (two adjacent values of a window
 *     are one pair) times dy transposed, its rows paired (the bias' gradient stays fp32, from dy);
 *   dx: of stride 1, the padded dy's filters in pairs times the flipped kernels paired the same
 *     way; strided, im2col's adjoint: dy's filters in pairs times the kernels' columns paired so.
 * The sums are fp32. Layers through im2col (padding at least the kernel size) stay fp32; so does
 * everything on a CPU without AVX512_BF16 (an emulation would be slower than fp32: the run says
 * so). */
/* w [rows][n][kk] rounded and paired along n: dst row r, pair i * kk + t = (w[r][2i][t], w[r][2i+1][t])
 * (a last odd one with 0), its address in rowp[r] */
static void pair_kernels(const float *w, size_t rows, size_t n, size_t kk, uint32_t *dst, const uint16_t **rowp)
{
	size_t kp = (n + 1) / 2 * kk;
	for (size_t r = 0; r < rows; r++) {
		uint32_t *row = dst + r * kp;
		rowp[r] = (const uint16_t *)row;
		for (size_t p = 0; p < kp; p++) {
			size_t i0 = 2 * (p / kk), t = p % kk;
			row[p] = dlk_bf16_round(w[(r * n + i0) * kk + t]) |
			         (i0 + 1 < n ? (uint32_t)dlk_bf16_round(w[(r * n + i0 + 1) * kk + t]) << 16 : 0);
		}
	}
}

static void bf16_init(struct conv_job *j, int backward)
{
	const struct dlk_conv_shape *s = j->s;
	size_t k = (size_t)s->k, kk = k * k, C = (size_t)s->c, S = (size_t)s->stride, F = j->F;
	j->bf16 = j->direct && dlk_cpu_conv_bf16();
	if (!j->bf16)
		return;
	size_t cp = (C + 1) / 2, fp = (F + 1) / 2, plane_d = j->hq * j->wq, K = j->K;
	j->plane = S * S * j->hp * j->wp;
	j->kp_x = cp * kk;
	j->x2_n = cp * j->plane + j->Qp + 16;
	j->kp_q = (j->Q + 1) / 2;
	/* dx: of stride 1, C rows over filter pairs and taps; strided, dcol's K rows over filter pairs */
	size_t dx_rows = !backward ? 0 : j->direct_dx ? C : K;
	j->kp_dy = j->direct_dx ? fp * kk : fp;
	j->dy2_n = j->direct_dx ? fp * plane_d + j->Qxp + 16 : fp * j->Pp;
	size_t words = F * j->kp_x + dx_rows * j->kp_dy;
	char *m = xmalloc(sizeof(uint16_t *) * (F + dx_rows) + sizeof(size_t) * (j->kp_x + j->kp_dy + j->kp_q) +
	                  sizeof(uint32_t) * words);
	j->tables2 = m;
	j->w2x_row = (const uint16_t **)m;
	j->w2d_row = j->w2x_row + F;
	j->boff2_x = (size_t *)(j->w2d_row + dx_rows);
	j->boff2_dy = j->boff2_x + j->kp_x;
	j->lin2_fp = j->boff2_dy + j->kp_dy;
	uint32_t *wx = (uint32_t *)(j->lin2_fp + j->kp_q), *wd = wx + F * j->kp_x;
	for (size_t p = 0; p < j->kp_x; p++) {
		size_t chp = p / kk, ki = p % kk / k, kj = p % k;
		j->boff2_x[p] = 2 * (chp * j->plane + ((ki % S * S + kj % S) * j->hp + ki / S) * j->wp + kj / S);
	}
	pair_kernels(j->w, F, C, kk, wx, j->w2x_row);
	for (size_t q = 0; q < j->kp_q; q++)
		j->lin2_fp[q] = 2 * q * j->Fp;
	if (!dx_rows)
		return;
	if (j->direct_dx) {
		for (size_t p = 0; p < j->kp_dy; p++) {
			size_t fq = p / kk, a = p % kk / k, b = p % k;
			j->boff2_dy[p] = 2 * ((fq * j->hq + a) * j->wq + b);
		}
		pair_kernels(j->w2, C, F, kk, wd, j->w2d_row);
		return;
	}
	/* dcol[k][p] = sum over f of w[f][k] dy[f][p]: row k pairs w[2i][k], w[2i + 1][k]; pair i of
	 * dy is the row of dy's filters 2i and 2i + 1 */
	for (size_t i = 0; i < fp; i++)
		j->boff2_dy[i] = 2 * i * j->Pp;
	for (size_t kr = 0; kr < K; kr++) {
		uint32_t *row = wd + kr * fp;
		j->w2d_row[kr] = (const uint16_t *)row;
		for (size_t i = 0; i < fp; i++)
			row[i] = dlk_bf16_round(j->w[2 * i * K + kr]) |
			         (2 * i + 1 < F ? (uint32_t)dlk_bf16_round(j->w[(2 * i + 1) * K + kr]) << 16 : 0);
	}
}

/* Rounding and pairing of the rows a convolution reads: short (7 to 28 floats in the example
 * CNNs), so with masked vectors on the CPUs that run the bf16 products: AVX512_BF16's own
 * conversion, which rounds to nearest-even as dlk_bf16_round does (subnormals aside, which
 * VDPBF16PS takes for zero anyway). Elsewhere (never called there) the library's loops. */
#ifdef HAVE_X86
#define BF16_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

BF16_ATTR static void round_row16(const float *x, size_t n, uint16_t *y)
{
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? 0xffff : n_mask((int)(n - i));
		__m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
		_mm256_mask_storeu_epi16(y + i, m, (__m256i)v);
	}
}

BF16_ATTR static void pair_row16(const float *x0, const float *x1, size_t n, uint32_t *y)
{
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? 0xffff : n_mask((int)(n - i));
		__m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x0 + i)));
		__m512i hi = x1 ? _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x1 + i)))
		                : _mm512_setzero_si512();
		_mm512_mask_storeu_epi32(y + i, m, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
	}
}
/* a row split into its even and odd columns (split2), rounded: round_row16 of each */
BF16_ATTR static void round2_row16(const float *x, size_t n, uint16_t *ev, uint16_t *od)
{
	for (size_t i = 0; i < n; i += 32) {
		int r = n - i >= 32 ? 32 : (int)(n - i);
		__m512 e, o;
		split32(x + i, r, &e, &o);
		if (ev)
			_mm256_mask_storeu_epi16(ev + i / 2, n_mask((r + 1) / 2), (__m256i)_mm512_cvtneps_pbh(e));
		if (od)
			_mm256_mask_storeu_epi16(od + i / 2, n_mask(r / 2), (__m256i)_mm512_cvtneps_pbh(o));
	}
}

/* two rows split into their even and odd columns (split2), rounded and paired: pair_row16 of
 * each (x1 NULL: zeros in the high halves) */
BF16_ATTR static void pair2_row16(const float *x0, const float *x1, size_t n, uint32_t *ev, uint32_t *od)
{
	for (size_t i = 0; i < n; i += 32) {
		int r = n - i >= 32 ? 32 : (int)(n - i);
		__m512 v[2][2]; /* [row][even, odd] */
		split32(x0 + i, r, &v[0][0], &v[0][1]);
		split32(x1 ? x1 + i : NULL, r, &v[1][0], &v[1][1]);
		for (int half = 0; half < 2; half++) {
			uint32_t *d = half ? od : ev;
			if (!d)
				continue;
			__m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v[0][half]));
			__m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v[1][half]));
			_mm512_mask_storeu_epi32(d + i / 2, n_mask(half ? r / 2 : (r + 1) / 2),
			                         _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
		}
	}
}
#else
static void round_row16(const float *x, size_t n, uint16_t *y)
{
	dlk_bf16_round_rows(x, n, y);
}

static void round2_row16(const float *x, size_t n, uint16_t *ev, uint16_t *od)
{
	for (size_t t = 0; ev && 2 * t < n; t++)
		ev[t] = dlk_bf16_round(x[2 * t]);
	for (size_t t = 0; od && 2 * t + 1 < n; t++)
		od[t] = dlk_bf16_round(x[2 * t + 1]);
}

static void pair2_row16(const float *x0, const float *x1, size_t n, uint32_t *ev, uint32_t *od)
{
	for (size_t t = 0; t < n; t++) {
		uint32_t *d = t % 2 ? od : ev;
		if (d)
			d[t / 2] = dlk_bf16_round(x0[t]) | (x1 ? (uint32_t)dlk_bf16_round(x1[t]) << 16 : 0);
	}
}

static void pair_row16(const float *x0, const float *x1, size_t n, uint32_t *y)
{
	dlk_bf16_pair_rows(x0, x1, n, y);
}
#endif

/* x [c][h][w] rounded into the interior of a zero-bordered [c][plane] one, its rows wp wide,
 * offset by p rows and columns (stride 1: the padded image of load_image, rounded); dst's borders
 * are left as they are (zero) */
static void pad_round(const float *x, size_t c, size_t h, size_t w, size_t p, size_t wp, size_t plane, uint16_t *dst)
{
	for (size_t ch = 0; ch < c; ch++)
		for (size_t y = 0; y < h; y++)
			round_row16(x + (ch * h + y) * w, w, dst + ch * plane + (y + p) * wp + p);
}

/* the same with the channels in pairs: plane i of dst holds channels 2i and 2i + 1 (a last odd one
 * with zeros), a word a position */
static void pad_pairs(const float *x, size_t c, size_t h, size_t w, size_t p, size_t wp, size_t plane, uint32_t *dst)
{
	for (size_t i = 0; 2 * i < c; i++)
		for (size_t y = 0; y < h; y++)
			pair_row16(x + (2 * i * h + y) * w, 2 * i + 1 < c ? x + ((2 * i + 1) * h + y) * w : NULL, w,
			           dst + i * plane + (y + p) * wp + p);
}

/* load_image of stride 2 rounded (round_row16 of its rows); what it does not write stays as it
 * was (zero) */
static void pad_round2(const float *x, const struct dlk_conv_shape *s, size_t hp, size_t wp, uint16_t *dst)
{
	size_t h = (size_t)s->h, w = (size_t)s->w, plane = 4 * hp * wp, ev, od;
	for (size_t ch = 0; ch < (size_t)s->c; ch++)
		for (size_t iy = 0; iy < h; iy++)
			if (phase_rows(s, hp, wp, iy, &ev, &od))
				round2_row16(x + (ch * h + iy) * w, w, ev == SIZE_MAX ? NULL : dst + ch * plane + ev,
				             od == SIZE_MAX ? NULL : dst + ch * plane + od);
}

/* the same with the channels in pairs (pad_pairs' words), pair i at i * plane */
static void pad_pairs2(const float *x, const struct dlk_conv_shape *s, size_t hp, size_t wp, uint32_t *dst)
{
	size_t c = (size_t)s->c, h = (size_t)s->h, w = (size_t)s->w, plane = 4 * hp * wp, ev, od;
	for (size_t i = 0; 2 * i < c; i++)
		for (size_t iy = 0; iy < h; iy++)
			if (phase_rows(s, hp, wp, iy, &ev, &od))
				pair2_row16(x + (2 * i * h + iy) * w, 2 * i + 1 < c ? x + ((2 * i + 1) * h + iy) * w : NULL, w,
				            ev == SIZE_MAX ? NULL : dst + i * plane + ev,
				            od == SIZE_MAX ? NULL : dst + i * plane + od);
}

/* dyT2[i][f] = word i of dyq's row f (rows of kp words: pairs of outputs), for f < F */
DLK_CPU_CLONES static void transpose_words(const uint32_t *restrict dyq, size_t F, size_t kp, size_t Fp,
                                           uint32_t *restrict dyT2)
{
	for (size_t i = 0; i < kp; i++)
		for (size_t f = 0; f < F; f++)
			dyT2[i * Fp + f] = dyq[f * kp + i];
}

/* out[f] = (acc ? out[f] : 0) + the sum of dy[f][0 .. P), for f < F, in fp32: 16 partial sums
 * (element p in lane p % 16), then the lanes in a fixed order */
DLK_CPU_CLONES static void bias_sums(const float *restrict dy, size_t F, size_t P, float *restrict out, int acc)
{
	for (size_t f = 0; f < F; f++) {
		const float *restrict r = dy + f * P;
		float lane[16] = { 0 };
		size_t p = 0;
		for (; p + 16 <= P; p += 16)
			for (int i = 0; i < 16; i++)
				lane[i] += r[p + i];
		for (int i = 0; p < P; p++, i++)
			lane[i] += r[p];
		float x = acc ? out[f] : 0.0f;
		for (int i = 0; i < 16; i++)
			x += lane[i];
		out[f] = x;
	}
}

/* rows [0, pairs) of dst: pair i of planes 2i and 2i + 1 of src (each `plane` floats; a last odd
 * plane paired with zeros) */
static void pair_planes(const float *src, size_t planes, size_t plane, uint32_t *dst)
{
	for (size_t i = 0; 2 * i < planes; i++)
		pair_row16(src + 2 * i * plane, 2 * i + 1 < planes ? src + (2 * i + 1) * plane : NULL, plane,
		           dst + i * plane);
}

/* dyT[oy * ldq + ox][f] = dy[f][oy * ow + ox]: rows written whole (strided stores would each
 * touch another cache line) */
CLONES static void transpose_dy(const float *restrict dy, size_t F, size_t oh, size_t ow, size_t P, size_t ldq,
                                size_t Fp, float *restrict dyT)
{
	for (size_t oy = 0; oy < oh; oy++)
		for (size_t ox = 0; ox < ow; ox++) {
			const float *restrict src = dy + oy * ow + ox;
			float *restrict d = dyT + (oy * ldq + ox) * Fp;
			for (size_t f = 0; f < F; f++)
				d[f] = src[f * P];
		}
}

/* y[f][oy][ox] = act(out[f][oy * ldq + ox] + bias[f]) for one image */
CLONES static void epilogue(const float *restrict out, size_t n, size_t ldq, const float *restrict bias, int act,
                            size_t F, int oh, int ow, float *restrict y)
{
	for (size_t f = 0; f < F; f++) {
		float bb = bias[f];
		for (int oy = 0; oy < oh; oy++) {
			const float *restrict o = out + f * n + (size_t)oy * ldq;
			float *restrict yr = y + (f * (size_t)oh + (size_t)oy) * (size_t)ow;
			if (act == DLK_ACT_RELU) {
				for (int ox = 0; ox < ow; ox++)
					yr[ox] = dlk_k_relu(o[ox] + bb);
			} else if (act == DLK_ACT_NONE) { /* a conv before a batch norm: a vector loop */
				for (int ox = 0; ox < ow; ox++)
					yr[ox] = o[ox] + bb;
			} else {
				for (int ox = 0; ox < ow; ox++)
					yr[ox] = dlk_k_act(act, o[ox] + bb);
			}
		}
	}
}

/* ---- forward ---- */

static void forward_part(void *ctx, int t)
{
	struct conv_job *j = ctx;
	const struct dlk_conv_shape *s = j->s;
	size_t in_size = (size_t)s->c * s->h * s->w, F = j->F, n = j->direct ? j->Qp : j->Pp;
	size_t ldq = j->direct ? j->wp : (size_t)s->ow;
	float *in = j->scratch + (size_t)t * j->per;
	float *out = in + (j->direct ? j->xpad_n : j->K * j->Pp);
	float *yimg = out + F * n; /* yfree: this image's activation */
	uint32_t *in2 = (uint32_t *)(yimg + (j->yfree ? F * j->P : 0)); /* bf16: the paired image */
	if (j->direct)
		memset(in, 0, sizeof(float) * j->xpad_n);
	if (j->bf16)
		memset(in2, 0, sizeof(uint32_t) * j->x2_n);
	for (int b; (b = atomic_fetch_add(&j->next, 1)) < j->items;) {
		const float *x = j->x + (size_t)b * in_size;
		if (j->bf16 && s->stride == 1)
			pad_pairs(x, (size_t)s->c, (size_t)s->h, (size_t)s->w, (size_t)s->pad, j->wp, j->plane, in2);
		else if (j->bf16 && s->stride == 2)
			pad_pairs2(x, s, j->hp, j->wp, in2);
		else if (j->direct)
			load_image(x, s, j->hp, j->wp, in);
		else
			im2col1(x, s, in, j->Pp);
		if (j->bf16) {
			if (s->stride > 2)
				pair_planes(in, (size_t)s->c, j->plane, in2);
			dlk_bgemm_rows((int)F, (int)n, (int)j->kp_x, j->w2x_row, (const uint16_t *)in2, j->boff2_x, out, n,
			               0);
		} else {
			gemm_k((int)F, (int)n, (int)j->K, j->wrow, 1, in, j->boff_x, out, n, 0);
		}
		if (j->yfree) {
			/* the argmax indexes are into the batch's y, as if it had been written */
			size_t pp = (size_t)s->ph * s->pw;
			epilogue_k(out, n, ldq, j->bias, j->act, F, s->oh, s->ow, yimg);
			for (size_t f = 0; f < F; f++) {
				size_t plane = (size_t)b * F + f;
				pool2_k(yimg + f * j->P, s->ow, s->ph, s->pw, (int32_t)(plane * j->P), j->py + plane * pp,
				        j->pargmax + plane * pp);
			}
			continue;
		}
		epilogue_k(out, n, ldq, j->bias, j->act, F, s->oh, s->ow, j->y + (size_t)b * F * j->P);
		/* the image's output is still in this core's cache */
		if (s->pool)
			pool_planes(j->y, s->oh, s->ow, s->pool, s->pool_stride, s->ph, s->pw, (size_t)b * F,
			            (size_t)(b + 1) * F, j->py, j->pargmax);
	}
}

void dlk_cpu_conv_forward(const float *x, const float *w, const float *bias, const struct dlk_conv_shape *s,
                          int act, float *y, float *py, int32_t *pargmax)
{
	struct conv_job j = { .x = x, .bias = bias, .y = y, .py = py, .pargmax = pargmax, .act = act,
		              .items = s->batch };
	pthread_once(&gemm_once, pick_isa);
	job_init(&j, s, w, 0);
	bf16_init(&j, 0);
	j.yfree = py && pooled_y_free(s, act);
	j.per = pad16((j.direct ? j.xpad_n + j.F * j.Qp : (j.K + j.F) * j.Pp) + (j.yfree ? j.F * j.P : 0) +
	              (j.bf16 ? j.x2_n : 0));
	int nt = pool_threads(s->batch);
	pthread_mutex_lock(&pool.run);
	j.scratch = pool_scratch(j.per, nt);
	parallel(forward_part, &j, nt);
	pthread_mutex_unlock(&pool.run);
	free(j.tables);
	free(j.tables2);
}

/* ---- backward ---- */

/* scratch floats of dx's products: the padded dy and dx over q, or dy and dcol */
static size_t dx_floats(const struct conv_job *j, int dx)
{
	return !dx ? 0 : j->direct_dx ? j->dypad_n + (size_t)j->s->c * j->Qxp : (j->F + j->K) * j->Pp;
}

static size_t backward_per(const struct conv_job *j, int dx)
{
	size_t dz = j->s->pool ? j->F * j->P : 0;
	size_t dxn = dx_floats(j, dx);
	if (j->direct) {
		size_t bf = !j->bf16 ? 0
		                     : (j->xpad_n + 1) / 2 + j->kp_q * (j->Fp + j->F) + (dx ? j->dy2_n : 0);
		return pad16(dz + j->xpad_n + j->Qp + j->Q * j->Fp + dxn + bf);
	}
	return pad16(dz + (j->K + 1) * j->Pp + j->P * j->Fp + dxn);
}

/* one image's gradient of the pre-activation, from that of the pooled output: the scatter of
 * maxpool_backward, then the activation's derivative, as the separate passes compute it */
CLONES static void unpool1(const struct conv_job *j, int b, float *restrict dz)
{
	const struct dlk_conv_shape *s = j->s;
	size_t n = j->F * j->P, no = j->F * (size_t)s->ph * s->pw, base = (size_t)b * n;
	const float *restrict g = j->dy + (size_t)b * no;
	const int32_t *restrict am = j->argmax + (size_t)b * no;
	if (pooled_y_free(s, j->act)) {
		size_t P = j->P, pp = (size_t)s->ph * s->pw;
		const float *pooled = j->pooled + (size_t)b * no;
		for (size_t f = 0; f < j->F; f++)
			unpool2(g + f * pp, am + f * pp, (int32_t)(base + f * P), pooled + f * pp, j->act == DLK_ACT_RELU,
			        s->oh, s->ow, s->ph, s->pw, dz + f * P);
		return;
	}
	const float *restrict y = j->yact + base;
	memset(dz, 0, sizeof(float) * n);
	for (size_t o = 0; o < no; o++)
		dz[(size_t)am[o] - base] += g[o];
	if (j->act == DLK_ACT_RELU) {
		for (size_t i = 0; i < n; i++)
			dz[i] = dlk_k_relu_grad(y[i], dz[i]);
	} else if (j->act != DLK_ACT_NONE) {
		for (size_t i = 0; i < n; i++)
			dz[i] = dlk_k_act_grad(j->act, y[i], dz[i]);
	}
}

static void backward_part(void *ctx, int t)
{
	struct conv_job *j = ctx;
	const struct dlk_conv_shape *s = j->s;
	size_t K = j->K, P = j->P, Pp = j->Pp, Fp = j->Fp, F = j->F;
	size_t in_size = (size_t)s->c * s->h * s->w, ow = (size_t)s->ow;
	float *mem = j->scratch + (size_t)t * j->per, *dz = NULL;
	if (s->pool) {
		dz = mem;
		mem += F * P;
	}
	/* the A rows of the weight gradient: K image rows, then a row of ones for the bias */
	const float **arow = xmalloc(sizeof(*arow) * (K + 1));
	const uint16_t **arow2 = NULL; /* bf16: the rounded image's rows */
	float *in, *ones, *dyT, *dyp = NULL, *dxq = NULL;
	uint16_t *xb = NULL;            /* bf16: the padded image rounded */
	uint32_t *dyT2 = NULL, *dyp2 = NULL; /* bf16: dy's pairs of outputs transposed; the padded dy's filters paired */
	uint32_t *dyq = NULL;           /* bf16: dy rounded, over q, [F][kp_q] words */
	size_t J;  /* the sum's length: outputs per image, junk columns included where direct */
	if (j->direct) {
		in = mem;
		ones = in + j->xpad_n;
		dyT = ones + j->Qp;
		dyp = dyT + j->Q * Fp;
		dxq = dyp + (j->direct_dx ? j->dypad_n : F * Pp);
		J = j->Q;
		memset(in, 0, sizeof(float) * j->xpad_n);
		for (size_t q = 0; q < j->Qp; q++)
			ones[q] = 1.0f;
		memset(dyT, 0, sizeof(float) * j->Q * Fp);
		if (j->dx && j->direct_dx)
			memset(dyp, 0, sizeof(float) * j->dypad_n);
		for (size_t m = 0; m < K; m++)
			arow[m] = in + j->boff_x[m];
		if (j->bf16) {
			float *b2 = dyp + dx_floats(j, j->dx != NULL);
			xb = (uint16_t *)b2;
			dyT2 = (uint32_t *)(b2 + (j->xpad_n + 1) / 2);
			dyq = dyT2 + j->kp_q * Fp;
			dyp2 = dyq + j->kp_q * F;
			/* what no image writes stays zero: the borders, junk columns, padded filters */
			memset(xb, 0, sizeof(uint16_t) * j->xpad_n);
			memset(dyT2, 0, sizeof(uint32_t) * j->kp_q * (Fp + F));
			if (j->dx)
				memset(dyp2, 0, sizeof(uint32_t) * j->dy2_n);
			arow2 = xmalloc(sizeof(*arow2) * K);
			for (size_t m = 0; m < K; m++)
				arow2[m] = xb + j->boff_x[m];
		}
	} else {
		/* col: [K+1][Pp], row K ones; dyT: [P][Fp]; dyp: [F][Pp]; dcol: [K][Pp] */
		in = mem;
		ones = in + K * Pp;
		dyT = ones + Pp;
		dyp = dyT + P * Fp;
		dxq = dyp + F * Pp;
		J = P;
		for (size_t p = 0; p < Pp; p++)
			ones[p] = p < P ? 1.0f : 0.0f;
		for (size_t p = 0; p < P; p++)
			for (size_t f = F; f < Fp; f++)
				dyT[p * Fp + f] = 0;
		for (size_t m = 0; m < K; m++)
			arow[m] = in + m * Pp;
	}
	arow[K] = ones;
	size_t ldq = j->direct ? j->wp : ow;
	for (int c; (c = atomic_fetch_add(&j->next, 1)) < j->items;) {
		float *part = j->partials + (size_t)c * (K + 1) * Fp;
		int b0 = c * CONV_CHUNK, b1 = b0 + CONV_CHUNK < s->batch ? b0 + CONV_CHUNK : s->batch;
		for (int b = b0; b < b1; b++) {
			const float *x = j->x + (size_t)b * in_size, *dy = j->dy + (size_t)b * F * P;
			if (s->pool) {
				unpool1(j, b, dz);
				dy = dz;
			}
			/* partT[k][f] (+)= sum over the outputs p of col[k][p] dy[f][p] */
			if (j->bf16) {
				if (s->stride == 1) {
					pad_round(x, (size_t)s->c, (size_t)s->h, (size_t)s->w, (size_t)s->pad, j->wp, j->plane,
					          xb);
				} else if (s->stride == 2) {
					pad_round2(x, s, j->hp, j->wp, xb);
				} else {
					load_image(x, s, j->hp, j->wp, in);
					round_row16(in, j->xpad_n, xb);
				}
				/* dy rounded over q (junk columns zero), its pairs of outputs transposed */
				pad_round(dy, F, (size_t)s->oh, ow, 0, j->wp, 2 * j->kp_q, (uint16_t *)dyq);
				transpose_words(dyq, F, j->kp_q, Fp, dyT2);
				dlk_bgemm_rows((int)K, (int)Fp, (int)j->kp_q, arow2, (const uint16_t *)dyT2, j->lin2_fp, part,
				               Fp, b > b0);
				/* the bias' gradient from dy itself, in fp32 */
				bias_sums(dy, F, P, part + K * Fp, b > b0);
			} else {
				if (j->direct)
					load_image(x, s, j->hp, j->wp, in);
				else
					im2col1(x, s, in, Pp);
				transpose_k(dy, F, (size_t)s->oh, ow, P, ldq, Fp, dyT);
				gemm_k((int)K + 1, (int)Fp, (int)J, arow, 1, dyT, j->lin_fp, part, Fp, b > b0);
			}
			if (!j->dx)
				continue;
			float *dx = j->dx + (size_t)b * in_size;
			if (j->direct_dx) {
				/* dx = the padded dy convolved with the flipped kernels */
				if (j->bf16) {
					pad_pairs(dy, F, (size_t)s->oh, ow, j->pq, j->wq, j->hq * j->wq, dyp2);
					dlk_bgemm_rows(s->c, (int)j->Qxp, (int)j->kp_dy, j->w2d_row, (const uint16_t *)dyp2,
					               j->boff2_dy, dxq, j->Qxp, 0);
				} else {
					pad_image(dy, s->f, s->oh, s->ow, (int)j->pq, dyp);
					gemm_k(s->c, (int)j->Qxp, (int)(F * s->k * s->k), j->w2row, 1, dyp, j->boff_dy, dxq,
					       j->Qxp, 0);
				}
				for (int ch = 0; ch < s->c; ch++)
					copy_rows_k(dxq + ch * j->Qxp, j->wq, dx + (size_t)ch * s->h * s->w, (size_t)s->w,
					            (size_t)s->h, (size_t)s->w);
			} else if (j->bf16) {
				/* dcol from dy's filters in pairs (its columns past P stay zero) */
				for (size_t i = 0; 2 * i < F; i++)
					pair_row16(dy + 2 * i * P, 2 * i + 1 < F ? dy + (2 * i + 1) * P : NULL, P, dyp2 + i * Pp);
				dlk_bgemm_rows((int)K, (int)Pp, (int)j->kp_dy, j->w2d_row, (const uint16_t *)dyp2, j->boff2_dy,
				               dxq, Pp, 0);
				col2im1(dxq, Pp, s, dx);
			} else {
				for (size_t f = 0; f < F; f++) {
					memcpy(dyp + f * Pp, dy + f * P, sizeof(float) * P);
					memset(dyp + f * Pp + P, 0, sizeof(float) * (Pp - P));
				}
				/* dcol[k][p] = sum over f of w[f][k] dy[f][p] */
				gemm_k((int)K, (int)Pp, (int)F, j->wcol, K, dyp, j->lin_pp, dxq, Pp, 0);
				col2im1(dxq, Pp, s, dx);
			}
		}
	}
	free(arow);
	free(arow2);
}

/* the groups' sums, in group order (partT is [K+1][Fp], dw is [F][K]): each part takes rows k of
 * partT, and each element is summed over the groups in their order, whatever the split */
struct sum_job {
	const float *partials;
	size_t K, F, Fp;
	int chunks;
	float *dw, *db;
};

CLONES static void sum_rows_k(const struct sum_job *j, size_t k0, size_t k1, float *restrict acc)
{
	size_t K = j->K, F = j->F, Fp = j->Fp;
	for (size_t k = k0; k < k1; k++) {
		const float *restrict p = j->partials + k * Fp;
		for (size_t f = 0; f < F; f++)
			acc[f] = p[f];
		for (int c = 1; c < j->chunks; c++) {
			p = j->partials + ((size_t)c * (K + 1) + k) * Fp;
			for (size_t f = 0; f < F; f++)
				acc[f] += p[f];
		}
		if (k < K)
			for (size_t f = 0; f < F; f++)
				j->dw[f * K + k] = acc[f];
		else
			for (size_t f = 0; f < F; f++)
				j->db[f] = acc[f];
	}
}

static void sum_part(void *ctx, int part, int nparts)
{
	const struct sum_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range(j->K + 1, part, nparts, 1, &lo, &hi);
	if (hi <= lo)
		return;
	float *acc = xmalloc(sizeof(float) * j->Fp);
	sum_rows_k(j, lo, hi, acc);
	free(acc);
}

void dlk_cpu_conv_backward(const float *x, const float *w, const float *y, const float *py, const float *dy,
                           const int32_t *argmax, const struct dlk_conv_shape *s, int act, float *dw, float *db,
                           float *dx)
{
	struct conv_job j = { .x = x, .dy = dy, .yact = y, .pooled = py, .argmax = argmax, .act = act, .dx = dx };
	pthread_once(&gemm_once, pick_isa);
	job_init(&j, s, w, dx != NULL);
	bf16_init(&j, dx != NULL);
	int chunks = (s->batch + CONV_CHUNK - 1) / CONV_CHUNK;
	size_t K = j.K, F = j.F, Fp = j.Fp;
	j.items = chunks;
	j.per = backward_per(&j, dx != NULL);
	int nt = pool_threads(chunks);
	size_t part_n = (size_t)chunks * (K + 1) * Fp;
	pthread_mutex_lock(&pool.run);
	float *mem = pool_scratch(j.per + pad16((part_n + (size_t)nt - 1) / (size_t)nt), nt);
	j.scratch = mem;
	j.partials = mem + j.per * (size_t)nt;
	parallel(backward_part, &j, nt);
	struct sum_job sj = { .partials = j.partials, .K = K, .F = F, .Fp = Fp, .chunks = chunks, .dw = dw, .db = db };
	size_t values = (size_t)chunks * (K + 1) * Fp;
	int nparts = values >= 16384 ? dlk_parallel_threads() : 1;
	dlk_parallel_for(nparts < (int)K + 1 ? nparts : (int)K + 1, sum_part, &sj);
	pthread_mutex_unlock(&pool.run);
	free(j.tables);
	free(j.tables2);
}

