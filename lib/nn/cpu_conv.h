/* The CPU backend's convolution and max-pooling (cpu_conv.c): one image at a time through a
 * cache-sized im2col and dlk's own register-blocked kernel, the images of a batch spread over the
 * process' thread pool (lib/util/parallel.h). */
#ifndef DLK_NN_CPU_CONV_H
#define DLK_NN_CPU_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "lib/nn/backend.h"

void dlk_cpu_conv_forward(const float *x, const float *w, const float *bias, const struct dlk_conv_shape *s,
                          int act, float *y, float *py, int32_t *pargmax);
void dlk_cpu_conv_backward(const float *x, const float *w, const float *y, const float *py, const float *dy,
                           const int32_t *argmax, const struct dlk_conv_shape *s, int act, float *dw, float *db,
                           float *dx);
void dlk_cpu_maxpool_forward(const float *x, int batch, int c, int h, int w, int size, int stride, int oh, int ow,
                             float *y, int32_t *argmax);

/* training.precision: bf16 non-zero makes the convolutions' products bf16 where they can run on
 * AVX512_BF16 (cpu_conv.c says which); dlk_cpu_conv_bf16() says whether they do on this CPU */
void dlk_cpu_conv_set_precision(int bf16);
int dlk_cpu_conv_bf16(void);

/* which kernel the CPU runs: "avx512", "avx2" or "baseline" (for tests and `dlk version`) */
const char *dlk_cpu_conv_isa(void);
/* tests only: force a kernel ("avx512", "avx2", "baseline"); returns -1 when the CPU lacks it */
int dlk_cpu_conv_force_isa(const char *isa);

#endif
