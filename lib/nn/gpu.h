/* Loading the CUDA backend at run time: dlk never links CUDA; it dlopen()s libdlk-cuda.so
 * (built from gpu/ when nvcc exists) and resolves the one entry symbol DLK_BACKEND_ENTRY. */
#ifndef DLK_NN_GPU_H
#define DLK_NN_GPU_H

#include "lib/nn/backend.h"
#include "lib/util/err.h"

#define DLK_CUDA_LIB_NAME "libdlk-cuda.so"

/* Loads the CUDA backend. Looks at `path` when given, else $DLK_CUDA_LIB, else next to the
 * executable (../lib/dlk/ as installed, then build/ in a source tree), else the dynamic linker's
 * search path. Returns the backend, or NULL with an error saying which file was tried and why it
 * failed (missing library, missing symbol, ABI mismatch, no device). The library stays loaded
 * for the life of the process. */
const struct dlk_backend *dlk_backend_cuda(const char *path, struct dlk_err *err);

#endif
