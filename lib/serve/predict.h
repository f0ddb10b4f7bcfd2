/* Batch scoring: a served model's forward pass over every sample of a loaded dataset, and the
 * text of the prediction set `dlk predict` pushes to a store.
 *
 * predictions.csv, one row per input sample, in the input's order:
 *	index,label,class,<one column per class: its probability>
 * index is the sample's position in the input split, label its label in the input (empty when
 * the input has none), class the predicted class (its name when the model has class names, else
 * its number). Probabilities are printed with %.9g (float32 round-trips). The header names the
 * probability columns p_<class>. The text depends only on the model and the data, so scoring the
 * same data with the same model, batch size and thread count gives the same bytes, hence the
 * same dataset id (provenance.json
 * adds the tag the input was named by, when it was). */
#ifndef DLK_SERVE_PREDICT_H
#define DLK_SERVE_PREDICT_H

#include <stddef.h>
#include <stdint.h>

#include "lib/data/dataset.h"
#include "lib/serve/model.h"
#include "lib/util/err.h"

struct dlk_predictions {
	size_t n;                  /* samples scored */
	int k;                     /* classes */
	int32_t *cls;              /* n predicted classes, owned */
	float *probs;              /* n * k probabilities, owned */
	size_t correct;            /* predictions equal to the input's label */
};
#define DLK_PREDICTIONS_INIT { 0, 0, NULL, NULL, 0 }

/* Progress: done samples of total. Non-zero stops the scoring (DLK_EXIT_INTERRUPTED). */
typedef int (*dlk_predict_progress_fn)(void *ctx, size_t done, size_t total);

/* Scores every sample of ds with m (loaded by dlk_serve_model_load) in batches of up to batch
 * rows; the forward pass spreads over every core (lib/util/parallel.h). A sample whose size is
 * not the model's input is DLK_EXIT_CONFIG naming both shapes; a non-finite logit is
 * DLK_EXIT_FAIL naming the sample. */
int dlk_predict_run(struct dlk_serve_model *m, const struct dlk_dataset *ds, int batch, dlk_predict_progress_fn progress,
                    void *progress_ctx, struct dlk_predictions *out, struct dlk_err *err);
/* The text of predictions.csv (above) for p over ds (its labels); classes: k names or NULL.
 * Caller frees; *len is set. */
char *dlk_predict_csv(const struct dlk_predictions *p, const struct dlk_dataset *ds, char *const *classes, size_t *len);
void dlk_predictions_release(struct dlk_predictions *p);

/* The IDX files to score in a dataset: the one file whose name has "images-idx3-ubyte" (of
 * several, the test split's: names starting with "t10k-"), and its labels (the same name with
 * "labels-idx1-ubyte"). *images and *labels point into m. More than one candidate, or none, is
 * DLK_EXIT_CONFIG listing what the dataset has, with --images/--labels as the way out. */
struct dlk_manifest;
int dlk_predict_pick_idx(const struct dlk_manifest *m, const char **images, const char **labels, struct dlk_err *err);

#endif
