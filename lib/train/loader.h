/* Batches gathered ahead, on loader threads of their own, while the step before them computes:
 * for samples read from files as they are used (data.images.decode: stream), so that the step
 * does not wait for decoding. One batch is in flight at a time: post it, and wait for it when
 * the step that needs it starts.
 *
 * The threads split a batch by rows (dlk_dataset_gather_train_part), so what they write does not
 * depend on how many there are: the same floats as dlk_dataset_gather_train(). */
#ifndef DLK_TRAIN_LOADER_H
#define DLK_TRAIN_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "lib/data/dataset.h"

struct dlk_loader;

/* Loader threads (threads <= 0: one per core this process may use) for batches of up to `batch`
 * samples of ds, which must outlive the loader. */
struct dlk_loader *dlk_loader_start(const struct dlk_dataset *ds, int batch, int threads);
/* Starts gathering samples idx[0..n) (n <= batch; idx must stay as it is until the wait) with
 * training's augmentation of (seed, epoch). The batch posted before must have been waited for. */
void dlk_loader_post(struct dlk_loader *l, const size_t *idx, size_t n, unsigned long long seed, int epoch);
/* Whether a batch is posted and not yet waited for, and which: the idx and n it was posted with. */
int dlk_loader_pending(const struct dlk_loader *l, const size_t **idx, size_t *n);
/* Waits for the posted batch: its samples (n * sample_size floats), labels (n) and targets (n *
 * target_size floats, or NULL when the samples have none), valid until the next post. */
void dlk_loader_wait(struct dlk_loader *l, const float **x, const int32_t **y, const float **t);
/* The loader's threads. */
int dlk_loader_threads(const struct dlk_loader *l);
/* Waits for what is in flight and joins the threads; NULL is fine. */
void dlk_loader_stop(struct dlk_loader *l);

#endif
