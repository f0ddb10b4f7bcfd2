/* The compute backend interface: one struct of function pointers per device.
 *
 * The model code (lib/nn/net.c) only ever calls through this struct, so the CPU backend
 * (lib/nn/cpu.c, OpenBLAS) and the CUDA backend (gpu/, cuBLAS, loaded with dlopen) are
 * interchangeable. Every float / int32 pointer passed to a backend function is a *device*
 * pointer obtained from that backend's alloc(); on the CPU backend that is ordinary memory.
 * Matrices are row-major. Backend functions do not fail individually (as with a GPU stream,
 * errors are sticky): call check() after a step to learn whether anything went wrong. */
#ifndef DLK_NN_BACKEND_H
#define DLK_NN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "lib/nn/kernels.h"

/* Bumped whenever the struct changes, so a stale libdlk-cuda.so is refused, not misused. */
#define DLK_BACKEND_ABI 1

struct dlk_backend {
	int abi;                  /* DLK_BACKEND_ABI */
	const char *name;         /* "cpu" or "cuda": recorded in bundles as the build */
	char device[128];         /* human-readable device description */

	/* threads for BLAS and any parallel loops; n <= 0 means all cores */
	void (*set_threads)(int n);
	/* zero-filled device memory, or NULL when out of memory */
	void *(*alloc)(size_t bytes);
	void (*free)(void *p);
	void (*to_device)(void *dst, const void *src, size_t bytes);
	void (*to_host)(void *dst, const void *src, size_t bytes);
	void (*copy)(void *dst, const void *src, size_t bytes);
	/* waits for queued work; returns 0, or -1 with a message in msg when a device error
	 * occurred since the last check */
	int (*check)(char *msg, size_t len);

	/* C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C; ta/tb non-zero = transposed */
	void (*sgemm)(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
	              const float *b, int ldb, float beta, float *c, int ldc);

	void (*fill)(float *x, size_t n, float v);
	void (*scale)(float *x, size_t n, float a);
	void (*axpy)(size_t n, float a, const float *x, float *y);   /* y += a * x */
	double (*sum_squares)(const float *x, size_t n);             /* in double */

	/* y[r, c] = act(y[r, c] + bias[c]) for a [rows, cols] matrix */
	void (*bias_act)(float *y, const float *bias, int rows, int cols, int act);
	void (*act_forward)(int act, const float *x, float *y, size_t n);
	/* dx = dy * act'(from the output y); dx may equal dy */
	void (*act_backward)(int act, const float *y, const float *dy, float *dx, size_t n);
	/* db[c] = sum over r of dy[r, c] */
	void (*sum_rows)(const float *dy, int rows, int cols, float *db);
	/* db[r] = sum over c of dy[r, c] */
	void (*sum_cols)(const float *dy, int rows, int cols, float *db);

	/* inverted dropout with the counter-based mask of kernels.h, element i uses index offset+i */
	void (*dropout_forward)(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset);
	void (*dropout_backward)(const float *dy, float *dx, size_t n, float p, uint64_t seed, uint64_t offset);

	/* x: [batch, c, h, w] -> col: [c*k*k, batch*oh*ow] (zero padding) */
	void (*im2col)(const float *x, int batch, int c, int h, int w, int k, int stride, int pad,
	               int oh, int ow, float *col);
	/* the adjoint: dx = sum of col's contributions (dx is overwritten) */
	void (*col2im)(const float *col, int batch, int c, int h, int w, int k, int stride, int pad,
	               int oh, int ow, float *dx);
	/* t: [f, batch*hw] -> y: [batch, f, hw] with y = act(t + bias[f]) */
	void (*conv_out)(const float *t, const float *bias, int batch, int f, int hw, int act, float *y);
	/* dy: [batch, f, hw] -> dt: [f, batch*hw] */
	void (*conv_grad_in)(const float *dy, int batch, int f, int hw, float *dt);

	/* x: [batch, c, h, w] -> y: [batch, c, oh, ow]; argmax[i] = index into x of y[i]'s max */
	void (*maxpool_forward)(const float *x, int batch, int c, int h, int w, int size, int stride,
	                        int oh, int ow, float *y, int32_t *argmax);
	/* dx (n_in elements, overwritten) = scatter-add of dy (n_out) through argmax */
	void (*maxpool_backward)(const float *dy, const int32_t *argmax, size_t n_out, size_t n_in, float *dx);

	/* mean softmax cross-entropy of logits [batch, k] against labels [batch] (device int32);
	 * dlogits (may be NULL) receives d(mean loss)/d(logits). Labels are in range (the caller
	 * checks datasets before training). */
	float (*softmax_ce)(const float *logits, const int32_t *labels, int batch, int k, float *dlogits);

	void (*sgd_update)(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
	                   int nesterov, float wd);
	void (*adam_update)(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
	                    float beta2, float eps, float wd, int decoupled, float bc1, float bc2_sqrt);
};

/* The always-present CPU backend (OpenBLAS). */
const struct dlk_backend *dlk_backend_cpu(void);

/* OpenBLAS picks its kernels from a table of the CPU models it knows, once, when it is loaded;
 * an OpenBLAS older than the CPU (Debian 12's 0.3.21 on a 2023 Xeon) falls back to its SSE3
 * ("Prescott") kernels, which run dlk's GEMMs 4x slower than its AVX-512 ones on the same CPU.
 * Only $OPENBLAS_CORETYPE, set before the library loads, changes that choice. Returns the core
 * type the running CPU should have ("SkylakeX" for AVX-512, "Haswell" for AVX2 + FMA) when
 * OpenBLAS chose an older one and $OPENBLAS_CORETYPE is unset, else NULL. The program decides
 * what to do with it (dlk re-executes itself with the variable set). */
const char *dlk_cpu_blas_coretype(void);

/* The symbol libdlk-cuda.so exports: returns its backend, or NULL with a message in msg when no
 * usable device is present. */
typedef const struct dlk_backend *(*dlk_backend_entry_fn)(char *msg, size_t len);
#define DLK_BACKEND_ENTRY "dlk_backend_cuda_entry"

#endif
