/* Fields of JSON documents dlk reads back (run documents, histories in checkpoints and bundles),
 * checked as they are read, with messages that say where and what was expected. */
#ifndef DLK_UTIL_JSONFIELD_H
#define DLK_UTIL_JSONFIELD_H

#include <cJSON.h>

#include "lib/util/err.h"

/* o[key] as a finite number in [lo, hi] (a whole one when whole) into *out. Otherwise -1 with
 * "WHO: WHERE.KEY is missing (expected a whole number in [1, 10])" (or "out of range"; no
 * "WHERE." when where is empty), code DLK_EXIT_CONFIG. */
int dlk_json_number(const cJSON *o, const char *key, double lo, double hi, int whole, double *out, const char *who,
                    const char *where, struct dlk_err *err);

#endif
