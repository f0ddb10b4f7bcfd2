/* A dataset's provenance: the member "provenance.json" that datasets made by dlk carry (dlk
 * predict's predictions: lib/serve/predict.h), naming what they were made from. Datasets pushed
 * from files have none. */
#ifndef DLK_STORE_PROVENANCE_H
#define DLK_STORE_PROVENANCE_H

#include <cJSON.h>

#include "lib/store/manifest.h"
#include "lib/store/store.h"
#include "lib/util/err.h"

#define DLK_PROVENANCE_FILE "provenance.json"
#define DLK_PROVENANCE_MAX (1u << 20)

/* Reads m's provenance.json from s, verified against the sha256 the manifest lists, and parses
 * it: *out is the object (caller's), or NULL when the dataset has none. A member that does not
 * hash to its digest, is larger than DLK_PROVENANCE_MAX or is not a JSON object is
 * DLK_EXIT_CONFIG naming it. */
int dlk_dataset_provenance(struct dlk_store *s, const struct dlk_manifest *m, cJSON **out, struct dlk_err *err);

#endif
