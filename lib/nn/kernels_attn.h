/* Attention's element formulas, shared by the CPU reference (lib/nn/cpu_attention.c) and the
 * CUDA kernels (gpu/attention.cu) so that both mask, drop and rotate identically. */
#ifndef DLK_NN_KERNELS_ATTN_H
#define DLK_NN_KERNELS_ATTN_H

#include "lib/nn/kernels.h"

/* The dropout multiplier of weight (b, h, i, j): dropout's counter-based mask at index
 * offset + ((b*heads + h)*T + i)*T + j, so the backward redraws what the forward drew. */
DLK_HD static inline float dlk_k_attn_drop(uint64_t seed, uint64_t offset, int b, int h, int i, int j, int heads, int T,
                                          float p)
{
	uint64_t idx = offset + (((uint64_t)b * (uint64_t)heads + (uint64_t)h) * (uint64_t)T + (uint64_t)i) * (uint64_t)T +
	               (uint64_t)j;
	return dlk_k_dropout_scale(seed, idx, p);
}

/* The angle of rotary pair k (0 <= k < hd/2) at position t: t * 10000^(-2k/hd), computed in
 * double as an exact-rounded float angle so both backends agree. */
DLK_HD static inline void dlk_k_rotary_cs(int t, int k, int hd, float *c, float *s)
{
	double inv = pow(10000.0, -2.0 * (double)k / (double)hd), a = (double)t * inv;
	*c = (float)cos(a);
	*s = (float)sin(a);
}

#endif
