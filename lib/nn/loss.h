/* The training losses of a task (model.task, model.loss): what the network's output is compared
 * with and how the gradient of the mean loss flows back into it.
 *
 *   softmax_cross_entropy  int labels [batch], k >= 2 logits; optional label smoothing eps
 *   binary_cross_entropy   float targets in [0, 1], [batch, k] (sigmoid folded in, stable)
 *   mse, l1, huber(delta)  float targets [batch, k]
 *   token_cross_entropy    task lm: token ids held in floats, one per position [batch * T], the
 *                          output [batch, T, V] taken as batch * T rows of V logits; a negative
 *                          id is ignored (PyTorch's ignore_index) and the mean is over the others
 *
 * Every loss is the mean PyTorch takes by default: over the batch for cross-entropy
 * (CrossEntropyLoss), over all batch * k elements for the others (BCEWithLogitsLoss, MSELoss,
 * L1Loss, HuberLoss). The per-element math is in lib/nn/kernels.h, shared with gpu/loss.cu. */
#ifndef DLK_NN_LOSS_H
#define DLK_NN_LOSS_H

#include <stdint.h>

#include "lib/nn/backend.h"
#include "lib/project/project.h"

struct dlk_net;

struct dlk_loss_spec {
	enum dlk_loss kind;
	float param;              /* softmax_cross_entropy: label smoothing; huber: delta; else unused */
};

/* The loss a resolved spec trains with. */
struct dlk_loss_spec dlk_loss_of(const struct dlk_model *m, const struct dlk_training *t);
/* Does the loss read int labels (1) or float targets (0)? */
int dlk_loss_wants_labels(enum dlk_loss kind);
/* "softmax_cross_entropy", "mse", ... as model.loss spells them, and back (-1: unknown) */
const char *dlk_loss_name(enum dlk_loss kind);
int dlk_loss_from_name(const char *name);
/* "classification", "multilabel", "regression", "image" as model.task spells them, and back */
const char *dlk_task_name(enum dlk_task task);
int dlk_task_from_name(const char *name);

/* The reference (host memory): the mean loss of out [batch, k] against labels (cross-entropy)
 * or targets [batch, k] (the others; the unused one may be NULL), and, when dout is not NULL,
 * d(mean loss)/d(out) into dout [batch, k]. Sums in double. The CPU backend's `loss`. */
float dlk_loss_ref(int kind, const float *out, const int32_t *labels, const float *targets, int batch, int k,
                   float param, float *dout);

/* Task lm: the rows and the row width the loss sees for a batch of `batch` samples of net's
 * [1, T, V] output (*batch becomes batch * T, *k V). */
void dlk_loss_rows(const struct dlk_net *net, int *batch, int *k);

/* After a training forward of net: the loss of its output against labels or targets (device
 * pointers of net's backend) and every parameter gradient into net->grads, through
 * dlk_net_backward_grad(). Returns the mean loss. */
float dlk_loss_backward(struct dlk_net *net, const struct dlk_loss_spec *loss, const int32_t *labels,
                        const float *targets, int batch);

#endif
