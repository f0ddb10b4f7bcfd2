/* What the files of the CUDA backend share (internal to gpu/; dlk sees only the entry symbols).
 *
 * One device per process, one compute stream on it: every kernel, GEMM and copy of the backend
 * runs on that stream in order, so the memory pool can hand a freed block out again at once and
 * the collectives (nccl.c) only need to wait for one point of one stream. Errors are sticky, as
 * the backend interface says: the first one is kept until check() reports it. */
#ifndef DLK_GPU_CUDA_H
#define DLK_GPU_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "lib/nn/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the compute stream and the device, valid once the entry point succeeded */
extern cudaStream_t dlk_cu_stream;
extern int dlk_cu_device;

/* Keeps the first error since the last check(): "what: CUDA's message". */
void dlk_cu_note(const char *what, cudaError_t e);
void dlk_cu_notef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* memory from the pool (zero-filled) */
void *dlk_cu_alloc(size_t bytes);
void dlk_cu_free(void *p);

/* the kernels (kernels.cu) and GEMMs (blas.cu) installed into the backend struct */
void dlk_cu_install_kernels(struct dlk_backend *b);
/* the losses (loss.cu) */
void dlk_cu_install_loss(struct dlk_backend *b);
/* the kernels of ABI 6's layer kinds (layers.cu) */
void dlk_cu_install_layers(struct dlk_backend *b);
/* attention (attention.cu) */
void dlk_cu_install_attention(struct dlk_backend *b);
/* batch normalisation, ABI 9 (batchnorm.cu) */
void dlk_cu_install_batchnorm(struct dlk_backend *b);
/* creates the cuBLAS handles on the current device and installs sgemm and dense_forward;
 * returns 0, or -1 with a message */
int dlk_cu_blas_init(struct dlk_backend *b, char *msg, size_t len);
void dlk_cu_blas_version(char *out, size_t len);

/* NCCL (nccl.c), loaded on first use */
extern const struct dlk_device_comm dlk_cu_nccl;

#ifdef __cplusplus
}
#endif

#endif
