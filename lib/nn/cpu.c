/* The CPU backend: OpenBLAS for GEMM, plain loops over the kernels.h formulas for the rest.
 * Loops use restrict-qualified pointers and simple bodies so that they vectorise.
 *
 * Threads: one pool for everything (lib/util/parallel.h). OpenBLAS always runs single-threaded;
 * a GEMM big enough to share is cut into one block of C's rows or columns per thread, each a
 * single-threaded OpenBLAS call, and a dense layer's bias and activation run on each block as
 * soon as it is computed (while it is in cache). Element-wise loops (the optimizers, activation
 * gradients, the bias gradient) are cut into element or column ranges. Every element of every
 * output is computed by one part, in an order that depends only on the thread count and the
 * shapes, so results are the same bits run to run for a given thread count (they may differ
 * between thread counts: a block of a GEMM may take another OpenBLAS kernel path than the whole). */

/* At -O2, GCC 12 vectorises only with its "very cheap" cost model, which rejects every loop here
 * (unknown trip counts need an epilogue). This file alone opts in to the usual model; the rest of
 * dlk keeps the project's flags. (The Adam loop stays scalar unless the build adds
 * -fno-math-errno: sqrtf's errno path is control flow the vectoriser refuses, and no pragma or
 * attribute lifts it in GCC 12.) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "lib/nn/backend.h"
#include "lib/nn/cpu_bgemm.h"
#include "lib/nn/cpu_conv.h"
#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/nn/loss.h"
#include "lib/util/parallel.h"

/* The loops below are built for AVX-512, AVX2 and the baseline, with the same bits in each
 * (lib/nn/kernels.h says why). */
#define CLONES DLK_CPU_CLONES

/* OpenBLAS' name for the kernels it chose (exported by every OpenBLAS build) */
char *openblas_get_corename(void);

const char *dlk_cpu_blas_coretype(void)
{
	/* the cores older than Haswell that OpenBLAS falls back to for a CPU it does not know */
	static const char *const old[] = { "Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge",
	                                   "Katmai", "Coppermine", "Northwood", "Banias", "Atom", "Nano" };
	const char *want = NULL, *have = openblas_get_corename();
	int is_old = 0;
	if (!have)
		return NULL;
	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++)
		is_old |= !strcasecmp(have, old[i]);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
		want = "SkylakeX";
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		want = "Haswell";
#endif
	return is_old ? want : NULL;
}

/* Subnormal floats (below 1.2e-38) are computed as zero, in the calling thread, as TensorFlow's
 * CPU runtime does (and PyTorch's torch.set_flush_denormal(True)): on x86 an operation with a subnormal input or result costs about a
 * hundred cycles instead of one. They are no rare case in training: Adam's moments of a weight
 * whose gradient stays zero (an input pixel that is black in every image) decay through the
 * subnormal range for hundreds of steps, which made the optimizer a third of the MLP's step. The
 * mode is the thread's (MXCSR's FTZ and DAZ bits, FPCR's FZ), copied to every thread it starts,
 * so the pool's workers share it: the same bits on every thread and in every vector width. */
static void cpu_flush_subnormals(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_ldmxcsr(__builtin_ia32_stmxcsr() | 0x8040); /* FTZ (bit 15) and DAZ (bit 6) */
#elif defined(__aarch64__)
	unsigned long fpcr;
	__asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
	__asm__ volatile("msr fpcr, %0" : : "r"(fpcr | (1UL << 24))); /* FZ */
#endif
}

static void cpu_set_threads(int n)
{
	/* OpenBLAS' own pool would fight dlk's (and it spins while idle): the parallelism is dlk's */
	openblas_set_num_threads(1);
	/* before any worker starts, so that each inherits the mode */
	cpu_flush_subnormals();
	dlk_parallel_set_threads(n);
}

/* Parts for element-wise work over n values: one per thread when there is enough to share
 * (below that, waking a thread costs more than the loop). */
#define EW_MIN 16384
static int ew_parts(size_t n)
{
	int t = dlk_parallel_threads();
	return n >= EW_MIN && t > 1 ? t : 1;
}

/* Zeroed, 64-byte aligned memory: alignment keeps vector loads aligned and rows off shared cache
 * lines. It comes from calloc, whose large blocks are fresh pages that read as zero and take no
 * memory until written, so a buffer the backend never touches costs nothing resident (a pooled
 * conv's full activation, which cpu_conv.c does not write); posix_memalign and memset would
 * touch every page. The block's own address is kept in the 8 bytes below the aligned one. */
static void *cpu_alloc(size_t bytes)
{
	size_t rounded = (bytes + 63) & ~(size_t)63;
	if (rounded == 0)
		rounded = 64;
	if (rounded > SIZE_MAX - 64)
		return NULL;
	char *raw = calloc(1, rounded + 64);
	if (!raw)
		return NULL;
	char *p = (char *)(((uintptr_t)raw + 64) & ~(uintptr_t)63);
	memcpy(p - sizeof(raw), &raw, sizeof(raw));
	return p;
}

static void cpu_free(void *p)
{
	char *raw;
	if (!p)
		return;
	memcpy(&raw, (char *)p - sizeof(raw), sizeof(raw));
	free(raw);
}
struct copy_job {
	char *dst;
	const char *src;
	size_t bytes;
};

static void copy_part(void *ctx, int part, int nparts)
{
	const struct copy_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range(j->bytes, part, nparts, 64, &lo, &hi);
	if (hi > lo)
		memcpy(j->dst + lo, j->src + lo, hi - lo);
}

/* A large copy between buffers that do not overlap (a gradient handed to a layer's input, a
 * batch's activations) is cut into parts for the pool; one that overlaps stays one memmove. */
static void cpu_copy(void *dst, const void *src, size_t bytes)
{
	if (!bytes || dst == src)
		return;
	const char *d = dst, *s = src;
	if (bytes >= 4 * sizeof(float) * EW_MIN && (d + bytes <= s || s + bytes <= d)) {
		struct copy_job j = { dst, src, bytes };
		dlk_parallel_for(ew_parts(bytes / sizeof(float)), copy_part, &j);
		return;
	}
	memmove(dst, src, bytes);
}
static int cpu_check(char *msg, size_t len)
{
	if (len)
		msg[0] = '\0';
	return 0;
}

static void bias_act_ld(float *y, int ldy, const float *bias, int rows, int cols, int act);
static void act_backward_ld(int act, const float *y, float *dx, int ld, int rows, int cols);
static void sum_rows_seq(const float *dy, int rows, int cols, int ld, float *db);

/* training.precision: bf16 (set_precision): the GEMMs below multiply in bfloat16 */
static int cpu_bf16;

static void cpu_set_precision(int bf16)
{
	cpu_bf16 = bf16 != 0;
	dlk_cpu_conv_set_precision(bf16);
}

/* A GEMM (and a dense layer's epilogue) cut into blocks of C. */
struct gemm_job {
	int ta, tb, m, n, k, lda, ldb, ldc, by_rows, nparts, act;
	float alpha, beta;
	const float *a, *b, *bias;
	float *c;
	/* epilogues: the activation's backward on each block (act_y: its output, laid out as C),
	 * or the column sums of a [sum_rows, sum_cols] matrix into sum_db, cut into columns */
	const float *act_y;
	const float *sum_dy;
	int sum_rows, sum_cols, sum_nparts;
	float *sum_db;
};

/* 16 floats: a 64-byte line and a multiple of OpenBLAS' SkylakeX/Haswell register blocks */
#define GEMM_ALIGN 16
/* multiply-adds below which a GEMM stays whole: splitting it would cost more than it saves */
#define GEMM_MIN_SPLIT (1 << 18)

static void gemm_part(void *ctx, int part, int nparts)
{
	const struct gemm_job *j = ctx;
	size_t lo, hi;
	(void)nparts;
	if (j->sum_db && part < j->sum_nparts) {
		dlk_parallel_range((size_t)j->sum_cols, part, j->sum_nparts, 16, &lo, &hi);
		if (hi > lo)
			sum_rows_seq(j->sum_dy + lo, j->sum_rows, (int)(hi - lo), j->sum_cols, j->sum_db + lo);
	}
	if (part >= j->nparts)
		return;
	dlk_parallel_range((size_t)(j->by_rows ? j->m : j->n), part, j->nparts, GEMM_ALIGN, &lo, &hi);
	if (hi <= lo)
		return;
	int len = (int)(hi - lo);
	const float *a = j->a, *b = j->b, *bias = j->bias;
	float *c = j->c;
	int m = j->m, n = j->n;
	const float *act_y = j->act_y;
	if (j->by_rows) {
		/* rows lo..hi of op(A) and of C */
		a += j->ta ? lo : lo * (size_t)j->lda;
		c += lo * (size_t)j->ldc;
		act_y = act_y ? act_y + lo * (size_t)j->ldc : NULL;
		m = len;
	} else {
		/* columns lo..hi of op(B) and of C */
		b += j->tb ? lo * (size_t)j->ldb : lo;
		c += lo;
		bias = bias ? bias + lo : NULL;
		act_y = act_y ? act_y + lo : NULL;
		n = len;
	}
	if (cpu_bf16)
		dlk_bgemm(j->ta, j->tb, m, n, j->k, j->alpha, a, j->lda, b, j->ldb, j->beta, c, j->ldc);
	else
		cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans, m, n,
		            j->k, j->alpha, a, j->lda, b, j->ldb, j->beta, c, j->ldc);
	if (bias)
		bias_act_ld(c, j->ldc, bias, m, n, j->act);
	if (act_y)
		act_backward_ld(j->act, act_y, c, j->ldc, m, n);
}

/* how the GEMM is cut: the number of blocks depends only on the shape and the thread count */
static void gemm_plan(struct gemm_job *j)
{
	int t = dlk_parallel_threads();
	j->nparts = 1;
	if (t > 1 && (double)j->m * j->n * j->k >= GEMM_MIN_SPLIT) {
		/* cut the longer side of C: each block packs its share of that operand and all of the
		 * other, so the shorter side is the one packed twice */
		j->by_rows = j->m > j->n;
		int blocks = ((j->by_rows ? j->m : j->n) + GEMM_ALIGN - 1) / GEMM_ALIGN;
		j->nparts = blocks < t ? blocks : t;
	}
	if (j->sum_db) {
		int blocks = (j->sum_cols + 15) / 16;
		j->sum_nparts = ew_parts((size_t)j->sum_rows * j->sum_cols);
		j->sum_nparts = j->sum_nparts < blocks ? j->sum_nparts : blocks;
	}
}

static void gemm_run(struct gemm_job *j)
{
	gemm_plan(j);
	dlk_parallel_for(j->sum_db && j->sum_nparts > j->nparts ? j->sum_nparts : j->nparts, gemm_part, j);
}

static void cpu_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc)
{
	struct gemm_job j = { .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
	                      .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c };
	if (m <= 0 || n <= 0)
		return;
	gemm_run(&j);
}

/* y[batch, out] = act(x w^T + bias): the GEMM's blocks each get their bias and activation at
 * once, so the output is not read again from memory */
static void cpu_dense_forward(const float *x, const float *w, const float *bias, int batch, int in, int out,
                              int act, float *y)
{
	struct gemm_job j = { .ta = 0, .tb = 1, .m = batch, .n = out, .k = in, .lda = in, .ldb = in, .ldc = out,
	                      .alpha = 1.0f, .beta = 0.0f, .a = x, .b = w, .c = y, .bias = bias, .act = act };
	if (batch <= 0 || out <= 0)
		return;
	gemm_run(&j);
}

/* dw = g^T x cut into blocks, and db = g's column sums cut into column ranges, in one pass of
 * the pool (the two share no output) */
static void cpu_dense_backward_w(const float *g, const float *x, int batch, int in, int out, float *dw, float *db)
{
	struct gemm_job j = { .ta = 1, .tb = 0, .m = out, .n = in, .k = batch, .lda = out, .ldb = in, .ldc = in,
	                      .alpha = 1.0f, .beta = 0.0f, .a = g, .b = x, .c = dw, .sum_dy = g, .sum_rows = batch,
	                      .sum_cols = out, .sum_db = db };
	if (out <= 0 || in <= 0)
		return;
	if (batch <= 0) {
		memset(dw, 0, sizeof(float) * (size_t)out * in);
		memset(db, 0, sizeof(float) * (size_t)out);
		return;
	}
	gemm_run(&j);
}

/* dx = g w, each block multiplied by the activation's derivative as soon as it is computed */
static void cpu_dense_backward_x(const float *g, const float *w, int batch, int in, int out, int act, const float *y,
                                 float *dx)
{
	struct gemm_job j = { .ta = 0, .tb = 0, .m = batch, .n = in, .k = out, .lda = out, .ldb = in, .ldc = in,
	                      .alpha = 1.0f, .beta = 0.0f, .a = g, .b = w, .c = dx, .act = act,
	                      .act_y = act != DLK_ACT_NONE ? y : NULL };
	if (batch <= 0 || in <= 0)
		return;
	gemm_run(&j);
}

CLONES static void fill_seq(float *restrict x, size_t n, float v)
{
	for (size_t i = 0; i < n; i++)
		x[i] = v;
}

CLONES static void scale_seq(float *restrict x, size_t n, float a)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= a;
}

CLONES static void axpy_seq(size_t n, float a, const float *restrict x, float *restrict y)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

/* y may be a or b: each element reads both before it writes */
CLONES static void add_seq(size_t n, const float *a, const float *b, float *y)
{
	for (size_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}

/* the element-wise kernels' arguments, each part taking its range [lo, hi) of the n elements */
struct ew_job {
	int op, act, flag;
	size_t n;
	float a, b, c, d, e, f, g;
	uint64_t seed, offset;
	const float *x, *y2;
	float *y, *m, *v;
};
enum { EW_FILL, EW_SCALE, EW_AXPY, EW_ADD, EW_ACT_FWD, EW_ACT_BWD, EW_DROP, EW_SGD, EW_ADAM };

static void act_forward_seq(int act, const float *x, float *y, size_t n);
static void act_backward_seq(int act, const float *y, const float *dy, float *dx, size_t n);
static void dropout_seq(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset);
static void sgd_seq(float *p, const float *g, float *buf, size_t n, float lr, float momentum, int nesterov,
                    float wd);
static void adam_seq(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                     float eps, float wd, int decoupled, float bc1, float bc2_sqrt);

static void ew_part(void *ctx, int part, int nparts)
{
	const struct ew_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range(j->n, part, nparts, 16, &lo, &hi);
	size_t n = hi - lo;
	if (!n)
		return;
	switch (j->op) {
	case EW_FILL: fill_seq(j->y + lo, n, j->a); break;
	case EW_SCALE: scale_seq(j->y + lo, n, j->a); break;
	case EW_AXPY: axpy_seq(n, j->a, j->x + lo, j->y + lo); break;
	case EW_ADD: add_seq(n, j->x + lo, j->y2 + lo, j->y + lo); break;
	case EW_ACT_FWD: act_forward_seq(j->act, j->x + lo, j->y + lo, n); break;
	case EW_ACT_BWD: act_backward_seq(j->act, j->y2 + lo, j->x + lo, j->y + lo, n); break;
	case EW_DROP: dropout_seq(j->x + lo, j->y + lo, n, j->a, j->seed, j->offset + lo); break;
	case EW_SGD:
		/* plain SGD's buffer may be the gradient itself (never written): no offset needed
		 * beyond the same range */
		sgd_seq(j->y + lo, j->x + lo, j->m + lo, n, j->a, j->b, j->flag, j->c);
		break;
	case EW_ADAM:
		adam_seq(j->y + lo, j->x + lo, j->m + lo, j->v + lo, n, j->a, j->b, j->c, j->d, j->e, j->flag, j->f,
		         j->g);
		break;
	}
}

static void ew_run(struct ew_job *j) { dlk_parallel_for(ew_parts(j->n), ew_part, j); }

static void cpu_fill(float *x, size_t n, float v)
{
	struct ew_job j = { .op = EW_FILL, .n = n, .a = v, .y = x };
	ew_run(&j);
}

static void cpu_scale(float *x, size_t n, float a)
{
	struct ew_job j = { .op = EW_SCALE, .n = n, .a = a, .y = x };
	ew_run(&j);
}

static void cpu_axpy(size_t n, float a, const float *x, float *y)
{
	struct ew_job j = { .op = EW_AXPY, .n = n, .a = a, .x = x, .y = y };
	ew_run(&j);
}

static void cpu_add(const float *a, const float *b, float *y, size_t n)
{
	struct ew_job j = { .op = EW_ADD, .n = n, .x = a, .y2 = b, .y = y };
	ew_run(&j);
}

/* The next-token cross-entropy (loss.c's token_ce_ref, the same mean and gradient): rows cut
 * over the pool, each row's exponentials taken once with dlk_k_exp in a loop that vectorises
 * (kept in dout, then turned into the gradient), its sums in 16 interleaved partial sums; the
 * row losses are added in row order in double, as the reference does. */
#define CE_LANES 16
struct ce_job {
	const float *out, *targets;
	int rows, k;
	float inv;
	float *dout, *row_loss;
};

CLONES static float ce_row(const float *restrict z, int k, int y, float inv, float *restrict e)
{
	float mx[CE_LANES], acc[CE_LANES] = { 0 };
	int j, n16 = k / CE_LANES * CE_LANES;
	for (j = 0; j < CE_LANES; j++)
		mx[j] = z[0];
	for (j = 0; j < n16; j += CE_LANES)
		for (int l = 0; l < CE_LANES; l++)
			mx[l] = z[j + l] > mx[l] ? z[j + l] : mx[l];
	float m = z[0];
	for (int l = 0; l < CE_LANES; l++)
		m = mx[l] > m ? mx[l] : m;
	for (j = n16; j < k; j++)
		m = z[j] > m ? z[j] : m;
	for (j = 0; j < k; j++) { /* a NaN logit stays NaN (dlk_k_exp wants a number) */
		float d = z[j] - m;
		e[j] = d == d ? dlk_k_exp(d) : d;
	}
	for (j = 0; j < n16; j += CE_LANES)
		for (int l = 0; l < CE_LANES; l++)
			acc[l] += e[j + l];
	for (j = n16; j < k; j++)
		acc[j - n16] += e[j];
	float sum = 0;
	for (int l = 0; l < CE_LANES; l++)
		sum += acc[l];
	float loss = dlk_k_ce_smooth_loss(z[y], m, sum, 0, k, 0);
	for (j = 0; j < k; j++)
		e[j] = e[j] / sum;
	e[y] -= 1.0f;
	for (j = 0; j < k; j++)
		e[j] *= inv;
	return loss;
}

static void ce_part(void *ctx, int part, int nparts)
{
	const struct ce_job *j = ctx;
	size_t lo, hi;
	float *tmp = j->dout ? NULL : malloc(sizeof(float) * (size_t)j->k);
	dlk_parallel_range((size_t)j->rows, part, nparts, 1, &lo, &hi);
	for (size_t r = lo; r < hi; r++) {
		int y = dlk_k_token_id(j->targets[r]);
		float *e = j->dout ? j->dout + r * (size_t)j->k : tmp;
		if (y < 0 || y >= j->k) {
			if (j->dout)
				memset(e, 0, sizeof(float) * (size_t)j->k);
			j->row_loss[r] = 0.0f; /* not in the sum */
			continue;
		}
		if (!e) { /* no memory for the eval's scratch row: the reference's loop, one row */
			j->row_loss[r] = dlk_loss_ref(DLK_LOSS_TOKEN_CE, j->out + r * (size_t)j->k, NULL, &j->targets[r], 1,
			                              j->k, 0, NULL);
			continue;
		}
		j->row_loss[r] = ce_row(j->out + r * (size_t)j->k, j->k, y, j->inv, e);
	}
	free(tmp);
}

static float cpu_loss(int kind, const float *out, const int32_t *labels, const float *targets, int batch, int k,
                      float param, float *dout)
{
	if (kind != DLK_LOSS_TOKEN_CE || batch <= 0 || k <= 0)
		return dlk_loss_ref(kind, out, labels, targets, batch, k, param, dout);
	float *row_loss = malloc(sizeof(float) * (size_t)batch);
	if (!row_loss)
		return dlk_loss_ref(kind, out, labels, targets, batch, k, param, dout);
	int counted = 0;
	for (int b = 0; b < batch; b++)
		counted += dlk_k_token_id(targets[b]) >= 0;
	struct ce_job j = { .out = out, .targets = targets, .rows = batch, .k = k, .dout = dout, .row_loss = row_loss };
	j.inv = counted ? 1.0f / (float)counted : 0.0f;
	dlk_parallel_for(ew_parts((size_t)batch * (size_t)k), ce_part, &j);
	double total = 0;
	for (int b = 0; b < batch; b++)
		total += row_loss[b];
	free(row_loss);
	return counted ? (float)(total / counted) : 0.0f;
}

static double cpu_sum_squares(const float *restrict x, size_t n)
{
	/* four float partial sums per block keep the loop vectorisable; blocks are summed in double */
	double total = 0;
	size_t i = 0;
	while (i < n) {
		size_t end = n - i > 4096 ? i + 4096 : n;
		float s = 0;
		for (size_t j = i; j < end; j++)
			s += x[j] * x[j];
		total += s;
		i = end;
	}
	return total;
}

CLONES static void bias_act_ld(float *restrict y, int ldy, const float *restrict bias, int rows, int cols, int act)
{
	for (int r = 0; r < rows; r++) {
		float *restrict row = y + (size_t)r * ldy;
		switch (act) {
		case DLK_ACT_RELU:
			for (int c = 0; c < cols; c++)
				row[c] = dlk_k_relu(row[c] + bias[c]);
			break;
		case DLK_ACT_NONE:
			for (int c = 0; c < cols; c++)
				row[c] += bias[c];
			break;
		default:
			for (int c = 0; c < cols; c++)
				row[c] = dlk_k_act(act, row[c] + bias[c]);
		}
	}
}

static void cpu_bias_act(float *y, const float *bias, int rows, int cols, int act)
{
	bias_act_ld(y, cols, bias, rows, cols, act);
}

CLONES static void act_forward_seq(int act, const float *x, float *y, size_t n)
{
	if (act == DLK_ACT_RELU) {
		for (size_t i = 0; i < n; i++)
			y[i] = dlk_k_relu(x[i]);
		return;
	}
	for (size_t i = 0; i < n; i++)
		y[i] = dlk_k_act(act, x[i]);
}

/* dx = act'(y) * dx over a [rows, cols] block of matrices with leading dimension ld */
CLONES static void act_backward_ld(int act, const float *restrict y, float *restrict dx, int ld, int rows, int cols)
{
	for (int r = 0; r < rows; r++) {
		const float *restrict yr = y + (size_t)r * ld;
		float *restrict d = dx + (size_t)r * ld;
		if (act == DLK_ACT_RELU) {
			for (int c = 0; c < cols; c++)
				d[c] = dlk_k_relu_grad(yr[c], d[c]);
		} else {
			for (int c = 0; c < cols; c++)
				d[c] = dlk_k_act_grad(act, yr[c], d[c]);
		}
	}
}

CLONES static void act_backward_seq(int act, const float *y, const float *dy, float *dx, size_t n)
{
	if (act == DLK_ACT_RELU) {
		for (size_t i = 0; i < n; i++)
			dx[i] = dlk_k_relu_grad(y[i], dy[i]);
		return;
	}
	for (size_t i = 0; i < n; i++)
		dx[i] = dlk_k_act_grad(act, y[i], dy[i]);
}

static void cpu_act_forward(int act, const float *x, float *y, size_t n)
{
	struct ew_job j = { .op = EW_ACT_FWD, .act = act, .n = n, .x = x, .y = y };
	ew_run(&j);
}

static void cpu_act_backward(int act, const float *y, const float *dy, float *dx, size_t n)
{
	struct ew_job j = { .op = EW_ACT_BWD, .act = act, .n = n, .y2 = y, .x = dy, .y = dx };
	ew_run(&j);
}

/* columns [0, cols) of a [rows, ld] matrix summed down into db[0, cols) */
CLONES static void sum_rows_seq(const float *restrict dy, int rows, int cols, int ld, float *restrict db)
{
	memset(db, 0, sizeof(float) * (size_t)cols);
	for (int r = 0; r < rows; r++) {
		const float *restrict row = dy + (size_t)r * ld;
		for (int c = 0; c < cols; c++)
			db[c] += row[c];
	}
}

struct sum_rows_job {
	const float *dy;
	int rows, cols;
	float *db;
};

static void sum_rows_part(void *ctx, int part, int nparts)
{
	const struct sum_rows_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range((size_t)j->cols, part, nparts, 16, &lo, &hi);
	if (hi > lo)
		sum_rows_seq(j->dy + lo, j->rows, (int)(hi - lo), j->cols, j->db + lo);
}

/* each column is summed by one part, top to bottom: the same bits for any split */
static void cpu_sum_rows(const float *dy, int rows, int cols, float *db)
{
	struct sum_rows_job j = { .dy = dy, .rows = rows, .cols = cols, .db = db };
	int nparts = ew_parts((size_t)rows * cols), blocks = (cols + 15) / 16;
	dlk_parallel_for(nparts < blocks ? nparts : blocks, sum_rows_part, &j);
}

CLONES static void sum_cols_seq(const float *restrict dy, int r0, int r1, int cols, float *restrict db)
{
	for (int r = r0; r < r1; r++) {
		const float *restrict row = dy + (size_t)r * cols;
		float s = 0;
		for (int c = 0; c < cols; c++)
			s += row[c];
		db[r] = s;
	}
}

/* forward and backward alike: the mask of (seed, offset + i) times the input */
static void dropout_seq(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset)
{
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] * dlk_k_dropout_scale(seed, offset + i, p);
}

static void cpu_dropout_forward(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset)
{
	struct ew_job j = { .op = EW_DROP, .n = n, .a = p, .seed = seed, .offset = offset, .x = x, .y = y };
	ew_run(&j);
}

static void cpu_dropout_backward(const float *dy, float *dx, size_t n, float p, uint64_t seed, uint64_t offset)
{
	cpu_dropout_forward(dy, dx, n, p, seed, offset);
}

/* For output column ox, the input column is ox*stride - pad + kj; the valid ox form the range
 * [lo, hi). Computing it once per row keeps the inner loops free of bounds tests. */
static void valid_range(int out, int in, int stride, int off, int *lo, int *hi)
{
	/* need 0 <= o*stride + off < in */
	int a = 0;
	if (off < 0)
		a = (-off + stride - 1) / stride;
	int b = in - off <= 0 ? 0 : (in - off + stride - 1) / stride;
	if (b > out)
		b = out;
	if (a > b)
		a = b;
	*lo = a;
	*hi = b;
}

/* im2col, col2im, conv_out and conv_grad_in work on the images [b0, b1) of the batch, so that the
 * pool can share a batch out by images: each output element is computed by one part, from the
 * same values in the same order as by the whole loop (the same bits for any split) */
CLONES static void im2col_seq(const float *x, int b0, int b1, int batch, int c, int h, int w, int k, int stride,
                              int pad, int oh, int ow, float *col)
{
	size_t ohw = (size_t)oh * ow, ncol = (size_t)batch * ohw;
	for (int ch = 0; ch < c; ch++)
		for (int ki = 0; ki < k; ki++)
			for (int kj = 0; kj < k; kj++) {
				float *restrict row = col + ((size_t)(ch * k + ki) * k + kj) * ncol;
				int xlo, xhi, ylo, yhi;
				valid_range(ow, w, stride, kj - pad, &xlo, &xhi);
				valid_range(oh, h, stride, ki - pad, &ylo, &yhi);
				for (int b = b0; b < b1; b++) {
					const float *restrict img = x + ((size_t)b * c + ch) * h * w;
					float *restrict out = row + (size_t)b * ohw;
					for (int oy = 0; oy < oh; oy++) {
						float *restrict o = out + (size_t)oy * ow;
						if (oy < ylo || oy >= yhi) {
							memset(o, 0, sizeof(float) * (size_t)ow);
							continue;
						}
						const float *restrict src = img + (size_t)(oy * stride + ki - pad) * w + (kj - pad);
						for (int ox = 0; ox < xlo; ox++)
							o[ox] = 0;
						if (stride == 1) {
							for (int ox = xlo; ox < xhi; ox++)
								o[ox] = src[ox];
						} else {
							for (int ox = xlo; ox < xhi; ox++)
								o[ox] = src[ox * stride];
						}
						for (int ox = xhi; ox < ow; ox++)
							o[ox] = 0;
					}
				}
			}
}

CLONES static void col2im_seq(const float *col, int b0, int b1, int batch, int c, int h, int w, int k, int stride,
                              int pad, int oh, int ow, float *dx)
{
	size_t ohw = (size_t)oh * ow, ncol = (size_t)batch * ohw;
	memset(dx + (size_t)b0 * c * h * w, 0, sizeof(float) * (size_t)(b1 - b0) * c * h * w);
	for (int ch = 0; ch < c; ch++)
		for (int ki = 0; ki < k; ki++)
			for (int kj = 0; kj < k; kj++) {
				const float *restrict row = col + ((size_t)(ch * k + ki) * k + kj) * ncol;
				int xlo, xhi, ylo, yhi;
				valid_range(ow, w, stride, kj - pad, &xlo, &xhi);
				valid_range(oh, h, stride, ki - pad, &ylo, &yhi);
				for (int b = b0; b < b1; b++) {
					float *restrict img = dx + ((size_t)b * c + ch) * h * w;
					const float *restrict in = row + (size_t)b * ohw;
					for (int oy = ylo; oy < yhi; oy++) {
						const float *restrict o = in + (size_t)oy * ow;
						float *restrict dst = img + (size_t)(oy * stride + ki - pad) * w + (kj - pad);
						if (stride == 1) {
							for (int ox = xlo; ox < xhi; ox++)
								dst[ox] += o[ox];
						} else {
							for (int ox = xlo; ox < xhi; ox++)
								dst[ox * stride] += o[ox];
						}
					}
				}
			}
}

CLONES static void conv_out_seq(const float *t, const float *bias, int b0, int b1, int batch, int f, int hw, int act,
                                float *y)
{
	size_t ncol = (size_t)batch * hw;
	for (int b = b0; b < b1; b++)
		for (int ch = 0; ch < f; ch++) {
			const float *restrict src = t + (size_t)ch * ncol + (size_t)b * hw;
			float *restrict dst = y + ((size_t)b * f + ch) * hw;
			float bb = bias[ch];
			if (act == DLK_ACT_RELU) {
				for (int i = 0; i < hw; i++)
					dst[i] = dlk_k_relu(src[i] + bb);
			} else {
				for (int i = 0; i < hw; i++)
					dst[i] = dlk_k_act(act, src[i] + bb);
			}
		}
}

static void conv_grad_in_seq(const float *dy, int b0, int b1, int batch, int f, int hw, float *dt)
{
	size_t ncol = (size_t)batch * hw;
	for (int b = b0; b < b1; b++)
		for (int ch = 0; ch < f; ch++)
			memcpy(dt + (size_t)ch * ncol + (size_t)b * hw, dy + ((size_t)b * f + ch) * hw,
			       sizeof(float) * (size_t)hw);
}

/* the layout passes above, and sum_cols and the copy of rows, shared out by the pool */
struct layout_job {
	int op, batch, c, h, w, k, stride, pad, oh, ow, act;
	const float *src, *bias;
	float *dst;
	size_t lds, ldd, row_bytes;
};
enum { LAYOUT_IM2COL, LAYOUT_COL2IM, LAYOUT_CONV_OUT, LAYOUT_GRAD_IN, LAYOUT_SUM_COLS, LAYOUT_COPY_ROWS };

static void layout_part(void *ctx, int part, int nparts)
{
	const struct layout_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range((size_t)j->batch, part, nparts, 1, &lo, &hi);
	int b0 = (int)lo, b1 = (int)hi;
	if (b1 <= b0)
		return;
	switch (j->op) {
	case LAYOUT_IM2COL:
		im2col_seq(j->src, b0, b1, j->batch, j->c, j->h, j->w, j->k, j->stride, j->pad, j->oh, j->ow, j->dst);
		break;
	case LAYOUT_COL2IM:
		col2im_seq(j->src, b0, b1, j->batch, j->c, j->h, j->w, j->k, j->stride, j->pad, j->oh, j->ow, j->dst);
		break;
	case LAYOUT_CONV_OUT: conv_out_seq(j->src, j->bias, b0, b1, j->batch, j->c, j->h, j->act, j->dst); break;
	case LAYOUT_GRAD_IN: conv_grad_in_seq(j->src, b0, b1, j->batch, j->c, j->h, j->dst); break;
	case LAYOUT_SUM_COLS: sum_cols_seq(j->src, b0, b1, j->c, j->dst); break;
	case LAYOUT_COPY_ROWS:
		for (int r = b0; r < b1; r++)
			memcpy((char *)j->dst + (size_t)r * j->ldd, (const char *)j->src + (size_t)r * j->lds, j->row_bytes);
		break;
	}
}

/* parts: one per thread when the pass moves enough values, never more than the images (rows) */
static void layout_run(struct layout_job *j, size_t values)
{
	int nparts = ew_parts(values);
	dlk_parallel_for(nparts < j->batch ? nparts : j->batch, layout_part, j);
}

static void cpu_im2col(const float *x, int batch, int c, int h, int w, int k, int stride, int pad, int oh, int ow,
                       float *col)
{
	struct layout_job j = { .op = LAYOUT_IM2COL, .batch = batch, .c = c, .h = h, .w = w, .k = k,
		                .stride = stride, .pad = pad, .oh = oh, .ow = ow, .src = x, .dst = col };
	layout_run(&j, (size_t)batch * c * k * k * oh * ow);
}

static void cpu_col2im(const float *col, int batch, int c, int h, int w, int k, int stride, int pad, int oh,
                       int ow, float *dx)
{
	struct layout_job j = { .op = LAYOUT_COL2IM, .batch = batch, .c = c, .h = h, .w = w, .k = k,
		                .stride = stride, .pad = pad, .oh = oh, .ow = ow, .src = col, .dst = dx };
	layout_run(&j, (size_t)batch * c * k * k * oh * ow);
}

static void cpu_conv_out(const float *t, const float *bias, int batch, int f, int hw, int act, float *y)
{
	struct layout_job j = { .op = LAYOUT_CONV_OUT, .batch = batch, .c = f, .h = hw, .act = act, .src = t,
		                .bias = bias, .dst = y };
	layout_run(&j, (size_t)batch * f * hw);
}

static void cpu_conv_grad_in(const float *dy, int batch, int f, int hw, float *dt)
{
	struct layout_job j = { .op = LAYOUT_GRAD_IN, .batch = batch, .c = f, .h = hw, .src = dy, .dst = dt };
	layout_run(&j, (size_t)batch * f * hw);
}

/* each row summed by one part, left to right: the same bits for any split */
static void cpu_sum_cols(const float *dy, int rows, int cols, float *db)
{
	struct layout_job j = { .op = LAYOUT_SUM_COLS, .batch = rows, .c = cols, .src = dy, .dst = db };
	layout_run(&j, (size_t)rows * cols);
}

static void cpu_copy_rows(void *dst, size_t ldd, const void *src, size_t lds, size_t rows, size_t row_bytes)
{
	struct layout_job j = { .op = LAYOUT_COPY_ROWS, .batch = (int)rows, .src = src, .dst = dst, .lds = lds,
		                .ldd = ldd, .row_bytes = row_bytes };
	if (rows > INT_MAX) {
		for (size_t r = 0; r < rows; r++)
			memcpy((char *)dst + r * ldd, (const char *)src + r * lds, row_bytes);
		return;
	}
	layout_run(&j, rows * row_bytes / sizeof(float));
}

static void cpu_maxpool_backward(const float *dy, const int32_t *argmax, size_t n_out, size_t n_in, float *dx)
{
	memset(dx, 0, sizeof(float) * n_in);
	for (size_t i = 0; i < n_out; i++)
		dx[argmax[i]] += dy[i];
}

static float cpu_softmax_ce(const float *logits, const int32_t *labels, int batch, int k, float *dlogits)
{
	double total = 0;
	float inv = 1.0f / (float)batch;
	for (int b = 0; b < batch; b++) {
		const float *z = logits + (size_t)b * k;
		float m = z[0];
		for (int j = 1; j < k; j++)
			m = z[j] > m ? z[j] : m;
		float s = 0;
		for (int j = 0; j < k; j++)
			s += expf(z[j] - m);
		int y = labels[b];
		total += dlk_k_ce_loss(z[y], m, s);
		if (dlogits) {
			float *d = dlogits + (size_t)b * k;
			for (int j = 0; j < k; j++)
				d[j] = dlk_k_ce_grad(z[j], m, s, j == y, inv);
		}
	}
	return (float)(total / batch);
}

CLONES static void sgd_seq(float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                           float lr, float momentum, int nesterov, float wd)
{
	/* the flags are loop-invariant: one loop per case, so each has no branch and vectorises */
	if (momentum == 0.0f) {
		for (size_t i = 0; i < n; i++) {
			float unused = 0;
			dlk_k_sgd(&p[i], g[i], &unused, lr, 0.0f, 0, wd);
		}
	} else if (nesterov) {
		for (size_t i = 0; i < n; i++)
			dlk_k_sgd(&p[i], g[i], &buf[i], lr, momentum, 1, wd);
	} else {
		for (size_t i = 0; i < n; i++)
			dlk_k_sgd(&p[i], g[i], &buf[i], lr, momentum, 0, wd);
	}
}

CLONES static void adam_seq(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                            size_t n, float lr, float beta1, float beta2, float eps, float wd, int decoupled,
                            float bc1, float bc2_sqrt)
{
	if (decoupled) {
		for (size_t i = 0; i < n; i++)
			dlk_k_adam(&p[i], g[i], &m[i], &v[i], lr, beta1, beta2, eps, wd, 1, bc1, bc2_sqrt);
	} else {
		for (size_t i = 0; i < n; i++)
			dlk_k_adam(&p[i], g[i], &m[i], &v[i], lr, beta1, beta2, eps, wd, 0, bc1, bc2_sqrt);
	}
}

static void cpu_sgd_update(float *p, const float *g, float *buf, size_t n, float lr, float momentum, int nesterov,
                           float wd)
{
	struct ew_job j = { .op = EW_SGD, .n = n, .a = lr, .b = momentum, .c = wd, .flag = nesterov, .y = p, .x = g,
	                    .m = buf };
	ew_run(&j);
}

static void cpu_adam_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                            float beta2, float eps, float wd, int decoupled, float bc1, float bc2_sqrt)
{
	struct ew_job j = { .op = EW_ADAM, .n = n, .a = lr, .b = beta1, .c = beta2, .d = eps, .e = wd,
	                    .f = bc1, .g = bc2_sqrt, .flag = decoupled, .y = p, .x = g, .m = m, .v = v };
	ew_run(&j);
}

static struct dlk_backend cpu_backend = {
	.abi = DLK_BACKEND_ABI,
	.name = "cpu",
	.device = "cpu (OpenBLAS)",
	.set_threads = cpu_set_threads,
	.set_precision = cpu_set_precision,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.to_device = cpu_copy,
	.to_host = cpu_copy,
	.copy = cpu_copy,
	.copy_rows = cpu_copy_rows,
	.check = cpu_check,
	.sgemm = cpu_sgemm,
	.dense_forward = cpu_dense_forward,
	.dense_backward_w = cpu_dense_backward_w,
	.dense_backward_x = cpu_dense_backward_x,
	.fill = cpu_fill,
	.scale = cpu_scale,
	.axpy = cpu_axpy,
	.sum_squares = cpu_sum_squares,
	.bias_act = cpu_bias_act,
	.act_forward = cpu_act_forward,
	.act_backward = cpu_act_backward,
	.sum_rows = cpu_sum_rows,
	.sum_cols = cpu_sum_cols,
	.dropout_forward = cpu_dropout_forward,
	.dropout_backward = cpu_dropout_backward,
	.im2col = cpu_im2col,
	.col2im = cpu_col2im,
	.conv_out = cpu_conv_out,
	.conv_grad_in = cpu_conv_grad_in,
	.maxpool_forward = dlk_cpu_maxpool_forward,
	.maxpool_backward = cpu_maxpool_backward,
	.softmax_ce = cpu_softmax_ce,
	.sgd_update = cpu_sgd_update,
	.adam_update = cpu_adam_update,
	.conv_forward = dlk_cpu_conv_forward,
	.conv_backward = dlk_cpu_conv_backward,
	.loss = cpu_loss,
	.layernorm_forward = dlk_cpu_layernorm_forward,
	.layernorm_backward = dlk_cpu_layernorm_backward,
	.gelu_forward = dlk_cpu_gelu_forward,
	.gelu_backward = dlk_cpu_gelu_backward,
	.softmax_forward = dlk_cpu_softmax_forward,
	.softmax_backward = dlk_cpu_softmax_backward,
	.embedding_forward = dlk_cpu_embedding_forward,
	.embedding_backward = dlk_cpu_embedding_backward,
	.upsample_forward = dlk_cpu_upsample_forward,
	.upsample_backward = dlk_cpu_upsample_backward,
	.attention_forward = dlk_cpu_attention_forward,
	.attention_backward = dlk_cpu_attention_backward,
	.rotary = dlk_cpu_rotary,
	.batchnorm_forward = dlk_cpu_batchnorm_forward,
	.batchnorm_backward = dlk_cpu_batchnorm_backward,
	.seqpool_forward = dlk_cpu_seqpool_forward,
	.seqpool_backward = dlk_cpu_seqpool_backward,
	.add = cpu_add,
	.batchnorm_relu_forward = dlk_cpu_batchnorm_relu_forward,
	.batchnorm_relu_backward = dlk_cpu_batchnorm_relu_backward,
};

const struct dlk_backend *dlk_backend_cpu(void)
{
	if (!strcmp(cpu_backend.device, "cpu (OpenBLAS)"))
		snprintf(cpu_backend.device, sizeof(cpu_backend.device), "cpu (OpenBLAS, %s kernels)",
		         openblas_get_corename());
	return &cpu_backend;
}
