/* Decoding input records (raw tensor bytes or a V2 JSON request) and encoding output records. The
 * conversions and the V2 codec are the HTTP front end's (lib/serve), so a record and a request
 * holding the same values score the same. */
#include "lib/stream/record.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/data/text.h"
#include "lib/serve/v2.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

const char *const dlk_record_format_names[] = { "raw", "json", "text", NULL };

const char *dlk_record_format_name(enum dlk_record_format f)
{
	return f >= DLK_RECORD_RAW && f <= DLK_RECORD_TEXT ? dlk_record_format_names[f] : "raw";
}

int dlk_record_format_parse(const char *s)
{
	for (int i = 0; dlk_record_format_names[i]; i++)
		if (!strcmp(s, dlk_record_format_names[i]))
			return i;
	return -1;
}

/* A header value, printable and bounded, for messages. */
static void quote_value(char *dst, size_t cap, const char *s, size_t len)
{
	size_t j = 0;

	for (size_t i = 0; i < len && j + 5 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		j += (size_t)snprintf(dst + j, cap - j, c >= 0x20 && c < 0x7f && c != '\'' ? "%c" : "\\x%02x", c);
	}
	if (j < cap)
		dst[j] = 0;
}

/* the media type without parameters ("application/json; charset=utf-8") */
static int media_is(const char *ct, size_t len, const char *type)
{
	size_t n = 0;

	while (n < len && ct[n] != ';' && ct[n] != ' ' && ct[n] != '\t')
		n++;
	return n == strlen(type) && !strncasecmp(ct, type, n);
}

static int decode_raw(const struct dlk_record_spec *spec, enum dlk_dtype t, const unsigned char *p,
                      size_t len, float *out, struct dlk_err *err)
{
	const struct dlk_serve_sig *sig = spec->sig;
	size_t want = sig->in_size * dlk_dtype_size(t), bad = 0;
	char shape[64];

	if (len != want) {
		dlk_serve_shape_str(sig, 0, shape, sizeof(shape));
		return dlk_errf(err, DLK_EXIT_CONFIG, "raw: %zu bytes, expected %zu (%zu %s values for input %s)", len,
		                want, sig->in_size, dlk_dtype_name(t), shape);
	}
	if (dlk_serve_convert_binary(sig, t, p, sig->in_size, out, &bad))
		return dlk_errf(err, DLK_EXIT_CONFIG, "raw: element %zu (%s) is not a finite number", bad,
		                dlk_dtype_name(t));
	return 0;
}

static int decode_json(const struct dlk_record_spec *spec, const char *p, size_t len, float *out,
                       struct dlk_err *err)
{
	struct dlk_v2_request req = DLK_V2_REQUEST_INIT;
	char msg[512];
	int rc = -1;

	if (dlk_v2_parse_infer(spec->sig, p, len, -1, &spec->lim, &req, msg, sizeof(msg))) {
		dlk_errf(err, DLK_EXIT_CONFIG, "json: %s", msg);
		goto out;
	}
	if (req.rows != 1) {
		dlk_errf(err, DLK_EXIT_CONFIG, "json: %lld rows: a record carries one example", req.rows);
		goto out;
	}
	memcpy(out, req.x, sizeof(float) * spec->sig->in_size);
	rc = 0;
out:
	dlk_v2_request_release(&req);
	return rc;
}

/* A text model's record: its value is the text (valid UTF-8, as the texts of JSON and of the
 * training data are: a record of other bytes is not a text sent by mistake for the model) */
static int decode_text(const struct dlk_record_spec *spec, const unsigned char *p, size_t len, float *out,
                       struct dlk_err *err)
{
	const struct dlk_serve_sig *sig = spec->sig;
	int32_t *ids;

	if (!sig->tokenizer)
		return dlk_errf(err, DLK_EXIT_CONFIG, "text: the model '%s' takes no texts (it has no tokenizer): send "
		                "its input as raw tensor bytes or a V2 request", sig->name);
	if (!dlk_utf8_valid((const char *)p, len))
		return dlk_errf(err, DLK_EXIT_CONFIG, "text: %zu bytes that are not UTF-8 text (the record's value is "
		                "one text, which the server tokenizes)", len);
	ids = xmalloc(sig->in_size * sizeof(*ids));
	dlk_text_encode_row(sig->tokenizer, p, len, (int)sig->in_size, ids, out);
	free(ids);
	return 0;
}

/* A value finite in its datatype can still leave float32's range once converted and scaled
 * (an FP64 1e300, or an FP32 3e38 times a scale above 1): the network must never see it. */
static int check_finite(const struct dlk_record_spec *spec, const float *out, struct dlk_err *err)
{
	for (size_t i = 0; i < spec->sig->in_size; i++)
		if (!isfinite(out[i]))
			return dlk_errf(err, DLK_EXIT_CONFIG, "element %zu is beyond float32's range once scaled", i);
	return 0;
}

static int decode(const struct dlk_record_spec *spec, const void *payload, size_t len,
                  const char *content_type, size_t content_type_len,
                  const char *datatype, size_t datatype_len, float *out, struct dlk_err *err)
{
	enum dlk_record_format fmt = spec->format;
	enum dlk_dtype t = spec->dtype;
	char q[96];

	if (!payload)
		return dlk_errf(err, DLK_EXIT_CONFIG, "the record has no value (a tombstone)");
	if (spec->max_bytes && len > spec->max_bytes)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%zu bytes: larger than the %zu a record may have", len,
		                spec->max_bytes);
	if (content_type) {
		if (media_is(content_type, content_type_len, "application/json")) {
			fmt = DLK_RECORD_JSON;
		} else if (media_is(content_type, content_type_len, "application/octet-stream")) {
			fmt = DLK_RECORD_RAW;
		} else if (media_is(content_type, content_type_len, "text/plain")) {
			fmt = DLK_RECORD_TEXT;
		} else {
			quote_value(q, sizeof(q), content_type, content_type_len);
			return dlk_errf(err, DLK_EXIT_CONFIG, "content-type '%s': expected application/octet-stream "
			                "(raw tensor bytes), application/json (a V2 request) or, for a text model, "
			                "text/plain (one text)", q);
		}
	}
	if (fmt == DLK_RECORD_JSON)
		return decode_json(spec, payload, len, out, err);
	if (fmt == DLK_RECORD_TEXT)
		return decode_text(spec, payload, len, out, err);
	if (datatype) {
		t = dlk_dtype_parse(datatype, datatype_len);
		if (!dlk_dtype_numeric(t)) {
			quote_value(q, sizeof(q), datatype, datatype_len);
			return dlk_errf(err, DLK_EXIT_CONFIG, "dlk-datatype '%s': expected a number type of the V2 "
			                "protocol (UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64, FP16, FP32, "
			                "FP64)", q);
		}
	}
	return decode_raw(spec, t, payload, len, out, err);
}

int dlk_record_decode(const struct dlk_record_spec *spec, const void *payload, size_t len,
                      const char *content_type, size_t content_type_len,
                      const char *datatype, size_t datatype_len, float *out, struct dlk_err *err)
{
	if (decode(spec, payload, len, content_type, content_type_len, datatype, datatype_len, out, err))
		return -1;
	return check_finite(spec, out, err);
}

void dlk_record_encode(struct dlk_buf *b, const float *logits, int n, char *const *classes,
                       const char *model_digest, const struct dlk_record_origin *o)
{
	float small[256], *probs = n <= 256 ? small : xmalloc(sizeof(float) * (size_t)n);
	int best = 0;

	dlk_serve_softmax(logits, 1, n, probs);
	for (int i = 1; i < n; i++)
		if (logits[i] > logits[best])
			best = i;
	dlk_buf_addf(b, "{\"class\":%d,", best);
	if (classes && classes[best]) {
		dlk_buf_adds(b, "\"label\":");
		jd_write_string(b, classes[best], strlen(classes[best]));
		dlk_buf_addc(b, ',');
	}
	dlk_buf_adds(b, "\"score\":");
	jd_write_float(b, n > 0 ? probs[best] : 0.0f);
	dlk_buf_adds(b, ",\"scores\":[");
	for (int i = 0; i < n; i++) {
		if (i)
			dlk_buf_addc(b, ',');
		jd_write_float(b, probs[i]);
	}
	if (probs != small)
		free(probs);
	dlk_buf_adds(b, "],\"model\":");
	jd_write_string(b, model_digest, strlen(model_digest));
	dlk_buf_adds(b, ",\"input\":{\"topic\":");
	jd_write_string(b, o->topic, strlen(o->topic));
	dlk_buf_addf(b, ",\"partition\":%d,\"offset\":%lld,", (int)o->partition, (long long)o->offset);
	if (!o->key) {
		dlk_buf_adds(b, "\"key\":null");
	} else if (dlk_utf8_valid(o->key, o->key_len)) {
		dlk_buf_adds(b, "\"key\":");
		jd_write_string(b, o->key, o->key_len);
	} else {
		dlk_buf_adds(b, "\"key_base64\":");
		dlk_buf_addc(b, '"');
		dlk_buf_add_base64(b, o->key, o->key_len);
		dlk_buf_addc(b, '"');
	}
	dlk_buf_adds(b, "}}");
}
