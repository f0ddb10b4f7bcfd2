/* The CPU backend's reference for the layer kinds of ABI 6 (lib/nn/backend.h says what each
 * promises): layer normalisation (cpu_layernorm.c), GELU and softmax (cpu_gelu.c,
 * cpu_softmax.c), embedding (cpu_embedding.c) and upsampling (cpu_upsample.c). Each splits its work
 * over the thread pool by output (rows, columns or planes), so results are the same bits run to
 * run; sums over rows (a layer norm's dw, an embedding's repeated ids) add in row order. */
#ifndef DLK_NN_CPU_LAYERS_H
#define DLK_NN_CPU_LAYERS_H

#include <stddef.h>
#include <stdint.h>

void dlk_cpu_layernorm_forward(const float *x, const float *w, const float *b, int rows, int n, float eps, float *y,
                               float *mean, float *rstd);
void dlk_cpu_layernorm_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                const float *dy, int rows, int n, float *dx, float *dw, float *db);
void dlk_cpu_gelu_forward(int approx, const float *x, float *y, size_t n);
void dlk_cpu_gelu_backward(int approx, const float *x, const float *dy, float *dx, size_t n);
void dlk_cpu_softmax_forward(const float *x, float *y, int rows, int n);
void dlk_cpu_softmax_backward(const float *y, const float *dy, float *dx, int rows, int n);
void dlk_cpu_embedding_forward(const float *ids, const float *table, int count, int vocab, int dim, float *y);
void dlk_cpu_embedding_backward(const float *ids, const float *dy, int count, int vocab, int dim, float *dtable);
void dlk_cpu_upsample_forward(const float *x, int planes, int h, int w, int scale, int mode, float *y);
void dlk_cpu_upsample_backward(const float *dy, int planes, int h, int w, int scale, int mode, float *dx);

/* attention (cpu_attention.c): backend.h's attention_forward, attention_backward and rotary */
struct dlk_attn_shape;
void dlk_cpu_attention_forward(const struct dlk_attn_shape *s, const float *qkv, float *out, float *lse);
void dlk_cpu_attention_backward(const struct dlk_attn_shape *s, const float *qkv, const float *out, const float *lse,
                                const float *dout, float *dqkv);
void dlk_cpu_rotary(float *qkv, int batch, int T, int heads, int hd, int pos0, int inverse);
/* batch normalisation (cpu_batchnorm.c), ABI 9 */
void dlk_cpu_batchnorm_forward(const float *x, const float *w, const float *b, int batch, int c, int hw, float eps,
                               float momentum, int training, float *running_mean, float *running_var,
                               float *num_batches, float *y, float *mean, float *rstd);
void dlk_cpu_batchnorm_relu_forward(const float *x, const float *w, const float *b, int batch, int c, int hw,
                                    float eps, float momentum, int training, float *running_mean, float *running_var,
                                    float *num_batches, float *y, float *mean, float *rstd);
void dlk_cpu_batchnorm_relu_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                     const float *y, const float *dy, int batch, int c, int hw, float *dx, float *dw,
                                     float *db);
void dlk_cpu_batchnorm_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                const float *dy, int batch, int c, int hw, float *dx, float *dw, float *db);

/* masked mean pooling over a sequence (cpu_seqpool.c), ABI 10 */
void dlk_cpu_seqpool_forward(const float *x, const float *ids, float pad, int batch, int T, int D, float *y);
void dlk_cpu_seqpool_backward(const float *dy, const float *ids, float pad, int batch, int T, int D, float *dx);

/* how many parts to cut `work` units into: one per thread, none smaller than `grain` units */
int dlk_cpu_parts(size_t work, size_t grain);

#endif
