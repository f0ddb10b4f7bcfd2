/* Matrix products in bfloat16 (lib/nn/cpu_bgemm.h): the operands rounded to nearest-even bf16,
 * the products summed in fp32, checked against the exact sum (in double) of the rounded
 * operands, within fp32's rounding of k sums; every transpose, ragged edges of the register
 * blocks, depths beyond one packed slice, odd depths, leading dimensions wider than the matrix,
 * alpha and beta. The emulations (plain C, and AVX-512F where the CPU has it) are checked on every
 * CPU and against each other (the same bits), the AVX512_BF16 path where the CPU has it, and
 * the native and emulated paths against each other. */
#include "tests/unit/check.h"

#include <stdint.h>
#include <stdlib.h>

#include "lib/nn/cpu_bgemm.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float bf(float x)
{
	return dlk_bf16_float(dlk_bf16_round(x));
}

static uint32_t bits(float x)
{
	union {
		float f;
		uint32_t u;
	} v = { .f = x };
	return v.u;
}

static float from_bits(uint32_t u)
{
	union {
		uint32_t u;
		float f;
	} v = { .u = u };
	return v.f;
}

static void test_round(void)
{
	CHECK_MSG(bf(1.0f) == 1.0f && bf(-2.5f) == -2.5f, "values with 8 significant bits stay");
	/* 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even one, 1 */
	CHECK_MSG(bf(1.0f + 0x1p-8f) == 1.0f, "a tie rounds to the even neighbour (down)");
	/* 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to the even one, 1 + 2^-6 */
	CHECK_MSG(bf(1.0f + 0x3p-8f) == 1.0f + 0x1p-6f, "a tie rounds to the even neighbour (up)");
	CHECK_MSG(bf(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f, "above half rounds up");
	CHECK_MSG(bf(from_bits(0x7f7fffffu)) == INFINITY, "the largest float rounds to infinity, as to nearest must");
	CHECK_MSG(bf(-INFINITY) == -INFINITY, "infinity stays");
	CHECK_MSG(isnan(bf(NAN)) && isnan(bf(from_bits(0x7f800001u))), "a NaN stays a NaN, even one whose payload is in the low half");
}

/* op(X)[r, c] of a row-major matrix with leading dimension ld */
static float at(const float *x, int t, int ld, int r, int c)
{
	return t ? x[(size_t)c * ld + r] : x[(size_t)r * ld + c];
}

/* the largest error of C against the exact product of the rounded operands, in units of fp32's
 * bound for k sums: 1 or less passes */
static double worst(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                    float beta, const float *c0, const float *c, int ldc)
{
	double w = 0;
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double s = 0, mag = 0;
			for (int p = 0; p < k; p++) {
				double x = (double)bf(at(a, ta, lda, i, p)) * bf(at(b, tb, ldb, p, j));
				s += x;
				mag += fabs(x);
			}
			double want = alpha * s + (beta != 0.0f ? beta * (double)c0[(size_t)i * ldc + j] : 0.0);
			double bound = (k + 3) * 0x1p-24 * (fabs(alpha) * mag + fabs(beta * c0[(size_t)i * ldc + j])) + 1e-30;
			double e = fabs(c[(size_t)i * ldc + j] - want) / bound;
			w = e > w ? e : w;
		}
	return w;
}

static void one(int ta, int tb, int m, int n, int k, float alpha, float beta, int pad, const char *path)
{
	int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
	size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
	float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb);
	float *c0 = malloc(sizeof(float) * nc), *c = malloc(sizeof(float) * nc), *c2 = malloc(sizeof(float) * nc);
	for (size_t i = 0; i < na; i++)
		a[i] = uniform();
	for (size_t i = 0; i < nb; i++)
		b[i] = uniform() * 3.0f;
	for (size_t i = 0; i < nc; i++)
		c0[i] = beta != 0.0f ? uniform() : NAN; /* beta 0: C must not be read */
	memcpy(c, c0, sizeof(float) * nc);
	memcpy(c2, c0, sizeof(float) * nc);
	dlk_bgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	dlk_bgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c2, ldc);
	double w = worst(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, c, ldc);
	int same = 1, pad_kept = 1;
	for (int i = 0; i < m; i++) {
		same &= !memcmp(c + (size_t)i * ldc, c2 + (size_t)i * ldc, sizeof(float) * n);
		for (int j = n; j < ldc; j++)
			pad_kept &= bits(c[(size_t)i * ldc + j]) == bits(c0[(size_t)i * ldc + j]);
	}
	CHECK_MSG(w <= 1.0, "%s: %s%s %dx%dx%d alpha %g beta %g ld +%d: within fp32's rounding of the rounded operands' "
	          "product (worst %.3f of the bound)", path, ta ? "T" : "N", tb ? "T" : "N", m, n, k, alpha, beta, pad, w);
	CHECK_MSG(same && pad_kept, "%s: %dx%dx%d: the same bits twice, and C's columns past n untouched", path, m, n, k);
	free(a);
	free(b);
	free(c0);
	free(c);
	free(c2);
}

static void sweep(const char *path)
{
	static const int shapes[][3] = { { 1, 1, 1 }, { 5, 7, 3 }, { 12, 32, 2 }, { 13, 33, 17 }, { 11, 16, 9 },
	                                 { 97, 65, 515 }, { 130, 520, 64 } };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int t = 0; t < 4; t++)
			one(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], s % 2 ? 0.5f : 1.0f, t == 3 ? 1.5f : 0.0f,
			    (int)s % 3, path);
	/* a product deeper and wider than one packed slice (KC 256, NC 512), transposed as a weight
	 * gradient is */
	one(1, 0, 70, 600, 700, 1.0f, 0.0f, 0, path);
	one(0, 1, 300, 40, 1030, 1.0f, 1.0f, 1, path);
}

/* one depth: C is the product of the two rounded values, exactly */
static void test_exact(const char *path)
{
	float a[2] = { 1.0f + 0x3p-8f, 3.0f }, b[2] = { 1.0f + 0x1p-8f, 1.0f + 0x1p-6f }, c[4];
	dlk_bgemm(0, 0, 2, 2, 1, 1.0f, a, 1, b, 2, 0.0f, c, 2);
	CHECK_MSG(c[0] == (1.0f + 0x1p-6f) * 1.0f && c[1] == (1.0f + 0x1p-6f) * (1.0f + 0x1p-6f) && c[2] == 3.0f &&
	              c[3] == 3.0f * (1.0f + 0x1p-6f),
	          "%s: a depth of one gives the products of the operands rounded to bf16 (%.9g %.9g %.9g %.9g)", path,
	          c[0], c[1], c[2], c[3]);
}

/* the two paths on the same operands: each within the bound, and near each other */
static void test_paths_agree(void)
{
	int m = 50, n = 70, k = 300;
	float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
	float *c1 = malloc(sizeof(float) * m * n), *c2 = malloc(sizeof(float) * m * n);
	for (int i = 0; i < m * k; i++)
		a[i] = uniform();
	for (int i = 0; i < k * n; i++)
		b[i] = uniform();
	dlk_bgemm_force_emulation(0);
	dlk_bgemm(0, 1, m, n, k, 1.0f, a, k, b, k, 0.0f, c1, n);
	dlk_bgemm_force_emulation(1);
	dlk_bgemm(0, 1, m, n, k, 1.0f, a, k, b, k, 0.0f, c2, n);
	dlk_bgemm_force_emulation(0);
	double d = 0;
	for (int i = 0; i < m * n; i++)
		d = fmax(d, fabs(c1[i] - c2[i]));
	CHECK_MSG(d < 1e-4, "AVX512_BF16 and the emulation agree to fp32's rounding of the sums (largest difference %g)", d);
	free(a);
	free(b);
	free(c1);
	free(c2);
}

/* the two emulations (AVX-512F and plain C) on the same operands: the same bits */
static void test_emulations_agree(void)
{
	int m = 37, n = 70, k = 301;
	float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
	float *c1 = malloc(sizeof(float) * m * n), *c2 = malloc(sizeof(float) * m * n);
	for (int i = 0; i < m * k; i++)
		a[i] = uniform();
	for (int i = 0; i < k * n; i++)
		b[i] = uniform();
	dlk_bgemm_force_emulation(1);
	dlk_bgemm(1, 0, m, n, k, 1.0f, a, m, b, n, 0.0f, c1, n);
	dlk_bgemm_force_emulation(2);
	dlk_bgemm(1, 0, m, n, k, 1.0f, a, m, b, n, 0.0f, c2, n);
	CHECK_MSG(!memcmp(c1, c2, sizeof(float) * m * n), "the AVX-512F emulation and the plain C one give the same bits");
	free(a);
	free(b);
	free(c1);
	free(c2);
}

/* the row conversions: dlk_bf16_round's values for every length up to past two vectors, ties both
 * ways, subnormals, infinities and NaNs, and nothing written past n */
static void test_row_rounding(void)
{
	float x0[40], x1[40];
	static const uint32_t special[] = { 0x3f808000u, 0x3f818000u, 0x00000001u, 0x807fffffu, 0x7f800000u,
		                            0xff800000u, 0x7f800001u, 0xffc00000u, 0x7f7fffffu, 0x00008000u };
	for (int i = 0; i < 40; i++) {
		x0[i] = i < 10 ? from_bits(special[i]) : uniform() * 100.0f;
		x1[i] = i >= 30 ? from_bits(special[i - 30]) : uniform();
	}
	int ok = 1;
	for (size_t n = 0; n <= 35; n++) {
		uint16_t h[40];
		uint32_t w[40], w1[40];
		memset(h, 0xab, sizeof(h));
		memset(w, 0xab, sizeof(w));
		memset(w1, 0xab, sizeof(w1));
		dlk_bf16_round_rows(x0, n, h);
		dlk_bf16_pair_rows(x0, x1, n, w);
		dlk_bf16_pair_rows(x1, NULL, n, w1);
		for (size_t i = 0; i < n; i++)
			ok &= h[i] == dlk_bf16_round(x0[i]) &&
			      w[i] == ((uint32_t)dlk_bf16_round(x0[i]) | (uint32_t)dlk_bf16_round(x1[i]) << 16) &&
			      w1[i] == dlk_bf16_round(x1[i]);
		for (size_t i = n; i < 40; i++)
			ok &= h[i] == 0xabab && w[i] == 0xababababu && w1[i] == 0xababababu;
	}
	CHECK_MSG(ok, "rows rounded and paired: dlk_bf16_round's values at every length 0-35 (ties, subnormals, "
	              "infinities, NaNs), nothing written past the row");
}

/* dlk_bgemm_rows (the convolutions' products): rows of A at odd and even offsets (a window of a
 * rounded image starts anywhere), windows of B that overlap, every tile shape (m 13: tiles of 8, 4
 * and single rows; n 80: 4 vectors then 1; n 32: 2), with and without accumulating into C; within
 * fp32's bound of the exact sums, and the same bits twice */
static void test_rows(const char *path)
{
	enum { M = 13, KP = 37, NA = 4096, NB = 8192 };
	static uint16_t ha[NA], hb[NB];
	const uint16_t *arow[M];
	size_t boff[KP];
	for (int i = 0; i < NA; i++)
		ha[i] = dlk_bf16_round(uniform());
	for (int i = 0; i < NB; i++)
		hb[i] = dlk_bf16_round(uniform() * 2.0f);
	for (int r = 0; r < M; r++)
		arow[r] = ha + 7 * r + 3 * (r % 2); /* odd and even halves */
	for (int p = 0; p < KP; p++)
		boff[p] = 2 * (size_t)(p * 37 % 61 + p); /* pairs start on a word */
	for (int nn = 0; nn < 2; nn++)
		for (int acc = 0; acc <= 1; acc++) {
			int n = nn ? 32 : 80, ldc = n + 3;
			float c0[M * 83], c[M * 83], c2[M * 83];
			for (int i = 0; i < M * ldc; i++)
				c0[i] = uniform();
			memcpy(c, c0, sizeof(c0));
			memcpy(c2, c0, sizeof(c0));
			dlk_bgemm_rows(M, n, KP, arow, hb, boff, c, (size_t)ldc, acc);
			dlk_bgemm_rows(M, n, KP, arow, hb, boff, c2, (size_t)ldc, acc);
			double w = 0;
			for (int r = 0; r < M; r++)
				for (int j = 0; j < n; j++) {
					double sum = acc ? c0[r * ldc + j] : 0, mag = fabs(sum);
					for (int p = 0; p < KP; p++)
						for (int h = 0; h < 2; h++) {
							double x = (double)dlk_bf16_float(arow[r][2 * p + h]) *
							           dlk_bf16_float(hb[boff[p] + 2 * (size_t)j + h]);
							sum += x;
							mag += fabs(x);
						}
					double e = fabs(c[r * ldc + j] - sum) / ((2 * KP + 3) * 0x1p-24 * mag + 1e-30);
					w = e > w ? e : w;
				}
			int kept = 1;
			for (int r = 0; r < M; r++)
				for (int j = n; j < ldc; j++)
					kept &= bits(c[r * ldc + j]) == bits(c0[r * ldc + j]);
			CHECK_MSG(w <= 1.0 && !memcmp(c, c2, sizeof(c)) && kept,
			          "%s: row-table products %dx%dx%d pairs%s: within fp32's rounding of the exact sums (worst "
			          "%.3f of the bound), the same bits twice, C past n untouched",
			          path, M, n, KP, acc ? ", added to C" : "", w);
		}
}

int main(void)
{
	test_round();
	test_row_rounding();
	int native = dlk_bgemm_native();
	printf("# this CPU %s AVX512_BF16\n", native ? "has" : "does not have");
	dlk_bgemm_force_emulation(2);
	CHECK_MSG(!dlk_bgemm_native(), "the emulation can be forced");
	sweep("plain C emulation");
	test_exact("plain C emulation");
	dlk_bgemm_force_emulation(1);
	sweep("emulated (AVX-512F where the CPU has it)");
	test_exact("emulated (AVX-512F where the CPU has it)");
	test_emulations_agree();
	test_rows("emulated");
	dlk_bgemm_force_emulation(0);
	if (native) {
		test_rows("AVX512_BF16");
		sweep("AVX512_BF16");
		test_exact("AVX512_BF16");
		test_paths_agree();
	}
	return CHECK_DONE();
}
