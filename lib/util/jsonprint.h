/* JSON as people read it: what `-o json` prints. */
#ifndef DLK_UTIL_JSONPRINT_H
#define DLK_UTIL_JSONPRINT_H

#include <cJSON.h>
#include <stdio.h>

struct dlk_err;

/* v as indented JSON the way jq and kubectl print it: each member and item on a line of its own,
 * two spaces a level, "key": value (cJSON_Print indents with tabs and keeps "[{" on one line).
 * Scalars are written by cJSON. The caller frees; NULL when out of memory. */
char *dlk_json_print(const cJSON *v);

/* A command's document as `-o json` prints it (dlk_json_print and a newline) or, with json 0, as
 * `-o yaml` does (yamljson_emit): the text to write, which the caller frees; NULL with err set when
 * it cannot be made. */
char *dlk_doc_text(const cJSON *doc, int json, struct dlk_err *err);
/* dlk_doc_text written to f: 0, or -1 with err set. */
int dlk_doc_print(FILE *f, const cJSON *doc, int json, struct dlk_err *err);

#endif
