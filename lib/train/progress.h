/* The progress a training Job publishes on itself (annotation dlk.dev/progress). */
#ifndef DLK_TRAIN_PROGRESS_H
#define DLK_TRAIN_PROGRESS_H

#include "lib/train/train.h"

/* The annotation's value for ev: {"epoch","epochs","step","totalSteps","loss","accuracy",
 * "samplesPerSec","updated"}; accuracy is the last test accuracy known (null when none).
 * updated is RFC 3339. The caller frees the string. */
char *dlk_progress_json(const struct dlk_train_event *ev, double accuracy, int have_accuracy, const char *updated);

#endif
