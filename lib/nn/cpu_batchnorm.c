/* Batch normalisation (torch.nn.BatchNorm1d/2d), the CPU reference: x is [batch, c, hw] and each
 * channel is normalised over batch and hw. One channel per iteration, channels spread over the
 * thread pool. A channel's sums run in BN_LANES lanes, lane l taking the elements k = l mod
 * BN_LANES of each sample's row: in float within a row (PyTorch sums in float throughout), each
 * row's lanes then added to double ones, which are added in lane order at the end. A fixed order,
 * so a result is the same bits at any thread count and in every clone (AVX-512, AVX2, the
 * baseline: the lanes are the source's, not the vectoriser's), and the loops vectorise (a single
 * double running sum, the order C prescribes, cannot: it was a quarter of a ResNet's step).
 * A ReLU after the normalisation can be applied on the way out (relu) and its derivative taken
 * in the backward's passes (from the output y), the same operations as the two layers' apart. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <math.h>

#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/util/parallel.h"

#define BN_LANES 16
#define BN_ROW 4096 /* a longer row goes to the double lanes in pieces of this many values */

struct bn_job {
	const float *x, *w, *b, *mean, *rstd, *dy, *ya; /* ya: the ReLU's output (relu backward) */
	int batch, c, hw, training, relu;
	float eps, momentum;
	float *rmean, *rvar, *y, *dx, *dw, *db, *m, *r;
};

#define AT(j, s, ch) ((size_t)(s) * (size_t)(j)->c + (size_t)(ch)) * (size_t)(j)->hw

static double lanes_total(const double *acc)
{
	double t = 0;
	for (int l = 0; l < BN_LANES; l++)
		t += acc[l];
	return t;
}

/* acc[l] += the sum of x[k] - m (sq: of its square) over the k = l mod BN_LANES of one row (at
 * most BN_ROW values), in float lanes, then added to the double ones */
DLK_CPU_CLONES static void lanes_add(const float *restrict x, int n, float m, int sq, double *restrict acc)
{
	float f[BN_LANES] = { 0 };
	int k = 0;
	if (sq) {
		for (; k + BN_LANES <= n; k += BN_LANES)
			for (int l = 0; l < BN_LANES; l++) {
				float d = x[k + l] - m;
				f[l] += d * d;
			}
		for (int l = 0; k < n; k++, l++) {
			float d = x[k] - m;
			f[l] += d * d;
		}
	} else {
		for (; k + BN_LANES <= n; k += BN_LANES)
			for (int l = 0; l < BN_LANES; l++)
				f[l] += x[k + l];
		for (int l = 0; k < n; k++, l++)
			f[l] += x[k];
	}
	for (int l = 0; l < BN_LANES; l++)
		acc[l] += f[l];
}

/* y = (x - m) * r * g + b over one row */
DLK_CPU_CLONES static void bn_row(const float *restrict x, float *restrict y, int n, float m, float r, float g,
                                  float b)
{
	for (int k = 0; k < n; k++)
		y[k] = (x[k] - m) * r * g + b;
}

/* y = relu((x - m) * r * g + b) over one row */
DLK_CPU_CLONES static void bn_row_relu(const float *restrict x, float *restrict y, int n, float m, float r, float g,
                                       float b)
{
	for (int k = 0; k < n; k++)
		y[k] = dlk_k_relu((x[k] - m) * r * g + b);
}

/* the lanes of sum dy and of sum dy * xhat (xhat = (x - m) * r) over one row, as lanes_add */
DLK_CPU_CLONES static void bn_bwd_sums(const float *restrict x, const float *restrict dy, int n, float m, float r,
                                       double *restrict sdy, double *restrict sdyx)
{
	float a[BN_LANES] = { 0 }, b[BN_LANES] = { 0 };
	int k = 0;
	for (; k + BN_LANES <= n; k += BN_LANES)
		for (int l = 0; l < BN_LANES; l++) {
			a[l] += dy[k + l];
			b[l] += dy[k + l] * ((x[k + l] - m) * r);
		}
	for (int l = 0; k < n; k++, l++) {
		a[l] += dy[k];
		b[l] += dy[k] * ((x[k] - m) * r);
	}
	for (int l = 0; l < BN_LANES; l++) {
		sdy[l] += a[l];
		sdyx[l] += b[l];
	}
}

/* bn_bwd_sums of relu'(ya) dy */
DLK_CPU_CLONES static void bn_bwd_sums_relu(const float *restrict x, const float *restrict ya,
                                            const float *restrict dy, int n, float m, float r, double *restrict sdy,
                                            double *restrict sdyx)
{
	float a[BN_LANES] = { 0 }, b[BN_LANES] = { 0 };
	int k = 0;
	for (; k + BN_LANES <= n; k += BN_LANES)
		for (int l = 0; l < BN_LANES; l++) {
			float d = dlk_k_relu_grad(ya[k + l], dy[k + l]);
			a[l] += d;
			b[l] += d * ((x[k + l] - m) * r);
		}
	for (int l = 0; k < n; k++, l++) {
		float d = dlk_k_relu_grad(ya[k], dy[k]);
		a[l] += d;
		b[l] += d * ((x[k] - m) * r);
	}
	for (int l = 0; l < BN_LANES; l++) {
		sdy[l] += a[l];
		sdyx[l] += b[l];
	}
}

/* bn_bwd_row of relu'(ya) dy */
DLK_CPU_CLONES static void bn_bwd_row_relu(const float *restrict x, const float *restrict ya,
                                           const float *restrict dy, float *restrict dx, int n, float m, float r,
                                           float s, float a, float bq)
{
	for (int k = 0; k < n; k++)
		dx[k] = s * (dlk_k_relu_grad(ya[k], dy[k]) - a - (x[k] - m) * r * bq);
}

/* dx = s * (dy - a - (x - m) * r * bq) over one row */
DLK_CPU_CLONES static void bn_bwd_row(const float *restrict x, const float *restrict dy, float *restrict dx, int n,
                                      float m, float r, float s, float a, float bq)
{
	for (int k = 0; k < n; k++)
		dx[k] = s * (dy[k] - a - (x[k] - m) * r * bq);
}

static void bn_fwd_part(void *ctx, int part, int nparts)
{
	const struct bn_job *j = ctx;
	size_t lo, hi;
	double n = (double)j->batch * (double)j->hw;

	dlk_parallel_range((size_t)j->c, part, nparts, 1, &lo, &hi);
	for (size_t ch = lo; ch < hi; ch++) {
		double mean, var;
		if (j->training) {
			double acc[BN_LANES] = { 0 }, v;
			for (int b = 0; b < j->batch; b++)
				for (int k = 0; k < j->hw; k += BN_ROW)
					lanes_add(j->x + AT(j, b, ch) + k, j->hw - k < BN_ROW ? j->hw - k : BN_ROW, 0.0f, 0, acc);
			mean = lanes_total(acc) / n;
			/* the squares about the float mean, less n (mean - fm)^2: about the mean */
			float fm0 = (float)mean;
			for (int l = 0; l < BN_LANES; l++)
				acc[l] = 0;
			for (int b = 0; b < j->batch; b++)
				for (int k = 0; k < j->hw; k += BN_ROW)
					lanes_add(j->x + AT(j, b, ch) + k, j->hw - k < BN_ROW ? j->hw - k : BN_ROW, fm0, 1, acc);
			v = lanes_total(acc) - n * (mean - fm0) * (mean - fm0);
			v = v > 0 ? v : 0;
			var = v / n;
			/* PyTorch's update: the unbiased variance goes into the running one */
			j->rmean[ch] = (float)((1.0 - j->momentum) * j->rmean[ch] + j->momentum * mean);
			j->rvar[ch] = (float)((1.0 - j->momentum) * j->rvar[ch] + j->momentum * (n > 1 ? v / (n - 1) : var));
		} else {
			mean = j->rmean[ch];
			var = j->rvar[ch];
		}
		float fm = (float)mean, fr = (float)(1.0 / sqrt(var + (double)j->eps));
		float g = j->w ? j->w[ch] : 1.0f, bb = j->b ? j->b[ch] : 0.0f;
		if (j->m) {
			j->m[ch] = fm;
			j->r[ch] = fr;
		}
		for (int b = 0; b < j->batch; b++)
			if (j->relu)
				bn_row_relu(j->x + AT(j, b, ch), j->y + AT(j, b, ch), j->hw, fm, fr, g, bb);
			else
				bn_row(j->x + AT(j, b, ch), j->y + AT(j, b, ch), j->hw, fm, fr, g, bb);
	}
}

static void bn_forward(const float *x, const float *w, const float *b, int batch, int c, int hw, float eps,
                       float momentum, int training, float *running_mean, float *running_var, float *num_batches,
                       float *y, float *mean, float *rstd, int relu)
{
	struct bn_job j = { .x = x, .w = w, .b = b, .batch = batch, .c = c, .hw = hw, .training = training,
		            .eps = eps, .momentum = momentum, .rmean = running_mean, .rvar = running_var, .y = y,
		            .m = mean, .r = rstd, .relu = relu };
	dlk_parallel_for(dlk_cpu_parts((size_t)batch * (size_t)c * (size_t)hw, 16384) < c ?
	                         dlk_cpu_parts((size_t)batch * (size_t)c * (size_t)hw, 16384) : c,
	                 bn_fwd_part, &j);
	if (training && num_batches)
		num_batches[0] += 1.0f;
}

void dlk_cpu_batchnorm_forward(const float *x, const float *w, const float *b, int batch, int c, int hw, float eps,
                               float momentum, int training, float *running_mean, float *running_var,
                               float *num_batches, float *y, float *mean, float *rstd)
{
	bn_forward(x, w, b, batch, c, hw, eps, momentum, training, running_mean, running_var, num_batches, y, mean, rstd,
	           0);
}

void dlk_cpu_batchnorm_relu_forward(const float *x, const float *w, const float *b, int batch, int c, int hw,
                                    float eps, float momentum, int training, float *running_mean, float *running_var,
                                    float *num_batches, float *y, float *mean, float *rstd)
{
	bn_forward(x, w, b, batch, c, hw, eps, momentum, training, running_mean, running_var, num_batches, y, mean, rstd,
	           1);
}

/* with the batch's mean and rstd: db = sum dy, dw = sum dy * xhat,
 * dx = w * rstd * (dy - db / n - xhat * dw / n) */
static void bn_bwd_part(void *ctx, int part, int nparts)
{
	const struct bn_job *j = ctx;
	size_t lo, hi;
	double n = (double)j->batch * (double)j->hw;

	dlk_parallel_range((size_t)j->c, part, nparts, 1, &lo, &hi);
	for (size_t ch = lo; ch < hi; ch++) {
		float fm = j->mean[ch], fr = j->rstd[ch], g = j->w ? j->w[ch] : 1.0f;
		double ady[BN_LANES] = { 0 }, adyx[BN_LANES] = { 0 };
		for (int b = 0; b < j->batch; b++)
			for (int k = 0; k < j->hw; k += BN_ROW) {
				int n = j->hw - k < BN_ROW ? j->hw - k : BN_ROW;
				if (j->ya)
					bn_bwd_sums_relu(j->x + AT(j, b, ch) + k, j->ya + AT(j, b, ch) + k,
					                 j->dy + AT(j, b, ch) + k, n, fm, fr, ady, adyx);
				else
					bn_bwd_sums(j->x + AT(j, b, ch) + k, j->dy + AT(j, b, ch) + k, n, fm, fr, ady, adyx);
			}
		double sdy = lanes_total(ady), sdyx = lanes_total(adyx);
		if (j->db)
			j->db[ch] = (float)sdy;
		if (j->dw)
			j->dw[ch] = (float)sdyx;
		float a = (float)(sdy / n), bq = (float)(sdyx / n), s = g * fr;
		for (int b = 0; b < j->batch; b++)
			if (j->ya)
				bn_bwd_row_relu(j->x + AT(j, b, ch), j->ya + AT(j, b, ch), j->dy + AT(j, b, ch),
				                j->dx + AT(j, b, ch), j->hw, fm, fr, s, a, bq);
			else
				bn_bwd_row(j->x + AT(j, b, ch), j->dy + AT(j, b, ch), j->dx + AT(j, b, ch), j->hw, fm, fr, s,
				           a, bq);
	}
}

void dlk_cpu_batchnorm_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                const float *dy, int batch, int c, int hw, float *dx, float *dw, float *db)
{
	dlk_cpu_batchnorm_relu_backward(x, w, mean, rstd, NULL, dy, batch, c, hw, dx, dw, db);
}

/* y NULL: no ReLU */
void dlk_cpu_batchnorm_relu_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                     const float *y, const float *dy, int batch, int c, int hw, float *dx, float *dw,
                                     float *db)
{
	struct bn_job j = { .x = x, .w = w, .mean = mean, .rstd = rstd, .dy = dy, .ya = y, .batch = batch, .c = c,
		            .hw = hw, .dx = dx, .dw = dw, .db = db };
	dlk_parallel_for(dlk_cpu_parts((size_t)batch * (size_t)c * (size_t)hw, 16384) < c ?
	                         dlk_cpu_parts((size_t)batch * (size_t)c * (size_t)hw, 16384) : c,
	                 bn_bwd_part, &j);
}
