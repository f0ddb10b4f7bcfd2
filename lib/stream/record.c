/* Decoding input records (raw tensor bytes or V2 JSON) and encoding output records. */
#include "lib/stream/record.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/project/check.h"
#include "lib/util/mem.h"

static const char *const dtype_names[DLK_DT_COUNT] = {
	"FP32", "FP64", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64",
};
static const size_t dtype_sizes[DLK_DT_COUNT] = { 4, 8, 1, 1, 2, 2, 4, 4, 8, 8 };

const char *dlk_dtype_name(enum dlk_dtype t)
{
	return (int)t >= 0 && t < DLK_DT_COUNT ? dtype_names[t] : "?";
}

size_t dlk_dtype_size(enum dlk_dtype t)
{
	return (int)t >= 0 && t < DLK_DT_COUNT ? dtype_sizes[t] : 0;
}

int dlk_dtype_parse(const char *s, size_t len)
{
	for (int i = 0; i < DLK_DT_COUNT; i++)
		if (strlen(dtype_names[i]) == len && !strncasecmp(s, dtype_names[i], len))
			return i;
	return -1;
}

const char *dlk_record_format_name(enum dlk_record_format f)
{
	return f == DLK_RECORD_JSON ? "json" : "raw";
}

int dlk_record_format_parse(const char *s)
{
	if (!strcmp(s, "raw"))
		return DLK_RECORD_RAW;
	if (!strcmp(s, "json"))
		return DLK_RECORD_JSON;
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

/* Range of each integer datatype, as doubles (INT64/UINT64 bounds are exact powers of two). */
static int int_in_range(enum dlk_dtype t, double v)
{
	switch (t) {
	case DLK_DT_INT8: return v >= -128 && v <= 127;
	case DLK_DT_UINT8: return v >= 0 && v <= 255;
	case DLK_DT_INT16: return v >= -32768 && v <= 32767;
	case DLK_DT_UINT16: return v >= 0 && v <= 65535;
	case DLK_DT_INT32: return v >= -2147483648.0 && v <= 2147483647.0;
	case DLK_DT_UINT32: return v >= 0 && v <= 4294967295.0;
	case DLK_DT_INT64: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
	case DLK_DT_UINT64: return v >= 0 && v < 18446744073709551616.0;
	default: return 1;
	}
}

static int decode_raw(const struct dlk_record_spec *spec, enum dlk_dtype t, const unsigned char *p,
                      size_t len, float *out, struct dlk_err *err)
{
	size_t esz = dtype_sizes[t], want = spec->input_size * esz;

	if (len != want)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "raw: %zu bytes, expected %zu (%zu %s values for input %dx%dx%d)", len, want,
		                spec->input_size, dtype_names[t], spec->shape[0], spec->shape[1], spec->shape[2]);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (t == DLK_DT_FP32) {
		/* the common case, straight into place; then the same check as below */
		memcpy(out, p, want);
		for (size_t i = 0; i < spec->input_size; i++)
			if (!isfinite(out[i]))
				return dlk_errf(err, DLK_EXIT_CONFIG, "raw: element %zu (FP32) is %g, not a finite float32",
				                i, (double)out[i]);
		return 0;
	}
#endif
	for (size_t i = 0; i < spec->input_size; i++, p += esz) {
		uint64_t u = 0;
		double v;
		for (size_t k = 0; k < esz; k++)
			u |= (uint64_t)p[k] << (8 * k);
		switch (t) {
		case DLK_DT_FP32: { uint32_t w = (uint32_t)u; float f; memcpy(&f, &w, 4); v = f; break; }
		case DLK_DT_FP64: memcpy(&v, &u, 8); break;
		case DLK_DT_INT8: v = (int8_t)u; break;
		case DLK_DT_UINT8: v = (uint8_t)u; break;
		case DLK_DT_INT16: v = (int16_t)u; break;
		case DLK_DT_UINT16: v = (uint16_t)u; break;
		case DLK_DT_INT32: v = (int32_t)u; break;
		case DLK_DT_UINT32: v = (uint32_t)u; break;
		case DLK_DT_INT64: v = (double)(int64_t)u; break;
		default: v = (double)u; break;
		}
		if (!isfinite(v) || fabs(v) > 3.4e38)
			return dlk_errf(err, DLK_EXIT_CONFIG, "raw: element %zu (%s) is %g, not a finite float32",
			                i, dtype_names[t], v);
		out[i] = (float)v;
	}
	return 0;
}

struct flat {
	enum dlk_dtype t;
	float *out;
	size_t n, cap;
	struct dlk_err *err;
};

/* Walks `data` (flat or nested arrays of numbers, row-major) into f->out. */
static int flatten(struct flat *f, const cJSON *a, int depth, char *path, size_t plen)
{
	size_t i = 0;
	const cJSON *e;

	if (depth > DLK_RECORD_MAX_DEPTH)
		return dlk_errf(f->err, DLK_EXIT_CONFIG, "json: %s: nested deeper than %d", path, DLK_RECORD_MAX_DEPTH);
	cJSON_ArrayForEach(e, a) {
		size_t len = strlen(path);
		if (len + 24 < plen)
			snprintf(path + len, plen - len, "[%zu]", i);
		if (cJSON_IsArray(e)) {
			if (flatten(f, e, depth + 1, path, plen))
				return -1;
		} else if (cJSON_IsNumber(e)) {
			double v = e->valuedouble;
			if (f->n >= f->cap)
				return dlk_errf(f->err, DLK_EXIT_CONFIG, "json: data: more than the %zu values the shape holds",
				                f->cap);
			if (f->t >= DLK_DT_INT8 && (v != floor(v) || !int_in_range(f->t, v)))
				return dlk_errf(f->err, DLK_EXIT_CONFIG, "json: %s: %.17g is not %s (datatype %s)", path, v,
				                v != floor(v) ? "an integer" : "in range", dtype_names[f->t]);
			if (!isfinite(v) || fabs(v) > 3.4e38)
				return dlk_errf(f->err, DLK_EXIT_CONFIG, "json: %s: %g is not a finite float32", path, v);
			f->out[f->n++] = (float)v;
		} else {
			return dlk_errf(f->err, DLK_EXIT_CONFIG, "json: %s: expected a number, not %s", path,
			                cJSON_IsString(e) ? "a string" : cJSON_IsBool(e) ? "a boolean" :
			                cJSON_IsNull(e) ? "null" : "an object");
		}
		path[len] = 0;
		i++;
	}
	return 0;
}

static int decode_json(const struct dlk_record_spec *spec, const char *p, size_t len, float *out,
                       struct dlk_err *err)
{
	cJSON *root = cJSON_ParseWithLength(p, len), *t;
	const cJSON *shape, *dt, *data, *d;
	char path[256] = "data";
	size_t count = 1;
	int rank = 0, rc = -1, ti;

	if (!root)
		return dlk_errf(err, DLK_EXIT_CONFIG, "json: not valid JSON");
	t = root;
	if (!cJSON_IsObject(root)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "json: expected an object (a V2 request or one tensor)");
		goto out;
	}
	if (cJSON_HasObjectItem(root, "inputs")) {
		const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
		int n = cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1;
		if (n != 1) {
			dlk_errf(err, DLK_EXIT_CONFIG, "json: inputs: expected an array of exactly one tensor%s",
			         n > 1 ? " (a record carries one example)" : "");
			goto out;
		}
		t = cJSON_GetArrayItem(in, 0);
		if (!cJSON_IsObject(t)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "json: inputs[0]: expected an object");
			goto out;
		}
	}
	shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
	dt = cJSON_GetObjectItemCaseSensitive(t, "datatype");
	data = cJSON_GetObjectItemCaseSensitive(t, "data");
	if (!cJSON_IsArray(shape) || !cJSON_IsString(dt) || !cJSON_IsArray(data)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "json: a tensor needs \"shape\" (array), \"datatype\" (string) and "
		         "\"data\" (array)%s", cJSON_HasObjectItem(t, "b64") || cJSON_HasObjectItem(t, "instances") ?
		         "; this looks like another protocol" : "");
		goto out;
	}
	ti = dlk_dtype_parse(dt->valuestring, strlen(dt->valuestring));
	if (ti < 0) {
		char q[64];
		quote_value(q, sizeof(q), dt->valuestring, strlen(dt->valuestring));
		dlk_errf(err, DLK_EXIT_CONFIG, "json: datatype '%s' is not one of FP32, FP64, INT8, UINT8, INT16, "
		         "UINT16, INT32, UINT32, INT64, UINT64", q);
		goto out;
	}
	cJSON_ArrayForEach(d, shape) {
		if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble != floor(d->valuedouble) ||
		    d->valuedouble > 1e12) {
			dlk_errf(err, DLK_EXIT_CONFIG, "json: shape[%d]: expected a non-negative integer", rank);
			goto out;
		}
		count = d->valuedouble == 0 ? 0 : count > (size_t)1e12 ? count : count * (size_t)d->valuedouble;
		rank++;
	}
	if (count != spec->input_size) {
		dlk_errf(err, DLK_EXIT_CONFIG, "json: shape holds %zu values, the model takes %zu (%dx%dx%d)",
		         count, spec->input_size, spec->shape[0], spec->shape[1], spec->shape[2]);
		goto out;
	}
	struct flat f = { (enum dlk_dtype)ti, out, 0, spec->input_size, err };
	if (flatten(&f, data, 1, path, sizeof(path)))
		goto out;
	if (f.n != spec->input_size) {
		dlk_errf(err, DLK_EXIT_CONFIG, "json: data holds %zu values, the shape says %zu", f.n, spec->input_size);
		goto out;
	}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

int dlk_record_decode(const struct dlk_record_spec *spec, const void *payload, size_t len,
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
		} else {
			quote_value(q, sizeof(q), content_type, content_type_len);
			return dlk_errf(err, DLK_EXIT_CONFIG, "content-type '%s': expected application/octet-stream "
			                "(raw tensor bytes) or application/json (V2 tensor)", q);
		}
	}
	if (fmt == DLK_RECORD_JSON)
		return decode_json(spec, payload, len, out, err);
	if (datatype) {
		int d = dlk_dtype_parse(datatype, datatype_len);
		if (d < 0) {
			quote_value(q, sizeof(q), datatype, datatype_len);
			return dlk_errf(err, DLK_EXIT_CONFIG, "dlk-datatype '%s': expected one of FP32, FP64, INT8, "
			                "UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64", q);
		}
		t = (enum dlk_dtype)d;
	}
	return decode_raw(spec, t, payload, len, out, err);
}

int dlk_softmax(const float *logits, int n, float *probs)
{
	int best = 0;
	double max, sum = 0;

	for (int i = 1; i < n; i++)
		if (logits[i] > logits[best])
			best = i;
	max = n > 0 ? logits[best] : 0;
	for (int i = 0; i < n; i++)
		sum += exp((double)logits[i] - max);
	for (int i = 0; i < n; i++)
		probs[i] = (float)(exp((double)logits[i] - max) / sum);
	return best;
}

static void add_json_string(struct dlk_buf *b, const char *s, size_t len)
{
	dlk_buf_addc(b, '"');
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			dlk_buf_addf(b, "\\%c", c);
		else if (c < 0x20)
			dlk_buf_addf(b, "\\u%04x", c);
		else
			dlk_buf_addc(b, (char)c);
	}
	dlk_buf_addc(b, '"');
}

static void add_base64(struct dlk_buf *b, const unsigned char *p, size_t len)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	dlk_buf_addc(b, '"');
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) |
		             (i + 2 < len ? p[i + 2] : 0);
		dlk_buf_addc(b, tab[v >> 18 & 63]);
		dlk_buf_addc(b, tab[v >> 12 & 63]);
		dlk_buf_addc(b, i + 1 < len ? tab[v >> 6 & 63] : '=');
		dlk_buf_addc(b, i + 2 < len ? tab[v & 63] : '=');
	}
	dlk_buf_addc(b, '"');
}

void dlk_record_encode(struct dlk_buf *b, const float *logits, int n, char *const *classes,
                       const char *model_digest, const struct dlk_record_origin *o)
{
	float small[256], *probs = n <= 256 ? small : xmalloc(sizeof(float) * (size_t)n);
	int best = dlk_softmax(logits, n, probs);

	dlk_buf_addf(b, "{\"class\":%d,", best);
	if (classes && classes[best]) {
		dlk_buf_adds(b, "\"label\":");
		add_json_string(b, classes[best], strlen(classes[best]));
		dlk_buf_addc(b, ',');
	}
	/* %.9g keeps every bit of a float32 */
	dlk_buf_addf(b, "\"score\":%.9g,\"scores\":[", n > 0 ? probs[best] : 0.0f);
	for (int i = 0; i < n; i++)
		dlk_buf_addf(b, i ? ",%.9g" : "%.9g", probs[i]);
	if (probs != small)
		free(probs);
	dlk_buf_adds(b, "],\"model\":");
	add_json_string(b, model_digest, strlen(model_digest));
	dlk_buf_adds(b, ",\"input\":{\"topic\":");
	add_json_string(b, o->topic, strlen(o->topic));
	dlk_buf_addf(b, ",\"partition\":%d,\"offset\":%lld,", (int)o->partition, (long long)o->offset);
	if (!o->key) {
		dlk_buf_adds(b, "\"key\":null");
	} else if (check_utf8(o->key, o->key_len)) {
		dlk_buf_adds(b, "\"key\":");
		add_json_string(b, o->key, o->key_len);
	} else {
		dlk_buf_adds(b, "\"key_base64\":");
		add_base64(b, o->key, o->key_len);
	}
	dlk_buf_adds(b, "}}");
}
