/* Text as training data: rows of a CSV file (with a header row naming the columns) or a JSON Lines
 * file (one object per line), each with a text and a label, tokenized into fixed-length sequences
 * of ids (lib/data/bpe.h) padded with the tokenizer's pad id. Nothing here prints or exits. */
#ifndef DLK_DATA_TEXT_H
#define DLK_DATA_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "lib/data/bpe.h"
#include "lib/data/decode.h"
#include "lib/util/err.h"

struct dlk_text_rows {
	size_t n;
	char **text;          /* n texts (NUL-terminated, may hold NULs: see len), owned */
	size_t *len;
	char **label;         /* n labels as written (a JSON number as its integer text), owned */
	size_t *line;         /* the 1-based line each row starts on */
};
#define DLK_TEXT_ROWS_INIT { 0, NULL, NULL, NULL, NULL }
void dlk_text_rows_release(struct dlk_text_rows *r);

/* True when name ends in .jsonl, .ndjson or .json (any case, before a compression suffix is
 * removed by the caller): JSON Lines; otherwise CSV. */
int dlk_text_is_jsonl_name(const char *name);

/* Reads the rows. CSV: RFC 4180 (quoted fields with "" escapes, newlines inside quotes, CRLF or
 * LF, blank lines skipped); the first row names the columns and must hold `column` and `label`.
 * JSON Lines: every non-blank line an object with a string `column` and a string or integer
 * `label`. Errors read "NAME:LINE: ..." and say what the row lacks. With sep (float targets,
 * dlk_text_targets): a label may be empty (a row without labels), and a JSON label any number
 * or an array of strings and numbers, kept joined by sep. */
int dlk_text_rows_parse(const void *buf, size_t len, const char *name, int jsonl, const char *column,
                        const char *label, const char *sep, struct dlk_text_rows *out, struct dlk_err *err);

/* Float targets from the labels, each split by sep. multilabel: a 0/1 target per label, the
 * labels being data.classes (classes, n_classes; a name or an index), else integers 0..max when
 * every label is one, else the distinct labels in byte order, returned in *found (caller frees
 * each and the array; *n_found of them). Otherwise (regression): each label the same count of
 * numbers. *t gets n * *target_size floats (caller frees). Errors name the row's line. */
int dlk_text_targets(const struct dlk_text_rows *r, const char *name, int multilabel, const char *sep,
                     const char *const *classes, int n_classes, float **t, size_t *target_size, char ***found,
                     int *n_found, struct dlk_err *err);

/* Labels to class indices. With classes (n_classes names, borrowed): a label is one of the names
 * or an index below n_classes. Without: labels that are all non-negative integers are those
 * integers; otherwise the distinct labels in byte order are the classes, returned in *found
 * (caller frees each and the array; *n_found of them, else *found NULL). */
int dlk_text_labels(const struct dlk_text_rows *r, const char *name, const char *const *classes, int n_classes,
                    int32_t *y, char ***found, int *n_found, struct dlk_err *err);

/* Encodes every row into `length` ids, as floats (exact below 2^24): the first `length` ids of the
 * text, then the pad id. x holds n * length floats. Runs on the compute pool. */
void dlk_text_encode_rows(const struct dlk_tokenizer *t, const struct dlk_text_rows *r, int length, float *x);
/* One text so (what the rows above and a served text model's BYTES inputs both go through):
 * row holds `length` floats, ids is scratch for `length` ids. */
void dlk_text_encode_row(const struct dlk_tokenizer *t, const void *text, size_t len, int length, int32_t *ids,
                         float *row);

/* mask[i] = 1 where ids[i] is a token, 0 where it is padding (n values). */
void dlk_text_mask(const struct dlk_tokenizer *t, const float *ids, size_t n, uint8_t *mask);

#endif
