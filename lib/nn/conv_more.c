/* Grouped and transposed convolution over the backend's primitives (conv_more.h says why).
 *
 * Grouped: im2col of the whole input puts channel ch's k*k rows at ch*k*k, so group g's rows of
 * the column matrix, of the weights and of the output are each one contiguous block, and the
 * convolution is one GEMM per group between those blocks.
 *
 * Transposed: convtranspose2d is the input gradient of a conv2d whose input is y and whose output
 * is x, with the same [C, F, k, k] weights: the GEMM Wᵀx gives the columns, col2im scatters them
 * into y. Its backward is that conv2d's forward (im2col of dy, the GEMM with W). The bias and the
 * batch layout go through conv_grad_in / conv_out, which move [B, F, hw] to [F, B*hw] and back. */
#include "lib/nn/conv_more.h"

int dlk_conv_grouped_shape(struct dlk_conv_more *s)
{
	if (s->batch <= 0 || s->c <= 0 || s->h <= 0 || s->w <= 0 || s->f <= 0 || s->k <= 0 || s->stride <= 0 ||
	    s->pad < 0 || s->groups <= 0 || s->c % s->groups || s->f % s->groups)
		return -1;
	s->oh = (s->h + 2 * s->pad - s->k) / s->stride + 1;
	s->ow = (s->w + 2 * s->pad - s->k) / s->stride + 1;
	return s->h + 2 * s->pad >= s->k && s->w + 2 * s->pad >= s->k ? 0 : -1;
}

int dlk_convt_shape(struct dlk_conv_more *s)
{
	if (s->batch <= 0 || s->c <= 0 || s->h <= 0 || s->w <= 0 || s->f <= 0 || s->k <= 0 || s->stride <= 0 ||
	    s->pad < 0 || s->out_pad < 0 || s->out_pad >= s->stride)
		return -1;
	s->oh = (s->h - 1) * s->stride - 2 * s->pad + s->k + s->out_pad;
	s->ow = (s->w - 1) * s->stride - 2 * s->pad + s->k + s->out_pad;
	return s->oh > 0 && s->ow > 0 ? 0 : -1;
}

static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

size_t dlk_conv_grouped_scratch(const struct dlk_conv_more *s)
{
	size_t cols = (size_t)s->batch * s->oh * s->ow, ckk = (size_t)s->c * s->k * s->k;
	/* the columns, and the output's [F, B*OH*OW] form */
	return ckk * cols + (size_t)s->f * cols;
}

void dlk_conv_grouped_forward(const struct dlk_backend *b, const float *x, const float *w, const float *bias,
                              const struct dlk_conv_more *s, int act, float *scratch, float *y)
{
	int G = s->groups, cg = s->c / G, fg = s->f / G, kk = s->k * s->k, ohw = s->oh * s->ow;
	size_t cols = (size_t)s->batch * ohw;
	float *col = scratch, *t = scratch + (size_t)s->c * kk * cols;
	b->im2col(x, s->batch, s->c, s->h, s->w, s->k, s->stride, s->pad, s->oh, s->ow, col);
	for (int g = 0; g < G; g++)
		b->sgemm(0, 0, fg, (int)cols, cg * kk, 1.0f, w + (size_t)g * fg * cg * kk, cg * kk,
		         col + (size_t)g * cg * kk * cols, (int)cols, 0.0f, t + (size_t)g * fg * cols, (int)cols);
	b->conv_out(t, bias, s->batch, s->f, ohw, act, y);
}

void dlk_conv_grouped_backward(const struct dlk_backend *b, const float *x, const float *w, const float *dt,
                               const struct dlk_conv_more *s, float *scratch, float *dw, float *db, float *dx)
{
	int G = s->groups, cg = s->c / G, fg = s->f / G, kk = s->k * s->k, ohw = s->oh * s->ow;
	size_t cols = (size_t)s->batch * ohw;
	float *col = scratch, *t = scratch + (size_t)s->c * kk * cols;
	b->conv_grad_in(dt, s->batch, s->f, ohw, t);
	b->sum_cols(t, s->f, (int)cols, db);
	b->im2col(x, s->batch, s->c, s->h, s->w, s->k, s->stride, s->pad, s->oh, s->ow, col);
	for (int g = 0; g < G; g++)
		b->sgemm(0, 1, fg, cg * kk, (int)cols, 1.0f, t + (size_t)g * fg * cols, (int)cols,
		         col + (size_t)g * cg * kk * cols, (int)cols, 0.0f, dw + (size_t)g * fg * cg * kk, cg * kk);
	if (!dx)
		return;
	for (int g = 0; g < G; g++) /* the columns are no longer needed: they become their gradient */
		b->sgemm(1, 0, cg * kk, (int)cols, fg, 1.0f, w + (size_t)g * fg * cg * kk, cg * kk,
		         t + (size_t)g * fg * cols, (int)cols, 0.0f, col + (size_t)g * cg * kk * cols, (int)cols);
	b->col2im(col, s->batch, s->c, s->h, s->w, s->k, s->stride, s->pad, s->oh, s->ow, dx);
}

size_t dlk_convt_scratch(const struct dlk_conv_more *s)
{
	size_t in_cols = (size_t)s->batch * s->h * s->w, fkk = (size_t)s->f * s->k * s->k;
	size_t out = (size_t)s->batch * s->f * s->oh * s->ow;
	/* x as [C, B*H*W]; the columns; y (or dy) as [F, B*OH*OW] or dx as [C, B*H*W]; a zero bias of C */
	return (size_t)s->c * in_cols + fkk * in_cols + max2(out, (size_t)s->c * in_cols) + (size_t)s->c;
}

void dlk_convt_forward(const struct dlk_backend *b, const float *x, const float *w, const float *bias,
                       const struct dlk_conv_more *s, int act, float *scratch, float *y)
{
	int hw = s->h * s->w, ohw = s->oh * s->ow, fkk = s->f * s->k * s->k;
	size_t in_cols = (size_t)s->batch * hw;
	float *xt = scratch, *col = xt + (size_t)s->c * in_cols, *t = col + (size_t)fkk * in_cols;
	b->conv_grad_in(x, s->batch, s->c, hw, xt);
	b->sgemm(1, 0, fkk, (int)in_cols, s->c, 1.0f, w, fkk, xt, (int)in_cols, 0.0f, col, (int)in_cols);
	b->col2im(col, s->batch, s->f, s->oh, s->ow, s->k, s->stride, s->pad, s->h, s->w, y);
	b->conv_grad_in(y, s->batch, s->f, ohw, t);
	b->conv_out(t, bias, s->batch, s->f, ohw, act, y);
}

void dlk_convt_backward(const struct dlk_backend *b, const float *x, const float *w, const float *dt,
                        const struct dlk_conv_more *s, float *scratch, float *dw, float *db, float *dx)
{
	int hw = s->h * s->w, ohw = s->oh * s->ow, fkk = s->f * s->k * s->k;
	size_t in_cols = (size_t)s->batch * hw;
	float *xt = scratch, *col = xt + (size_t)s->c * in_cols, *t = col + (size_t)fkk * in_cols;
	float *zero = t + max2((size_t)s->batch * s->f * ohw, (size_t)s->c * in_cols);
	b->conv_grad_in(dt, s->batch, s->f, ohw, t);
	b->sum_cols(t, s->f, s->batch * ohw, db);
	b->im2col(dt, s->batch, s->f, s->oh, s->ow, s->k, s->stride, s->pad, s->h, s->w, col);
	b->conv_grad_in(x, s->batch, s->c, hw, xt);
	b->sgemm(0, 1, s->c, fkk, (int)in_cols, 1.0f, xt, (int)in_cols, col, (int)in_cols, 0.0f, dw, fkk);
	if (!dx)
		return;
	b->sgemm(0, 0, s->c, (int)in_cols, fkk, 1.0f, w, fkk, col, (int)in_cols, 0.0f, t, (int)in_cols);
	b->fill(zero, (size_t)s->c, 0.0f);
	b->conv_out(t, zero, s->batch, s->c, hw, DLK_ACT_NONE, dx);
}
