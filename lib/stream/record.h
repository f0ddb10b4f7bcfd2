/* Stream records: what one input record holds and what one output record says.
 *
 * An input record carries ONE example for the model, in one of two forms:
 *   raw   the tensor's bytes, little-endian, row-major, exactly input_size elements of one
 *         datatype (FP32 unless the record's `dlk-datatype` header or the configuration says
 *         otherwise: FP64, INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64, the KServe V2
 *         names); integer values become the float of the same value, as in a V2 JSON request;
 *   json  the KServe V2 JSON tensor form: a request {"inputs": [TENSOR]} with exactly one input,
 *         or the TENSOR alone, TENSOR = {"name": ..., "shape": [...], "datatype": "FP32", "data":
 *         [...]} with `data` flat or nested, its shape giving input_size elements (a leading batch
 *         dimension of 1 is allowed).
 * The record's `content-type` header chooses (application/octet-stream = raw, application/json =
 * json); without one, the configured format applies. Every value must be finite and every integer
 * in its datatype's range. A record that breaks any rule is refused with a message that says what
 * was wrong; the stream sends it to its dead-letter topic and goes on.
 *
 * An output record is one JSON object (see dlk_record_encode). */
#ifndef DLK_STREAM_RECORD_H
#define DLK_STREAM_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "lib/util/buf.h"
#include "lib/util/err.h"

enum dlk_record_format { DLK_RECORD_RAW = 0, DLK_RECORD_JSON };

enum dlk_dtype {
	DLK_DT_FP32 = 0, DLK_DT_FP64, DLK_DT_INT8, DLK_DT_UINT8, DLK_DT_INT16, DLK_DT_UINT16,
	DLK_DT_INT32, DLK_DT_UINT32, DLK_DT_INT64, DLK_DT_UINT64,
	DLK_DT_COUNT
};

/* The V2 name ("FP32", ...) of a datatype, and back (-1 for an unknown name of `len` bytes). */
const char *dlk_dtype_name(enum dlk_dtype t);
int dlk_dtype_parse(const char *s, size_t len);
size_t dlk_dtype_size(enum dlk_dtype t);
/* "raw" / "json", and back (-1 when unknown). */
const char *dlk_record_format_name(enum dlk_record_format f);
int dlk_record_format_parse(const char *s);

/* What records must hold, from the model and the configuration. */
struct dlk_record_spec {
	size_t input_size;            /* elements per example (the model's C*H*W) */
	int shape[3];                 /* the model's input shape, for messages */
	enum dlk_record_format format; /* when a record has no content-type header */
	enum dlk_dtype dtype;         /* raw records without a dlk-datatype header */
	size_t max_bytes;             /* a larger record is refused (0 = no limit) */
};

#define DLK_RECORD_MAX_DEPTH 32   /* nesting of a JSON `data` array */

/* Decodes one record's payload into out[0 .. input_size - 1]. content_type and datatype are
 * the record's header values (not NUL-terminated; NULL when absent). Returns 0, or -1 with a
 * message (code DLK_EXIT_CONFIG) such as "json: data[3]: 1.5 is not an integer (datatype UINT8)". */
int dlk_record_decode(const struct dlk_record_spec *spec, const void *payload, size_t len,
                      const char *content_type, size_t content_type_len,
                      const char *datatype, size_t datatype_len, float *out, struct dlk_err *err);

/* Where a scored record came from. */
struct dlk_record_origin {
	const char *topic;
	int32_t partition;
	int64_t offset;
	const void *key;      /* NULL for a record without a key */
	size_t key_len;
};

/* Appends the output record for one example:
 *   {"class": 3, "label": "Dress", "score": 0.91, "scores": [...], "model": "sha256:HEX",
 *    "input": {"topic": "in", "partition": 2, "offset": 1234, "key": "abc"}}
 * scores are the softmax of the logits (n of them); "label" only when classes names them; the
 * key is a JSON string when it is valid UTF-8 and "key_base64" otherwise; a null key is null. */
void dlk_record_encode(struct dlk_buf *b, const float *logits, int n, char *const *classes,
                       const char *model_digest, const struct dlk_record_origin *origin);

/* softmax(logits) into probs (n values), computed in double; returns the index of the largest
 * logit (the first one on a tie). */
int dlk_softmax(const float *logits, int n, float *probs);

#endif
