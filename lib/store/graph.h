/* The datasets of a store as a graph: a dataset made by dlk (a pipeline stage's output, dlk
 * predict's predictions) names in its provenance.json what it was made from, by dataset id or by
 * the sha256 of a file (a model bundle). These walk those links over every dataset of the store:
 * which dataset holds a file (the model a prediction set names), and every dataset made from a
 * dataset, directly or through others (what `dlk impact --downstream` lists). One GET per
 * dataset; library code, nothing is printed. */
#ifndef DLK_STORE_GRAPH_H
#define DLK_STORE_GRAPH_H

#include <cJSON.h>

#include "lib/store/store.h"
#include "lib/util/err.h"

/* The dataset of s that holds a file whose sha256 is file_sha (64 hex): 1 with its id in id
 * (the first by id when several do), 0 when none does, -1 with err. */
int dlk_dataset_holding(struct dlk_store *s, const char *file_sha, char id[65], struct dlk_err *err);

/* Every dataset of s made from dataset id, nearest first: a dataset whose provenance names id,
 * or a file of it, or another dataset so made. *out is a new array (the caller's) of
 * {"id": "sha256:ID", "tags": ["NAME@TAG"...] (without the pipelines' key tags),
 *  "made_by": "dlk pipeline P, stage S" | "dlk predict" | KIND, "from": "sha256:ID" (the
 *  dataset of the walk it names), "depth": 1..., and for a training stage's model
 *  "weights_sha256": its weights' digest, what a served model names}. */
int dlk_dataset_downstream(struct dlk_store *s, const char *id, cJSON **out, struct dlk_err *err);

/* What made a dataset, from its provenance (NULL: pushed from files): "dlk pipeline P, stage S",
 * "dlk predict", or its kind. Written into buf. */
const char *dlk_provenance_made_by(const cJSON *prov, char *buf, size_t n);

#endif
