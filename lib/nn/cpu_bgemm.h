/* Matrix products in bfloat16 on the CPU (training.precision: bf16).
 *
 * C = alpha * op(A) op(B) + beta * C, as cblas_sgemm (row-major), with every element of A and B
 * rounded to bfloat16 (to nearest, ties to even) and the products summed in fp32: PyTorch's
 * autocast to bf16 and cuBLAS' bf16 GEMMs with fp32 accumulation compute the same products. C and
 * everything around the product stay fp32. On a CPU with AVX512_BF16 (Intel Cooper Lake and
 * Sapphire Rapids, AMD Zen 4 and later) the products run on VDPBF16PS, twice the multiply-adds of
 * fp32 a cycle; elsewhere the same rounded operands are multiplied with fp32 FMAs (the same
 * results to fp32 rounding; with AVX-512F at about fp32's rate, without it slower). One thread: the caller cuts the product
 * into blocks (lib/nn/cpu.c). The results depend only on the shapes and on which of the two paths
 * runs, so they are the same bits run to run. */
#ifndef DLK_NN_CPU_BGEMM_H
#define DLK_NN_CPU_BGEMM_H

#include <stddef.h>
#include <stdint.h>

void dlk_bgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
               float beta, float *c, int ldc);

/* 1 when the products run on AVX512_BF16 instructions, 0 when they are emulated */
int dlk_bgemm_native(void);

/* tests: 1 makes dlk_bgemm emulate the products even where the CPU has AVX512_BF16 (with
 * AVX-512F where it has that), 2 with the plain C emulation, 0 restores the default. The
 * emulations give the same bits. */
void dlk_bgemm_force_emulation(int how);

/* The products of the convolutions (lib/nn/cpu_conv.c), on operands already rounded and paired:
 *
 *   C[m][0..n) = (acc ? C[m][0..n) : 0) + sum over p = 0 .. kp-1 of A(m, p) . B(p)[0..n)
 *
 * where A(m, p) is the pair of bf16 values at arow[m] + 2 p and B(p) the n pairs at B + boff[p]
 * (offsets in bf16 halves: a convolution's shifted windows are read in place), each pair's dot
 * product added as VDPBF16PS adds it (the high half's product first, then the low one's; each
 * exact in fp32). n is a multiple of 16. On AVX512_BF16 it runs on VDPBF16PS; elsewhere, and when
 * the emulation is forced, in plain C with the same sums (the convolutions call it only where
 * dlk_bgemm_native() is 1: the emulation is for the tests). */
void dlk_bgemm_rows(int m, int n, int kp, const uint16_t *const *arow, const uint16_t *b, const size_t *boff,
                    float *c, size_t ldc, int acc);

/* y[i] = x0[i] rounded in the low half, x1[i] rounded (0 where x1 is NULL) in the high, for n
 * values: two rows made one row of pairs */
void dlk_bf16_pair_rows(const float *x0, const float *x1, size_t n, uint32_t *y);

/* y[i] = x[i] rounded, for n values */
void dlk_bf16_round_rows(const float *x, size_t n, uint16_t *y);

/* x rounded to bfloat16, to nearest with ties to even (a NaN stays a quiet NaN) */
static inline uint16_t dlk_bf16_round(float x)
{
	union {
		float f;
		uint32_t u;
	} v = { .f = x };
	if ((v.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((v.u >> 16) | 0x40u);
	return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

static inline float dlk_bf16_float(uint16_t h)
{
	union {
		uint32_t u;
		float f;
	} v = { .u = (uint32_t)h << 16 };
	return v.f;
}

#endif
