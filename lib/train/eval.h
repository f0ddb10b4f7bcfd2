/* Evaluation of a network on a labelled dataset: loss, accuracy, per-class precision and
 * recall, confusion matrix. */
#ifndef DLK_TRAIN_EVAL_H
#define DLK_TRAIN_EVAL_H

#include <stddef.h>

#include "lib/data/dataset.h"
#include "lib/nn/net.h"
#include "lib/util/err.h"

struct dlk_eval {
	size_t n;                 /* samples evaluated; 0 = no evaluation happened */
	int n_classes;
	double loss;              /* mean softmax cross-entropy */
	double accuracy;          /* in [0, 1] */
	double *precision;        /* n_classes; 0 for a class never predicted */
	double *recall;           /* n_classes; 0 for a class absent from the data */
	long long *confusion;     /* n_classes x n_classes, row = true class, column = predicted */
};
#define DLK_EVAL_INIT { 0, 0, 0, 0, NULL, NULL, NULL }

/* Runs the network in evaluation mode (dropout off) over every sample of ds in batches of
 * `batch` (<= 0: the batch the net is already reserved for, else 256). Labels outside [0, n_classes) are an error naming the sample. */
int dlk_evaluate(struct dlk_net *net, const struct dlk_dataset *ds, int batch, struct dlk_eval *out,
                 struct dlk_err *err);
/* Deep copy (dst is overwritten, not released). */
void dlk_eval_copy(struct dlk_eval *dst, const struct dlk_eval *src);
void dlk_eval_release(struct dlk_eval *ev);

#endif
