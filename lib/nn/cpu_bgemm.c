/* Matrix products in bfloat16 on the CPU (lib/nn/cpu_bgemm.h says what they compute).
 *
 * Blocked as OpenBLAS and BLIS block theirs: a KC-deep slice of op(B), NC columns wide, is rounded
 * to bf16 and packed into panels of NR columns; an MC-row slice of op(A) the same into panels of MR
 * rows; a micro-kernel multiplies one A panel by one B panel into an MR x NR block of C held in
 * registers. The k dimension is packed in pairs, as VDPBF16PS reads it: a B panel holds, for each
 * pair (k, k+1), the NR columns' two values side by side (64 bf16 = two zmm registers), and an A
 * panel each row's two values as one 32-bit word, broadcast to a register. A B panel (16 KiB) stays
 * in L1 while it meets every A panel of the slice (48 KiB, in L2). Rounding happens in the packing,
 * which reads each operand once per slice, as any GEMM's packing does. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define BGEMM_X86 1
#endif

#include "lib/nn/cpu_bgemm.h"
#include "lib/nn/kernels.h"
#include "lib/util/mem.h"

#define MR 12
#define NR 32
#define KC 256 /* even: k is packed in pairs */
#define MC (8 * MR)
#define NC 512

static int force_emulation;

void dlk_bgemm_force_emulation(int how)
{
	force_emulation = how;
}

static int cpu_has_bf16(void)
{
#ifdef BGEMM_X86
	static int known = -1;
	if (known < 0) {
		unsigned a = 0, b = 0, c = 0, d = 0;
		__builtin_cpu_init();
		/* CPUID.(EAX=7,ECX=1):EAX bit 5 is AVX512_BF16; AVX-512 itself also needs the OS's
		 * consent, which __builtin_cpu_supports checks through XGETBV */
		int bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
		known = bf16 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		        __builtin_cpu_supports("avx512vl");
	}
	return known;
#else
	return 0;
#endif
}

int dlk_bgemm_native(void)
{
	return !force_emulation && cpu_has_bf16();
}

/* Rounding, in loops that vectorise (the NaN test a select, not a branch); the same values as
 * dlk_bf16_round */
static inline uint32_t round_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof(u));
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x40u;
	return (u & 0x7fffffffu) > 0x7f800000u ? q : r;
}

/* y[j] = x[j] rounded, for n values; then zeros up to an even count */
DLK_CPU_CLONES static void round_row(const float *restrict x, int n, uint16_t *restrict y)
{
	for (int j = 0; j < n; j++)
		y[j] = (uint16_t)round_bits(x[j]);
	if (n & 1)
		y[n] = 0;
}

DLK_CPU_CLONES void dlk_bf16_round_rows(const float *restrict x, size_t n, uint16_t *restrict y)
{
	for (size_t j = 0; j < n; j++)
		y[j] = (uint16_t)round_bits(x[j]);
}

DLK_CPU_CLONES void dlk_bf16_pair_rows(const float *restrict x0, const float *restrict x1, size_t n,
                                       uint32_t *restrict y)
{
	if (x1)
		for (size_t j = 0; j < n; j++)
			y[j] = round_bits(x0[j]) | round_bits(x1[j]) << 16;
	else
		for (size_t j = 0; j < n; j++)
			y[j] = round_bits(x0[j]);
}

/* Two depths of rows (x0 and x1, or x1 NULL: zeros) rounded into pairs, then cut into panels of
 * `width` words: panel q's words for this pair of depths sit at dst + q * stride. The pairs are
 * made over the whole row at once (one vectorised pass) and copied out a panel at a time. */
static void pair_rows_to_panels(const float *x0, const float *x1, int n, int width, size_t stride, uint32_t *dst,
                                uint32_t *row)
{
	dlk_bf16_pair_rows(x0, x1, (size_t)n, row);
	for (int q = 0; q * width < n; q++) {
		int w = n - q * width < width ? n - q * width : width;
		memcpy(dst + (size_t)q * stride, row + (size_t)q * width, sizeof(uint32_t) * (size_t)w);
	}
}

/* One operand's slice into panels of `width` (MR rows of op(A), or NR columns of op(B)): for each
 * pair of depths k0 + 2p, k0 + 2p + 1, each panel's `width` lines (rows of op(A), columns of op(B))
 * hold their two values rounded as one word (the even depth's in the low half); lines past n and
 * an odd depth's last half are zero. Line o0 + l at depth k is x[k * ld + o0 + l] when by_depth
 * (op(A) transposed, op(B) not), else x[(o0 + l) * ld + k]. tmp: room for kc + 1 halves; row: for
 * n words. */
static void pack(int by_depth, const float *x, int ld, int o0, int n, int k0, int kc, int width, uint32_t *dst,
                 uint16_t *tmp, uint32_t *row)
{
	int kp = (kc + 1) / 2;
	size_t stride = (size_t)kp * width; /* words of one panel */
	if (by_depth) {
		/* a depth's lines are contiguous: two depths make one pair of rows, read once for every
		 * panel (reading a panel's width of many rows at a power-of-two stride would meet the
		 * same few cache sets) */
		for (int p = 0; p < kp; p++) {
			const float *r0 = x + (size_t)(k0 + 2 * p) * ld + o0;
			pair_rows_to_panels(r0, kc - 2 * p > 1 ? r0 + ld : NULL, n, width, stride, dst + (size_t)p * width, row);
		}
	} else {
		/* a line's depths are contiguous: rounded in a row, its pairs are words, set in place */
		for (int l = 0; l < n; l++) {
			uint32_t *panel = dst + (size_t)(l / width) * stride + l % width;
			round_row(x + (size_t)(o0 + l) * ld + k0, kc, tmp);
			for (int p = 0; p < kp; p++)
				panel[(size_t)p * width] = (uint32_t)tmp[2 * p] | (uint32_t)tmp[2 * p + 1] << 16;
		}
	}
	if (n % width) {
		uint32_t *panel = dst + (size_t)(n / width) * stride;
		for (int p = 0; p < kp; p++)
			for (int l = n % width; l < width; l++)
				panel[(size_t)p * width + l] = 0;
	}
}

/* C's mr x nr block = alpha * acc + beta * C (C not read when beta is 0) */
static void store(const float *acc, float *c, int ldc, int mr, int nr, float alpha, float beta)
{
	for (int r = 0; r < mr; r++) {
		float *row = c + (size_t)r * ldc;
		const float *x = acc + r * NR;
		if (beta == 0.0f)
			for (int j = 0; j < nr; j++)
				row[j] = alpha * x[j];
		else
			for (int j = 0; j < nr; j++)
				row[j] = alpha * x[j] + beta * row[j];
	}
}

/* The emulation: each pair as VDPBF16PS adds it (the odd depth's product first, then the even
 * one's; each product of two bf16 values is exact in fp32, so only the sums round). */
DLK_CPU_CLONES static void kernel_emulated(int kp, const uint32_t *ap, const uint32_t *bp, float *c, int ldc, int mr,
                                           int nr, float alpha, float beta)
{
	float acc[MR * NR];
	memset(acc, 0, sizeof(acc));
	for (int p = 0; p < kp; p++) {
		float b0[NR], b1[NR];
		const uint32_t *bq = bp + (size_t)p * NR;
		for (int j = 0; j < NR; j++) {
			b0[j] = dlk_bf16_float((uint16_t)bq[j]);
			b1[j] = dlk_bf16_float((uint16_t)(bq[j] >> 16));
		}
		for (int r = 0; r < MR; r++) {
			uint32_t w = ap[(size_t)p * MR + r];
			float a0 = dlk_bf16_float((uint16_t)w), a1 = dlk_bf16_float((uint16_t)(w >> 16));
			float *x = acc + r * NR;
			for (int j = 0; j < NR; j++) {
				float t = x[j] + a1 * b1[j];
				x[j] = t + a0 * b0[j];
			}
		}
	}
	store(acc, c, ldc, mr, nr, alpha, beta);
}

#ifdef BGEMM_X86
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

BF16_TARGET static void kernel_native(int kp, const uint32_t *ap, const uint32_t *bp, float *c, int ldc, int mr,
                                      int nr, float alpha, float beta)
{
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
	       c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00,
	       c81 = c00, c90 = c00, c91 = c00, ca0 = c00, ca1 = c00, cb0 = c00, cb1 = c00;
	for (int p = 0; p < kp; p++) {
		__m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)(bp + (size_t)p * NR));
		__m512bh b1 = (__m512bh)_mm512_loadu_si512((const void *)(bp + (size_t)p * NR + 16));
		const uint32_t *aq = ap + (size_t)p * MR;
#define ROW(r, x0, x1)                                                          \
	do {                                                                    \
		__m512bh av = (__m512bh)_mm512_set1_epi32((int)aq[r]);           \
		x0 = _mm512_dpbf16_ps(x0, av, b0);                              \
		x1 = _mm512_dpbf16_ps(x1, av, b1);                              \
	} while (0)
		ROW(0, c00, c01);
		ROW(1, c10, c11);
		ROW(2, c20, c21);
		ROW(3, c30, c31);
		ROW(4, c40, c41);
		ROW(5, c50, c51);
		ROW(6, c60, c61);
		ROW(7, c70, c71);
		ROW(8, c80, c81);
		ROW(9, c90, c91);
		ROW(10, ca0, ca1);
		ROW(11, cb0, cb1);
#undef ROW
	}
	__m512 acc[2 * MR] = { c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51,
	                       c60, c61, c70, c71, c80, c81, c90, c91, ca0, ca1, cb0, cb1 };
	__m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	__mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
	__mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
	for (int r = 0; r < mr; r++) {
		float *row = c + (size_t)r * ldc;
		__m512 x0 = _mm512_mul_ps(va, acc[2 * r]), x1 = _mm512_mul_ps(va, acc[2 * r + 1]);
		if (beta != 0.0f) {
			x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), x0);
			x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), x1);
		}
		_mm512_mask_storeu_ps(row, m0, x0);
		_mm512_mask_storeu_ps(row + 16, m1, x1);
	}
}

/* The emulation on AVX-512F without BF16 (Skylake-X, Cascade Lake): the same sums as
 * kernel_emulated, in the same order (a bf16 value is the high half of a float: its even-depth
 * value shifted up, its odd-depth one masked), 24 accumulators in registers, four FMAs a row and
 * pair: fp32's rate. */
#define F512_TARGET __attribute__((target("avx512f")))

F512_TARGET static void kernel_f32(int kp, const uint32_t *ap, const uint32_t *bp, float *c, int ldc, int mr, int nr,
                                  float alpha, float beta)
{
	__m512 acc[2 * MR];
	for (int i = 0; i < 2 * MR; i++)
		acc[i] = _mm512_setzero_ps();
	const __m512i hi_mask = _mm512_set1_epi32((int)0xffff0000u);
	for (int p = 0; p < kp; p++) {
		__m512i w0 = _mm512_loadu_si512((const void *)(bp + (size_t)p * NR));
		__m512i w1 = _mm512_loadu_si512((const void *)(bp + (size_t)p * NR + 16));
		__m512 e0 = _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), o0 = _mm512_castsi512_ps(_mm512_and_si512(w0, hi_mask));
		__m512 e1 = _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), o1 = _mm512_castsi512_ps(_mm512_and_si512(w1, hi_mask));
		const uint32_t *aq = ap + (size_t)p * MR;
#pragma GCC unroll 12
		for (int r = 0; r < MR; r++) {
			__m512 ae = _mm512_set1_ps(dlk_bf16_float((uint16_t)aq[r]));
			__m512 ao = _mm512_set1_ps(dlk_bf16_float((uint16_t)(aq[r] >> 16)));
			acc[2 * r] = _mm512_fmadd_ps(ae, e0, _mm512_fmadd_ps(ao, o0, acc[2 * r]));
			acc[2 * r + 1] = _mm512_fmadd_ps(ae, e1, _mm512_fmadd_ps(ao, o1, acc[2 * r + 1]));
		}
	}
	__m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	__mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
	__mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
	for (int r = 0; r < mr; r++) {
		float *row = c + (size_t)r * ldc;
		__m512 x0 = _mm512_mul_ps(va, acc[2 * r]), x1 = _mm512_mul_ps(va, acc[2 * r + 1]);
		if (beta != 0.0f) {
			x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), x0);
			x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), x1);
		}
		_mm512_mask_storeu_ps(row, m0, x0);
		_mm512_mask_storeu_ps(row + 16, m1, x1);
	}
}

/* dlk_bgemm_rows' tile: mr rows of C by nv vectors of 16 columns, in registers (mr x nv <= 16:
 * 4 x 4, 8 x 2, 8 x 1, or a last row), B's vectors loaded once a pair for every row */
BF16_TARGET static inline __attribute__((always_inline)) void rows_tile(const int mr, const int nv, int kp,
                                                                        const uint16_t *const *arow,
                                                                        const uint16_t *restrict b,
                                                                        const size_t *restrict boff,
                                                                        float *restrict c, size_t ldc, int acc)
{
	__m512 x[8][4];
	const uint16_t *a[8];
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
		a[r] = arow[r];
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
		_Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)
			x[r][v] = acc ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
	for (int p = 0; p < kp; p++) {
		const uint16_t *bp = b + boff[p];
		__m512bh bv[4];
		_Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)
			bv[v] = (__m512bh)_mm512_loadu_si512((const void *)(bp + 32 * v));
		_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) {
			uint32_t w;
			memcpy(&w, a[r] + 2 * (size_t)p, sizeof(w));
			__m512bh av = (__m512bh)_mm512_set1_epi32((int)w);
			_Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)
				x[r][v] = _mm512_dpbf16_ps(x[r][v], av, bv[v]);
		}
	}
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
		_Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)
			_mm512_storeu_ps(c + r * ldc + 16 * v, x[r][v]);
}

BF16_TARGET static void rows_native(int m, int n, int kp, const uint16_t *const *arow, const uint16_t *b,
                                    const size_t *boff, float *c, size_t ldc, int acc)
{
#define TILE(MR)                                                                                              \
	switch (nv) {                                                                                         \
	case 1: rows_tile(MR, 1, kp, arow + r, b + 2 * (size_t)n0, boff, c + r * ldc + n0, ldc, acc); break; \
	case 2: rows_tile(MR, 2, kp, arow + r, b + 2 * (size_t)n0, boff, c + r * ldc + n0, ldc, acc); break; \
	case 3: rows_tile(MR, 3, kp, arow + r, b + 2 * (size_t)n0, boff, c + r * ldc + n0, ldc, acc); break; \
	default: rows_tile(MR, 4, kp, arow + r, b + 2 * (size_t)n0, boff, c + r * ldc + n0, ldc, acc); break; \
	}
	for (int n0 = 0; n0 < n; n0 += 64) {
		int nv = (n - n0) / 16;
		nv = nv > 4 ? 4 : nv;
		size_t r = 0;
		if (nv <= 2)
			for (; r + 8 <= (size_t)m; r += 8)
				TILE(8)
		for (; r + 4 <= (size_t)m; r += 4)
			TILE(4)
		for (; r < (size_t)m; r++)
			TILE(1)
	}
#undef TILE
}

static int cpu_has_avx512f(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}
#endif

void dlk_bgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
               float beta, float *c, int ldc)
{
	if (m <= 0 || n <= 0)
		return;
	if (k <= 0 || alpha == 0.0f) {
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++)
				c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
		return;
	}
	int native = dlk_bgemm_native(), f512 = 0;
#ifdef BGEMM_X86
	f512 = !native && force_emulation != 2 && cpu_has_avx512f();
#endif
	int nc_max = n < NC ? n : NC, kc_max = k < KC ? k : KC, mc_max = m < MC ? m : MC;
	int slices = (k + KC - 1) / KC;
	size_t kp_max = (size_t)(kc_max + 1) / 2;
	size_t a_words = (size_t)((mc_max + MR - 1) / MR) * MR * kp_max;
	size_t b_slice = (size_t)((nc_max + NR - 1) / NR) * NR * kp_max; /* words of one packed slice of B */
	uint32_t *ap = xmalloc(a_words * sizeof(uint32_t));
	uint32_t *bp = xmalloc(b_slice * slices * sizeof(uint32_t));
	uint16_t *tmp = xmalloc(sizeof(uint16_t) * (size_t)(kc_max + 2));
	uint32_t *row = xmalloc(sizeof(uint32_t) * (size_t)(nc_max > mc_max ? nc_max : mc_max));
	for (int jc = 0; jc < n; jc += NC) {
		int nc = n - jc < NC ? n - jc : NC;
		/* all of B's depth for these columns, packed once: each block of C's rows then goes
		 * through every slice while it stays in L2 */
		for (int pc = 0; pc < k; pc += KC)
			pack(!tb, b, ldb, jc, nc, pc, k - pc < KC ? k - pc : KC, NR, bp + b_slice * (size_t)(pc / KC), tmp, row);
		for (int ic = 0; ic < m; ic += MC) {
			int mc = m - ic < MC ? m - ic : MC;
			for (int pc = 0; pc < k; pc += KC) {
				int kc = k - pc < KC ? k - pc : KC, kp = (kc + 1) / 2;
				float bt = pc == 0 ? beta : 1.0f;
				const uint32_t *bs = bp + b_slice * (size_t)(pc / KC);
				pack(ta, a, lda, ic, mc, pc, kc, MR, ap, tmp, row);
				for (int jr = 0; jr < nc; jr += NR) {
					int nr = nc - jr < NR ? nc - jr : NR;
					const uint32_t *bpanel = bs + (size_t)(jr / NR) * kp * NR;
					for (int ir = 0; ir < mc; ir += MR) {
						int mr = mc - ir < MR ? mc - ir : MR;
						const uint32_t *apanel = ap + (size_t)(ir / MR) * kp * MR;
						float *cb = c + (size_t)(ic + ir) * ldc + jc + jr;
#ifdef BGEMM_X86
						if (native) {
							kernel_native(kp, apanel, bpanel, cb, ldc, mr, nr, alpha, bt);
							continue;
						}
						if (f512) {
							kernel_f32(kp, apanel, bpanel, cb, ldc, mr, nr, alpha, bt);
							continue;
						}
#endif
						kernel_emulated(kp, apanel, bpanel, cb, ldc, mr, nr, alpha, bt);
					}
				}
			}
		}
	}
	(void)native;
	(void)f512;
	free(ap);
	free(bp);
	free(tmp);
	free(row);
}

/* dlk_bgemm_rows without AVX512_BF16: the same sums as VDPBF16PS adds them (kernel_emulated's) */
static void rows_emulated(int m, int n, int kp, const uint16_t *const *arow, const uint16_t *b, const size_t *boff,
                          float *c, size_t ldc, int acc)
{
	for (int r = 0; r < m; r++) {
		float *row = c + (size_t)r * ldc;
		for (int j = 0; j < n; j++) {
			float x = acc ? row[j] : 0.0f;
			for (int p = 0; p < kp; p++) {
				const uint16_t *a = arow[r] + 2 * (size_t)p, *bq = b + boff[p] + 2 * (size_t)j;
				float t = x + dlk_bf16_float(a[1]) * dlk_bf16_float(bq[1]);
				x = t + dlk_bf16_float(a[0]) * dlk_bf16_float(bq[0]);
			}
			row[j] = x;
		}
	}
}

void dlk_bgemm_rows(int m, int n, int kp, const uint16_t *const *arow, const uint16_t *b, const size_t *boff,
                    float *c, size_t ldc, int acc)
{
#ifdef BGEMM_X86
	if (dlk_bgemm_native()) {
		rows_native(m, n, kp, arow, b, boff, c, ldc, acc);
		return;
	}
#endif
	rows_emulated(m, n, kp, arow, b, boff, c, ldc, acc);
}
