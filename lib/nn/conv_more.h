/* Grouped (and depthwise) convolution and transposed convolution, written once over the backend
 * interface's primitives (im2col, col2im, sgemm, conv_out, conv_grad_in, sum_cols), so the same
 * code runs on the CPU backend (the reference) and on the CUDA backend, and test_nn_gpu checks
 * one against the other. Layouts are PyTorch's, so its modules load the weights by shape:
 *   conv2d, groups G:    x [B, C, H, W], w [F, C/G, k, k], y [B, F, OH, OW]  (nn.Conv2d)
 *   convtranspose2d:     x [B, C, H, W], w [C, F, k, k],   y [B, F, OH, OW]  (nn.ConvTranspose2d)
 *     with OH = (H - 1) * stride - 2 * pad + k + out_pad, 0 <= out_pad < stride
 * Every function takes a scratch buffer of the backend's memory at least *_scratch() floats
 * long; its contents are of no meaning between calls. */
#ifndef DLK_NN_CONV_MORE_H
#define DLK_NN_CONV_MORE_H

#include <stddef.h>

#include "lib/nn/backend.h"

struct dlk_conv_more {
	int batch, c, h, w, f, k, stride, pad, oh, ow;
	int groups;  /* grouped conv2d: C and F multiples of it (C = F = groups: depthwise) */
	int out_pad; /* transposed: the extra rows/columns at the bottom/right */
};

/* Fills s->oh, s->ow from the rest; 0, or -1 when the sizes give no output or break a rule above
 * (the caller has said which layer, this only says whether). */
int dlk_conv_grouped_shape(struct dlk_conv_more *s);
int dlk_convt_shape(struct dlk_conv_more *s);

size_t dlk_conv_grouped_scratch(const struct dlk_conv_more *s);
/* y = act(conv(x, w) + bias) */
void dlk_conv_grouped_forward(const struct dlk_backend *b, const float *x, const float *w, const float *bias,
                              const struct dlk_conv_more *s, int act, float *scratch, float *y);
/* dt: the gradient of the pre-activation [B, F, OH, OW]; dw, db overwritten; dx overwritten
 * unless NULL */
void dlk_conv_grouped_backward(const struct dlk_backend *b, const float *x, const float *w, const float *dt,
                               const struct dlk_conv_more *s, float *scratch, float *dw, float *db, float *dx);

size_t dlk_convt_scratch(const struct dlk_conv_more *s);
/* y = act(convtranspose(x, w) + bias) */
void dlk_convt_forward(const struct dlk_backend *b, const float *x, const float *w, const float *bias,
                       const struct dlk_conv_more *s, int act, float *scratch, float *y);
/* as dlk_conv_grouped_backward */
void dlk_convt_backward(const struct dlk_backend *b, const float *x, const float *w, const float *dt,
                        const struct dlk_conv_more *s, float *scratch, float *dw, float *db, float *dx);

#endif
