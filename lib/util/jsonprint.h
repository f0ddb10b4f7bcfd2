/* JSON as people read it: what `-o json` prints. */
#ifndef DLK_UTIL_JSONPRINT_H
#define DLK_UTIL_JSONPRINT_H

#include <cJSON.h>

/* v as indented JSON the way jq and kubectl print it: each member and item on a line of its own,
 * two spaces a level, "key": value (cJSON_Print indents with tabs and keeps "[{" on one line).
 * Scalars are written by cJSON. The caller frees; NULL when out of memory. */
char *dlk_json_print(const cJSON *v);

#endif
