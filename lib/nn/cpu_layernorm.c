/* Layer normalisation over the last axis (torch.nn.LayerNorm): the forward and the input
 * gradient one row per iteration, rows spread over the thread pool; the parameter gradients one
 * column range per part, each column summed over rows in row order (the CUDA kernel's order),
 * a row at a time across the range's columns (vectorised: see cpu.c for the pragma). A row's own
 * sums (mean, variance, the input gradient's two) are taken in 16 interleaved partial sums. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"

struct ln_job {
	const float *x, *w, *b, *mean, *rstd, *dy;
	int rows, n;
	float eps;
	float *y, *dx, *dw, *db;
	float *m, *r;
};

int dlk_cpu_parts(size_t work, size_t grain)
{
	size_t t = (size_t)dlk_parallel_threads(), by_size = work / (grain ? grain : 1);
	size_t p = t < by_size ? t : by_size;
	return p < 1 ? 1 : (int)p;
}

/* A row's sums in LN_LANES partial sums, element i into lane i % LN_LANES, the lanes then added
 * in order: a fixed order (the same bits at every vector width and thread count) whose loop
 * vectorises, where one running sum is a chain of dependent scalar adds (the row sums were most
 * of the layer norm's time in a GPT's profile). */
#define LN_LANES 16

static float lanes_total(const float *acc)
{
	float t = 0;
	for (int k = 0; k < LN_LANES; k++)
		t += acc[k];
	return t;
}

/* the sum of x[i] and the sum of (x[i] - c)^2 */
DLK_CPU_CLONES static void row_sums(const float *restrict x, int n, float c, float *sum, float *sq)
{
	float a[LN_LANES] = { 0 }, b[LN_LANES] = { 0 };
	int i = 0;
	for (; i + LN_LANES <= n; i += LN_LANES)
		for (int k = 0; k < LN_LANES; k++) {
			float d = x[i + k] - c;
			a[k] += x[i + k];
			b[k] += d * d;
		}
	for (int k = 0; i + k < n; k++) {
		float d = x[i + k] - c;
		a[k] += x[i + k];
		b[k] += d * d;
	}
	*sum = lanes_total(a);
	*sq = lanes_total(b);
}

DLK_CPU_CLONES static void ln_fwd_row(const float *restrict x, const float *restrict w, const float *restrict b, int n,
                                      float eps, float *restrict y, float *mean_out, float *rstd_out)
{
	float s, v;
	row_sums(x, n, 0.0f, &s, &v);
	float mean = s / (float)n;
	row_sums(x, n, mean, &s, &v);
	float rstd = 1.0f / sqrtf(v / (float)n + eps);
	if (w)
		for (int i = 0; i < n; i++)
			y[i] = (x[i] - mean) * rstd * w[i] + b[i];
	else
		for (int i = 0; i < n; i++)
			y[i] = (x[i] - mean) * rstd;
	*mean_out = mean;
	*rstd_out = rstd;
}

static void ln_fwd_part(void *ctx, int part, int nparts)
{
	const struct ln_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range((size_t)j->rows, part, nparts, 1, &lo, &hi);
	for (size_t r = lo; r < hi; r++)
		ln_fwd_row(j->x + r * (size_t)j->n, j->w, j->b, j->n, j->eps, j->y + r * (size_t)j->n, &j->m[r], &j->r[r]);
}

void dlk_cpu_layernorm_forward(const float *x, const float *w, const float *b, int rows, int n, float eps, float *y,
                               float *mean, float *rstd)
{
	struct ln_job j = { .x = x, .w = w, .b = b, .rows = rows, .n = n, .eps = eps, .y = y, .m = mean, .r = rstd };
	if (rows <= 0 || n <= 0)
		return;
	dlk_parallel_for(dlk_cpu_parts((size_t)rows * (size_t)n, 16384), ln_fwd_part, &j);
}

/* dx of one row; w NULL: no affine parameters */
DLK_CPU_CLONES static void ln_dx_row(const float *restrict x, const float *restrict dy, const float *restrict w, int n,
                                     float mean, float rstd, float *restrict dx)
{
	float a[LN_LANES] = { 0 }, b[LN_LANES] = { 0 };
	int i = 0;
	for (; i + LN_LANES <= n; i += LN_LANES)
		for (int k = 0; k < LN_LANES; k++) {
			float g = w ? dy[i + k] * w[i + k] : dy[i + k];
			a[k] += g;
			b[k] += g * ((x[i + k] - mean) * rstd);
		}
	for (int k = 0; i + k < n; k++) {
		float g = w ? dy[i + k] * w[i + k] : dy[i + k];
		a[k] += g;
		b[k] += g * ((x[i + k] - mean) * rstd);
	}
	float sg = lanes_total(a) / (float)n, sgh = lanes_total(b) / (float)n;
	for (i = 0; i < n; i++) {
		float g = w ? dy[i] * w[i] : dy[i];
		dx[i] = rstd * (g - sg - (x[i] - mean) * rstd * sgh);
	}
}

static void ln_dx_part(void *ctx, int part, int nparts)
{
	const struct ln_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range((size_t)j->rows, part, nparts, 1, &lo, &hi);
	for (size_t r = lo; r < hi; r++)
		ln_dx_row(j->x + r * (size_t)j->n, j->dy + r * (size_t)j->n, j->w, j->n, j->mean[r], j->rstd[r],
		          j->dx + r * (size_t)j->n);
}

/* columns [lo, hi): each summed over the rows in row order, the rows outer so that the inner loop
 * runs along a row's contiguous columns and vectorises (each lane its own column's sum) */
DLK_CPU_CLONES static void ln_dw_cols(const struct ln_job *j, size_t lo, size_t hi, float *restrict sw,
                                      float *restrict sb)
{
	size_t w = hi - lo;
	memset(sw, 0, sizeof(float) * w);
	memset(sb, 0, sizeof(float) * w);
	for (int r = 0; r < j->rows; r++) {
		const float *restrict dy = j->dy + (size_t)r * (size_t)j->n + lo;
		const float *restrict x = j->x + (size_t)r * (size_t)j->n + lo;
		float mean = j->mean[r], rstd = j->rstd[r];
		for (size_t i = 0; i < w; i++) {
			sw[i] += dy[i] * ((x[i] - mean) * rstd);
			sb[i] += dy[i];
		}
	}
}

static void ln_dw_part(void *ctx, int part, int nparts)
{
	const struct ln_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range((size_t)j->n, part, nparts, 16, &lo, &hi);
	if (hi <= lo)
		return;
	float *sw = xmalloc(sizeof(float) * 2 * (hi - lo)), *sb = sw + (hi - lo);
	ln_dw_cols(j, lo, hi, sw, sb);
	if (j->dw)
		memcpy(j->dw + lo, sw, sizeof(float) * (hi - lo));
	if (j->db)
		memcpy(j->db + lo, sb, sizeof(float) * (hi - lo));
	free(sw);
}

void dlk_cpu_layernorm_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                const float *dy, int rows, int n, float *dx, float *dw, float *db)
{
	struct ln_job j = { .x = x, .w = w, .mean = mean, .rstd = rstd, .dy = dy, .rows = rows, .n = n, .dx = dx,
	                    .dw = dw, .db = db };
	if (rows <= 0 || n <= 0)
		return;
	size_t work = (size_t)rows * (size_t)n;
	dlk_parallel_for(dlk_cpu_parts(work, 16384), ln_dx_part, &j);
	if (dw || db)
		dlk_parallel_for(dlk_cpu_parts(work, 16384) < (n + 15) / 16 ? dlk_cpu_parts(work, 16384) : (n + 15) / 16,
		                 ln_dw_part, &j);
}
