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
	size_t base;               /* the first sample's index in the input (a part: its first) */
};
#define DLK_PREDICTIONS_INIT { 0, 0, NULL, NULL, 0, 0 }

/* Progress: done samples of total. Non-zero stops the scoring (DLK_EXIT_INTERRUPTED). */
typedef int (*dlk_predict_progress_fn)(void *ctx, size_t done, size_t total);

/* Scores every sample of ds with m (loaded by dlk_serve_model_load) in batches of up to batch
 * rows; the forward pass spreads over every core (lib/util/parallel.h). A sample whose size is
 * not the model's input is DLK_EXIT_CONFIG naming both shapes; a non-finite logit is
 * DLK_EXIT_FAIL naming the sample. */
int dlk_predict_run(struct dlk_serve_model *m, const struct dlk_dataset *ds, int batch, dlk_predict_progress_fn progress,
                    void *progress_ctx, struct dlk_predictions *out, struct dlk_err *err);
/* The same for the samples [lo, hi) of ds only (out->base = lo, out->n = hi - lo); progress
 * counts within the part. The batches are [lo, lo + batch), ...: when lo is a multiple of the
 * batch, each is a batch the whole split's scoring forms too, so the part's rows are the same
 * bytes (the forward pass's floats depend on the rows a batch holds and on the thread count). */
int dlk_predict_run_range(struct dlk_serve_model *m, const struct dlk_dataset *ds, size_t lo, size_t hi, int batch,
                          dlk_predict_progress_fn progress, void *progress_ctx, struct dlk_predictions *out,
                          struct dlk_err *err);
/* The batch size dlk_predict_run uses for batch: at least 1, at most the model's max batch. */
int dlk_predict_batch(const struct dlk_serve_model *m, int batch);

/* N workers (dlk predict --workers): rank's part of n samples, whole batches of batch rows,
 * contiguous and in rank order, so that the parts cover [0, n) once; [*lo, *hi), empty for a
 * rank past the last batch or outside [0, workers). */
void dlk_predict_part_range(size_t n, int batch, int rank, int workers, size_t *lo, size_t *hi);
/* The text of predictions.csv (above) for p over ds (its labels); classes: k names or NULL.
 * Caller frees; *len is set. */
char *dlk_predict_csv(const struct dlk_predictions *p, const struct dlk_dataset *ds, char *const *classes, size_t *len);
/* Its two halves: the header line, and the rows of p (indexes from p->base); dlk_predict_csv is
 * the one followed by the other, so the header and the parts' rows in rank order are it too. */
char *dlk_predict_csv_header(const struct dlk_predictions *p, char *const *classes, size_t *len);
char *dlk_predict_csv_rows(const struct dlk_predictions *p, const struct dlk_dataset *ds, char *const *classes, size_t *len);

/* A part of N workers' predictions, as a dataset of the store tagged dlk_predict_part_tag():
 * part.csv (its rows, no header) and part.json, this record. key: dlk_predict_part_key() of what
 * the run scores (16 hex), the same for every rank of one run and different for anything that
 * changes the bytes, so a re-run finds the parts already made and makes none twice. */
#define DLK_PREDICT_PART_CSV "part.csv"
#define DLK_PREDICT_PART_JSON "part.json"
struct dlk_predict_part {
	char key[17];
	int rank, workers;
	size_t first, count;       /* its samples: [first, first + count) */
	size_t samples;            /* of the whole input */
	size_t correct;            /* of its predictions, those equal to the label */
};
void dlk_predict_part_key(const char *input_id, const char *bundle_sha, const char *images, const char *labels, int batch,
                          int threads, int workers, char key[17]);
/* NAME-part-R-of-W@KEY for the output NAME[@TAG]; a new string. */
char *dlk_predict_part_tag(const char *name, int rank, int workers, const char *key);
/* part.json's text (a new string), and its reading: a field missing or of the wrong type, or
 * numbers that do not add up, is DLK_EXIT_CONFIG naming it (what names the part: the caller's
 * prefix). */
char *dlk_predict_part_json(const struct dlk_predict_part *p);
int dlk_predict_part_parse(const char *text, size_t len, struct dlk_predict_part *p, struct dlk_err *err);
/* Whether parts[0..workers) are the parts of one run: each of key, rank i of workers, and
 * together the samples [0, samples) once, in order. Else DLK_EXIT_CONFIG naming the first part
 * that is not. */
int dlk_predict_parts_check(const struct dlk_predict_part *parts, int workers, const char *key, struct dlk_err *err);
void dlk_predictions_release(struct dlk_predictions *p);

/* The IDX files to score in a dataset: the one file whose name has "images-idx3-ubyte" (of
 * several, the test split's: names starting with "t10k-"), and its labels (the same name with
 * "labels-idx1-ubyte"). *images and *labels point into m. More than one candidate, or none, is
 * DLK_EXIT_CONFIG listing what the dataset has, with --images/--labels as the way out. */
struct dlk_manifest;
int dlk_predict_pick_idx(const struct dlk_manifest *m, const char **images, const char **labels, struct dlk_err *err);

#endif
