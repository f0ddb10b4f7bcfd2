/* Loading the CUDA backend at run time: dlk never links CUDA; it dlopen()s libdlk-cuda.so
 * (built from gpu/ when the CUDA toolchain exists) and resolves its two entry symbols. */
#ifndef DLK_NN_GPU_H
#define DLK_NN_GPU_H

#include "lib/nn/backend.h"
#include "lib/util/err.h"

#define DLK_CUDA_LIB_NAME "libdlk-cuda.so"

/* Loads the CUDA backend and takes CUDA device `device`. Looks at `path` when given, else
 * $DLK_CUDA_LIB, else next to the executable (../lib/dlk/ as installed, then build/ in a source
 * tree), else the dynamic linker's search path. Returns the backend, or NULL with an error saying
 * which file was tried and exactly why it cannot be used (not built, a library it needs is
 * missing, no driver, driver too old, no such device, ABI mismatch). The library stays loaded for
 * the life of the process. */
const struct dlk_backend *dlk_backend_cuda(const char *path, int device, struct dlk_err *err);

/* What the CUDA backend finds on this machine, without taking a device (for `dlk version`):
 * 0 with p filled (p->usable, p->why ...), or -1 when the backend library itself cannot be
 * loaded, with err saying why. `path` as for dlk_backend_cuda(). */
int dlk_backend_cuda_probe(const char *path, struct dlk_device_probe *p, struct dlk_err *err);

#endif
