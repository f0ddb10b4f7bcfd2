/* Batch normalisation (torch.nn.BatchNorm1d/2d), the CPU reference: x is [batch, c, hw] and each
 * channel is normalised over batch and hw. One channel per iteration, channels spread over the
 * thread pool; each channel's sums run in a fixed order (sample by sample) and in double, so a
 * result is the same bits at any thread count. */
#include <math.h>

#include "lib/nn/cpu_layers.h"
#include "lib/util/parallel.h"

struct bn_job {
	const float *x, *w, *b, *mean, *rstd, *dy;
	int batch, c, hw, training;
	float eps, momentum;
	float *rmean, *rvar, *y, *dx, *dw, *db, *m, *r;
};

#define AT(j, s, ch) ((size_t)(s) * (size_t)(j)->c + (size_t)(ch)) * (size_t)(j)->hw

static void bn_fwd_part(void *ctx, int part, int nparts)
{
	const struct bn_job *j = ctx;
	size_t lo, hi;
	double n = (double)j->batch * (double)j->hw;

	dlk_parallel_range((size_t)j->c, part, nparts, 1, &lo, &hi);
	for (size_t ch = lo; ch < hi; ch++) {
		double mean, var, s = 0, v = 0;
		if (j->training) {
			for (int b = 0; b < j->batch; b++)
				for (int k = 0; k < j->hw; k++)
					s += j->x[AT(j, b, ch) + (size_t)k];
			mean = s / n;
			for (int b = 0; b < j->batch; b++)
				for (int k = 0; k < j->hw; k++) {
					double d = j->x[AT(j, b, ch) + (size_t)k] - mean;
					v += d * d;
				}
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
		for (int b = 0; b < j->batch; b++) {
			const float *x = j->x + AT(j, b, ch);
			float *y = j->y + AT(j, b, ch);
			for (int k = 0; k < j->hw; k++)
				y[k] = (x[k] - fm) * fr * g + bb;
		}
	}
}

void dlk_cpu_batchnorm_forward(const float *x, const float *w, const float *b, int batch, int c, int hw, float eps,
                               float momentum, int training, float *running_mean, float *running_var,
                               float *num_batches, float *y, float *mean, float *rstd)
{
	struct bn_job j = { .x = x, .w = w, .b = b, .batch = batch, .c = c, .hw = hw, .training = training,
		            .eps = eps, .momentum = momentum, .rmean = running_mean, .rvar = running_var, .y = y,
		            .m = mean, .r = rstd };
	dlk_parallel_for(dlk_cpu_parts((size_t)batch * (size_t)c * (size_t)hw, 16384) < c ?
	                         dlk_cpu_parts((size_t)batch * (size_t)c * (size_t)hw, 16384) : c,
	                 bn_fwd_part, &j);
	if (training && num_batches)
		num_batches[0] += 1.0f;
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
		double sdy = 0, sdyx = 0;
		for (int b = 0; b < j->batch; b++) {
			const float *x = j->x + AT(j, b, ch), *dy = j->dy + AT(j, b, ch);
			for (int k = 0; k < j->hw; k++) {
				sdy += dy[k];
				sdyx += (double)dy[k] * (double)((x[k] - fm) * fr);
			}
		}
		if (j->db)
			j->db[ch] = (float)sdy;
		if (j->dw)
			j->dw[ch] = (float)sdyx;
		float a = (float)(sdy / n), bq = (float)(sdyx / n), s = g * fr;
		for (int b = 0; b < j->batch; b++) {
			const float *x = j->x + AT(j, b, ch), *dy = j->dy + AT(j, b, ch);
			float *dx = j->dx + AT(j, b, ch);
			for (int k = 0; k < j->hw; k++)
				dx[k] = s * (dy[k] - a - (x[k] - fm) * fr * bq);
		}
	}
}

void dlk_cpu_batchnorm_backward(const float *x, const float *w, const float *mean, const float *rstd,
                                const float *dy, int batch, int c, int hw, float *dx, float *dw, float *db)
{
	struct bn_job j = { .x = x, .w = w, .mean = mean, .rstd = rstd, .dy = dy, .batch = batch, .c = c, .hw = hw,
		            .dx = dx, .dw = dw, .db = db };
	dlk_parallel_for(dlk_cpu_parts((size_t)batch * (size_t)c * (size_t)hw, 16384) < c ?
	                         dlk_cpu_parts((size_t)batch * (size_t)c * (size_t)hw, 16384) : c,
	                 bn_bwd_part, &j);
}
