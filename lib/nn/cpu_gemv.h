/* One row through a dense layer on the CPU, for generation: a decode step has one position a
 * sequence, and OpenBLAS' GEMM (0.3.21) would pack the weights and pad the one row to its
 * kernel's block of rows on every call, a 16-fold waste. A matrix-vector product reads each weight
 * once. */
#ifndef DLK_NN_CPU_GEMV_H
#define DLK_NN_CPU_GEMV_H

/* y[n] = W[n, k] x[k] (W row-major, out x in, as a dense layer keeps it). */
void dlk_cpu_gemv(const float *W, const float *x, int k, int n, float *y);

#endif
