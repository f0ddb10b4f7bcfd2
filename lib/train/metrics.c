/* The metrics of regression, multi-label and image-to-image models (see metrics.h). */
#include <math.h>
#include <stdlib.h>

#include "lib/train/metrics.h"
#include "lib/util/mem.h"

void dlk_metrics_regression(const float *pred, const float *target, size_t n, int k, double *mae, double *rmse,
                            double *r2)
{
	double sae = 0, sse = 0, r2sum = 0;
	size_t total = n * (size_t)k;

	for (size_t i = 0; i < total; i++) {
		double e = (double)pred[i] - (double)target[i];
		sae += fabs(e);
		sse += e * e;
	}
	for (int j = 0; j < k; j++) {
		double mean = 0, tot = 0, res = 0;
		for (size_t i = 0; i < n; i++)
			mean += target[i * (size_t)k + (size_t)j];
		mean = n ? mean / (double)n : 0;
		for (size_t i = 0; i < n; i++) {
			double t = target[i * (size_t)k + (size_t)j], e = t - (double)pred[i * (size_t)k + (size_t)j];
			tot += (t - mean) * (t - mean);
			res += e * e;
		}
		r2sum += tot > 0 ? 1.0 - res / tot : (res == 0 ? 1.0 : 0.0);
	}
	*mae = total ? sae / (double)total : 0;
	*rmse = total ? sqrt(sse / (double)total) : 0;
	*r2 = k > 0 ? r2sum / k : 0;
}

void dlk_metrics_multilabel(const float *logits, const float *target, size_t n, int k, double threshold,
                            double *per_class, double *micro_f1, double *macro_f1, double *subset_accuracy)
{
	/* sigmoid(z) >= threshold  <=>  z >= logit(threshold) */
	double cut = log(threshold / (1.0 - threshold)), macro = 0;
	long long TP = 0, FP = 0, FN = 0, exact = 0;

	for (int j = 0; j < k; j++) {
		long long tp = 0, fp = 0, fn = 0;
		for (size_t i = 0; i < n; i++) {
			int p = (double)logits[i * (size_t)k + (size_t)j] >= cut, t = target[i * (size_t)k + (size_t)j] >= 0.5f;
			tp += p && t;
			fp += p && !t;
			fn += !p && t;
		}
		double f1 = 2 * tp + fp + fn ? 2.0 * (double)tp / (double)(2 * tp + fp + fn) : 0.0;
		if (per_class)
			per_class[j] = f1;
		macro += f1;
		TP += tp, FP += fp, FN += fn;
	}
	for (size_t i = 0; i < n; i++) {
		int all = 1;
		for (int j = 0; j < k && all; j++)
			all = ((double)logits[i * (size_t)k + (size_t)j] >= cut) == (target[i * (size_t)k + (size_t)j] >= 0.5f);
		exact += all;
	}
	*micro_f1 = 2 * TP + FP + FN ? 2.0 * (double)TP / (double)(2 * TP + FP + FN) : 0.0;
	*macro_f1 = k > 0 ? macro / k : 0;
	*subset_accuracy = n ? (double)exact / (double)n : 0;
}

double dlk_metrics_psnr(const float *pred, const float *target, size_t n, size_t size, double range)
{
	double total = 0;

	for (size_t i = 0; i < n; i++) {
		double sse = 0;
		for (size_t j = 0; j < size; j++) {
			double e = (double)pred[i * size + j] - (double)target[i * size + j];
			sse += e * e;
		}
		double mse = size ? sse / (double)size : 0;
		total += mse > 0 ? fmin(100.0, 10.0 * log10(range * range / mse)) : 100.0;
	}
	return n ? total / (double)n : 0;
}

/* the valid-mode separable Gaussian filter of one h x w plane into out (oh x ow) */
static void gauss_valid(const double *x, int h, int w, const double *g, int win, double *tmp, double *out)
{
	int oh = h - win + 1, ow = w - win + 1;
	for (int r = 0; r < h; r++)
		for (int c = 0; c < ow; c++) {
			double s = 0;
			for (int k = 0; k < win; k++)
				s += g[k] * x[r * w + c + k];
			tmp[r * ow + c] = s;
		}
	for (int r = 0; r < oh; r++)
		for (int c = 0; c < ow; c++) {
			double s = 0;
			for (int k = 0; k < win; k++)
				s += g[k] * tmp[(r + k) * ow + c];
			out[r * ow + c] = s;
		}
}

double dlk_metrics_ssim(const float *pred, const float *target, size_t n, int c, int h, int w, double range)
{
	int win = 11;
	win = h < win ? h : win;
	win = w < win ? w : win;
	if (n == 0 || c <= 0 || win <= 0)
		return 0;
	double g[11], gs = 0, C1 = (0.01 * range) * (0.01 * range), C2 = (0.03 * range) * (0.03 * range);
	for (int k = 0; k < win; k++) {
		double d = k - (win - 1) / 2.0;
		g[k] = exp(-d * d / (2 * 1.5 * 1.5));
		gs += g[k];
	}
	for (int k = 0; k < win; k++)
		g[k] /= gs;
	size_t hw = (size_t)h * (size_t)w;
	int oh = h - win + 1, ow = w - win + 1;
	size_t on = (size_t)oh * (size_t)ow;
	double *buf = xmalloc(sizeof(double) * (5 * hw + (size_t)h * ow + 5 * on));
	double *x = buf, *y = x + hw, *xx = y + hw, *yy = xx + hw, *xy = yy + hw, *tmp = xy + hw;
	double *mx = tmp + (size_t)h * ow, *my = mx + on, *sxx = my + on, *syy = sxx + on, *sxy = syy + on;
	double total = 0;

	for (size_t i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++) {
			const float *a = pred + (i * (size_t)c + (size_t)ch) * hw, *b = target + (i * (size_t)c + (size_t)ch) * hw;
			for (size_t j = 0; j < hw; j++) {
				x[j] = a[j], y[j] = b[j];
				xx[j] = x[j] * x[j], yy[j] = y[j] * y[j], xy[j] = x[j] * y[j];
			}
			gauss_valid(x, h, w, g, win, tmp, mx);
			gauss_valid(y, h, w, g, win, tmp, my);
			gauss_valid(xx, h, w, g, win, tmp, sxx);
			gauss_valid(yy, h, w, g, win, tmp, syy);
			gauss_valid(xy, h, w, g, win, tmp, sxy);
			double s = 0;
			for (size_t j = 0; j < on; j++) {
				double vx = sxx[j] - mx[j] * mx[j], vy = syy[j] - my[j] * my[j], cxy = sxy[j] - mx[j] * my[j];
				s += (2 * mx[j] * my[j] + C1) * (2 * cxy + C2) /
				     ((mx[j] * mx[j] + my[j] * my[j] + C1) * (vx + vy + C2));
			}
			total += s / (double)on;
		}
	free(buf);
	return total / ((double)n * c);
}
