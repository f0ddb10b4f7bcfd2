/* Evaluation of a network on a labelled dataset: loss, accuracy, per-class precision and
 * recall, confusion matrix. */
#ifndef DLK_TRAIN_EVAL_H
#define DLK_TRAIN_EVAL_H

#include <stddef.h>

#include "lib/data/dataset.h"
#include "lib/nn/net.h"
#include "lib/util/err.h"

#define DLK_EVAL_MAX_METRICS 8

/* One named test metric of a task, in this order, the first the task's headline: "accuracy";
 * "r2", "rmse", "mae"; "f1_micro", "f1_macro", "subset_accuracy"; "psnr", "ssim", "r2", "rmse",
 * "mae". The names are the ones serving.gate and the run record use. */
struct dlk_metric {
	const char *name;         /* static */
	double value;
	int higher_is_better;
};

struct dlk_eval {
	size_t n;                 /* samples evaluated; 0 = no evaluation happened */
	int n_classes;
	double loss;              /* mean softmax cross-entropy */
	double accuracy;          /* in [0, 1] */
	double *precision;        /* n_classes; 0 for a class never predicted */
	double *recall;           /* n_classes; 0 for a class absent from the data */
	long long *confusion;     /* n_classes x n_classes, row = true class, column = predicted */
	/* the task's metrics (classification: accuracy alone; the arrays above are classification's) */
	enum dlk_task task;
	int n_metrics;
	struct dlk_metric metrics[DLK_EVAL_MAX_METRICS];
	double *f1;               /* multilabel: n_classes per-class F1; else NULL */
	/* image: the first n_samples test samples (at most DLK_EVAL_SAMPLES, images of at most 4096
	 * values) as [n_samples, n_classes] floats each: the input (NULL when its size differs from
	 * the output's), the output and the target; sample_shape is the output's C, H, W */
	int n_samples, sample_shape[3];
	float *sample_in, *sample_out, *sample_target;
};
#define DLK_EVAL_SAMPLES 4
#define DLK_EVAL_INIT { .n = 0 }

/* Runs the network in evaluation mode (dropout off) over every sample of ds in batches of
 * `batch` (<= 0: the batch the net is already reserved for, else 256). Labels outside [0, n_classes) are an error naming the sample. */
int dlk_evaluate(struct dlk_net *net, const struct dlk_dataset *ds, int batch, struct dlk_eval *out,
                 struct dlk_err *err);
/* The same for the model's task (model.task): the loss the model trains with (label smoothing
 * of `training` included; training may be NULL) and the task's metrics (eval.h's list, metrics.h's
 * formulas). Float-target tasks need ds->t with net->n_classes values per sample. For task
 * image, R^2 is over all values as one column, and PSNR and SSIM take the targets' range as 1 (images scaled to [0, 1], data.scale's
 * default) and the model's output shape as the image's. */
int dlk_evaluate_task(struct dlk_net *net, const struct dlk_dataset *ds, int batch, const struct dlk_model *model,
                      const struct dlk_training *training, struct dlk_eval *out, struct dlk_err *err);
/* The value of metric `name` (also "loss"); -1 when the evaluation has no such metric. */
int dlk_eval_metric(const struct dlk_eval *ev, const char *name, double *value);
/* The task's test metrics on one line: "test accuracy 84.12%", "test mae 0.0123  rmse 0.0200
 * r2 0.9981", "test psnr 24.31 dB  ssim 0.8123 ...", "test f1_micro 0.9012 ...". */
void dlk_eval_brief(const struct dlk_eval *ev, char *buf, size_t len);
/* Deep copy (dst is overwritten, not released). */
void dlk_eval_copy(struct dlk_eval *dst, const struct dlk_eval *src);
void dlk_eval_release(struct dlk_eval *ev);

#endif
