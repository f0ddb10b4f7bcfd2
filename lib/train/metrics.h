/* The test metrics of the tasks other than classification, from predictions and targets in host
 * memory, each in double and by its textbook formula (no library to agree with: the unit test
 * checks them against hand-computed values).
 *
 *   regression  MAE, RMSE over every value; R^2 = 1 - SS_res / SS_tot per target column,
 *               averaged over the columns (scikit-learn's r2_score, multioutput uniform_average);
 *               a constant column scores 1 when predicted exactly, else 0 (as scikit-learn)
 *   multilabel  a class is predicted where sigmoid(logit) >= threshold; F1 = 2TP / (2TP + FP + FN)
 *               per class (0 for a class neither present nor predicted, scikit-learn's
 *               zero_division=0), micro (from the summed counts) and macro (their mean), and the
 *               subset accuracy (every class of a sample right)
 *   image       PSNR = 10 log10(range^2 / MSE) per image, averaged over the images (capped at
 *               100 dB for an exact image); SSIM (Wang et al. 2004: an 11x11 Gaussian window of
 *               sigma 1.5, K1 0.01, K2 0.03, over the valid region, each channel apart) averaged
 *               over channels and images. Images smaller than the window use a window of their size. */
#ifndef DLK_TRAIN_METRICS_H
#define DLK_TRAIN_METRICS_H

#include <stddef.h>

void dlk_metrics_regression(const float *pred, const float *target, size_t n, int k, double *mae, double *rmse,
                            double *r2);
/* per_class: k values (caller's), may be NULL */
void dlk_metrics_multilabel(const float *logits, const float *target, size_t n, int k, double threshold,
                            double *per_class, double *micro_f1, double *macro_f1, double *subset_accuracy);
double dlk_metrics_psnr(const float *pred, const float *target, size_t n, size_t size, double range);
/* images [n, c, h, w] */
double dlk_metrics_ssim(const float *pred, const float *target, size_t n, int c, int h, int w, double range);

#endif
