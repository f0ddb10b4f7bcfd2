/* YAML <-> JSON (cJSON) under the YAML 1.2 core schema.
 *
 * Reading (lib/util/ytree's reader, aliases copied): a stream of one or more documents becomes a
 * cJSON array holding one value per document. Plain scalars are typed by the core schema: null (`null`, `Null`, `NULL`, `~`,
 * empty), bool (`true`/`True`/`TRUE`/`false`/...), int (`[-+]?[0-9]+`, `0o[0-7]+`,
 * `0x[0-9a-fA-F]+`), float (`1.5`, `1e3`, `.inf`, `-.Inf`, `.nan`, ...); everything else and every
 * quoted or block scalar is a string (so `yes`, `on`, `0x1g`, `1_000` stay strings).
 *
 * Integers: cJSON keeps numbers as doubles and prints them with 15 significant digits. An
 * integer whose magnitude is below 10^15 becomes a cJSON number (exact, printed exactly). A larger
 * one that fits in int64 becomes a cJSON *raw* node holding its canonical decimal digits (cJSON_IsRaw; cJSON_Print writes the digits unchanged, and the YAML
 * writer below writes them plain), so Kubernetes int64 fields keep every digit. An integer
 * outside int64 is an error. `.inf` and `.nan` become the doubles inf/nan (cJSON prints those
 * as JSON null; the YAML writer prints `.inf`/`-.inf`/`.nan`).
 *
 * Explicit tags: `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!map`, `!!seq` and the
 * non-specific `!` are honoured; any other tag is an error. Merge keys (`<<`) are YAML 1.1 and are
 * ordinary string keys here. Anchors and aliases are resolved (an alias is a copy) with a bound on
 * the total number of nodes, so a "billion laughs" document fails instead of eating memory.
 * Duplicate keys, non-scalar keys, strings holding NUL and nesting deeper than YAMLJSON_MAX_DEPTH
 * are errors. Errors read "NAME:LINE:COLUMN: what was wrong" (1-based). Documents that are empty
 * or hold only comments are skipped.
 *
 * Writing: block style, keys in object order, scalars quoted exactly when a YAML 1.2 *or* YAML
 * 1.1 reader (kubectl) could otherwise read them as something else, multi-line strings as literal
 * blocks when that is exact. yamljson_parse(yamljson_emit(v)) gives back v. */
#ifndef DLK_UTIL_YAMLJSON_H
#define DLK_UTIL_YAMLJSON_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/util/buf.h"
#include "lib/util/err.h"

#define YAMLJSON_MAX_INPUT (16u << 20)   /* bytes of YAML text read at most */
#define YAMLJSON_MAX_NODES 1000000u      /* nodes created, aliases' copies included */
#define YAMLJSON_MAX_DEPTH 256           /* nesting of mappings and sequences */

/* Parses every document of `text` (len bytes, need not be NUL-terminated) into a new cJSON array
 * (caller owns it, cJSON_Delete). `name` prefixes error messages. On failure returns NULL, err has
 * code DLK_EXIT_CONFIG and "NAME:LINE:COLUMN: problem"; when err_line is not NULL it receives the
 * 1-based line of the problem (0 when there is none, e.g. input too large). */
cJSON *yamljson_parse(const char *text, size_t len, const char *name, size_t *err_line,
                      struct dlk_err *err);

/* Writes v as one YAML document in block style (no leading "---"), ending in a newline.
 * Returns a new string (caller frees) or NULL with err filled when v holds something YAML cannot
 * carry exactly (a string that is not valid UTF-8, a key longer than 1000 bytes). */
char *yamljson_emit(const cJSON *v, struct dlk_err *err);

/* Writes every element of the array `docs` as a document, each but the first preceded by "---".
 * Returns a new string (caller frees) or NULL with err filled. */
char *yamljson_emit_stream(const cJSON *docs, struct dlk_err *err);

/* Appends s (len bytes) to b as a double-quoted YAML scalar that any YAML reader reads back as
 * exactly these bytes and as a string, whatever the bytes are (quotes, backslashes, newlines,
 * `{{`, leading `*`/`&`/`!`, Unicode line separators, ...). Returns -1 (and appends nothing) when
 * s is not valid UTF-8 or holds a NUL byte, 0 otherwise. */
int yamljson_quote(struct dlk_buf *b, const char *s, size_t len);

/* Appends a number as a plain YAML scalar that reads back as the same double under the core
 * schema: integers without a fraction, others in the shortest exact form, .inf/-.inf/.nan. */
void yamljson_number(struct dlk_buf *b, double d);

#endif
