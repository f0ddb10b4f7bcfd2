/* The progress a training Job publishes on itself (annotation dlk.dev/progress). */
#ifndef DLK_TRAIN_PROGRESS_H
#define DLK_TRAIN_PROGRESS_H

#include "lib/train/train.h"

/* The annotation, and the keys of its JSON value: the writer (the worker) and the readers
 * (dlk status, dlk train --wait) both use these names. */
#define DLK_PROGRESS_ANNOTATION "dlk.dev/progress"
#define DLK_PROGRESS_EPOCH "epoch"
#define DLK_PROGRESS_EPOCHS "epochs"
#define DLK_PROGRESS_STEP "step"             /* optimizer steps done, in all epochs */
#define DLK_PROGRESS_TOTAL_STEPS "totalSteps"
#define DLK_PROGRESS_LOSS "loss"
#define DLK_PROGRESS_ACCURACY "accuracy"
#define DLK_PROGRESS_TEST_METRIC "test_metric" /* another task's headline: "r2 0.9123" */
#define DLK_PROGRESS_SAMPLES_PER_SEC "samplesPerSec"
#define DLK_PROGRESS_UPDATED "updated"
#define DLK_PROGRESS_WORKERS "workers"       /* the ranks the gang trains with now */

/* The annotation rank 0 publishes after every epoch and at the end: the run document
 * (lib/report/report.h) of the run so far, from the same writer as the bundle's model.json, at
 * most DLK_METRICS_MAX_BYTES (annotations share 256 KiB; the confusion matrix, then the detail
 * of the history give way first). `dlk report JOB` reads it. */
#define DLK_METRICS_ANNOTATION "dlk.dev/metrics"
#define DLK_METRICS_MAX_BYTES (128u << 10)

/* The annotation's value for ev: {"epoch","epochs","step","totalSteps","loss","accuracy",
 * "samplesPerSec","updated"} and "workers" when ev->world is known; accuracy is the last test accuracy known (null when none).
 * updated is RFC 3339. The caller frees the string. */
char *dlk_progress_json(const struct dlk_train_event *ev, double accuracy, int have_accuracy, const char *updated);

#endif
