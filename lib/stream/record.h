/* Stream records: what one input record holds and what one output record says.
 *
 * An input record carries ONE example for the model, as an HTTP request to dlk serve would: raw
 * values as the training data holds them, scaled on the way in exactly as training scaled them
 * (lib/serve/tensor.h), in one of two forms:
 *   raw   the tensor's bytes, little-endian, row-major, exactly the model's input size of one
 *         datatype (FP32 unless the record's `dlk-datatype` header or the configuration says
 *         another KServe V2 number type: UINT8, INT16, FP64, ...);
 *   json  a KServe V2 inference request with one row, {"inputs": [{"name": "input", "shape":
 *         [1, ...], "datatype": ..., "data": [...]}]}, read by the HTTP front end's own codec.
 * A text model's (sig->tokenizer) records may also be
 *   text  the record's value is one UTF-8 text, which the server tokenizes as training did
 *         (dlk_text_encode_row, lib/data/text.h; the V2 route's BYTES inputs go through it too);
 *         its raw and json records are the token ids, or a V2 request with a BYTES text.
 * The record's `content-type` header chooses (application/octet-stream = raw, application/json =
 * json, text/plain = text); without one, the configured format applies. A record that breaks a rule is refused with
 * a message that says what was wrong; the stream sends it to its dead-letter topic and goes on.
 *
 * An output record is one JSON object (see dlk_record_encode). */
#ifndef DLK_STREAM_RECORD_H
#define DLK_STREAM_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "lib/serve/jsondoc.h"
#include "lib/serve/tensor.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

enum dlk_record_format { DLK_RECORD_RAW = 0, DLK_RECORD_JSON, DLK_RECORD_TEXT };

/* The formats' names in enum order, NULL-terminated (what a configuration may say). */
extern const char *const dlk_record_format_names[];
/* "raw" / "json" / "text", and back (-1 when unknown). */
const char *dlk_record_format_name(enum dlk_record_format f);
int dlk_record_format_parse(const char *s);

/* What records must hold, from the model and the configuration. */
struct dlk_record_spec {
	const struct dlk_serve_sig *sig;   /* the model: input size, shape, scaling */
	enum dlk_record_format format;     /* when a record has no content-type header */
	enum dlk_dtype dtype;              /* raw records without a dlk-datatype header */
	size_t max_bytes;                  /* a larger record is refused (0 = no limit) */
	struct jd_limits lim;              /* JSON records: nesting and value limits */
};

/* Decodes one record's payload into out[0 .. sig->in_size - 1] (network inputs, scaled).
 * content_type and datatype are the record's header values (not NUL-terminated; NULL when
 * absent). Returns 0, or -1 with a message (code DLK_EXIT_CONFIG) such as
 * "raw: 15 bytes, expected 784 (784 UINT8 values for input [-1,1,28,28])". */
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
 * key is a JSON string when it is valid UTF-8 without NUL bytes and "key_base64" otherwise; a null
 * key is null. */
void dlk_record_encode(struct dlk_buf *b, const float *logits, int n, char *const *classes,
                       const char *model_digest, const struct dlk_record_origin *origin);

#endif
