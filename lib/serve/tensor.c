/* Datatypes, the model signature's shapes, and raw values -> scaled network inputs. */
#include "lib/serve/tensor.h"

#include "lib/data/bpe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	size_t size;
} dtypes[] = {
	[DLK_DT_INVALID] = { "INVALID", 0 }, [DLK_DT_BOOL] = { "BOOL", 1 },   [DLK_DT_UINT8] = { "UINT8", 1 },
	[DLK_DT_UINT16] = { "UINT16", 2 },   [DLK_DT_UINT32] = { "UINT32", 4 }, [DLK_DT_UINT64] = { "UINT64", 8 },
	[DLK_DT_INT8] = { "INT8", 1 },       [DLK_DT_INT16] = { "INT16", 2 },   [DLK_DT_INT32] = { "INT32", 4 },
	[DLK_DT_INT64] = { "INT64", 8 },     [DLK_DT_FP16] = { "FP16", 2 },     [DLK_DT_FP32] = { "FP32", 4 },
	[DLK_DT_FP64] = { "FP64", 8 },       [DLK_DT_BYTES] = { "BYTES", 0 },
};
#define N_DTYPES (int)(sizeof(dtypes) / sizeof(dtypes[0]))

const char *dlk_dtype_name(enum dlk_dtype t)
{
	return (int)t > 0 && (int)t < N_DTYPES ? dtypes[t].name : "INVALID";
}

enum dlk_dtype dlk_dtype_parse(const char *s, size_t len)
{
	for (int i = 1; i < N_DTYPES; i++)
		if (strlen(dtypes[i].name) == len && !memcmp(dtypes[i].name, s, len))
			return (enum dlk_dtype)i;
	return DLK_DT_INVALID;
}

size_t dlk_dtype_size(enum dlk_dtype t)
{
	return (int)t > 0 && (int)t < N_DTYPES ? dtypes[t].size : 0;
}

int dlk_dtype_numeric(enum dlk_dtype t)
{
	return t >= DLK_DT_UINT8 && t <= DLK_DT_FP64;
}

void dlk_serve_sig_init_lut(struct dlk_serve_sig *sig)
{
	/* the very expression lib/data/load.c uses, so a UINT8 pixel is the float training saw */
	for (int i = 0; i < 256; i++)
		sig->lut[i] = ((float)i * sig->scale - sig->mean) / sig->std;
	/* and lib/data/load.c's per-channel one (set_images) */
	for (int c = 0; c < sig->channels; c++)
		for (int i = 0; i < 256; i++)
			sig->lut_c[c][i] = ((float)i * sig->scale - sig->channel_mean[c]) / sig->channel_std[c];
	/* the scale idx and tar data are read with (lib/project/project.c's default): raw values
	 * are pixels; a CSV's values (scale 1) have no range the server could hold requests to */
	sig->pixels = sig->scale == (float)(1.0 / 255.0);
}

void dlk_serve_sig_preprocessed(const struct dlk_serve_sig *sig, struct dlk_serve_sig *out)
{
	*out = *sig;
	out->scale = 1.0f;
	out->mean = 0.0f;
	out->std = 1.0f;
	out->channels = 0;
	dlk_serve_sig_init_lut(out);
}

const char *dlk_input_form_name(enum dlk_input_form form)
{
	return form == DLK_INPUT_PREPROCESSED ? "preprocessed" : "raw";
}

int dlk_input_form_parse(const char *s, size_t len)
{
	if (len == 3 && !memcmp(s, "raw", 3))
		return DLK_INPUT_RAW;
	if (len == 12 && !memcmp(s, "preprocessed", 12))
		return DLK_INPUT_PREPROCESSED;
	return -1;
}

void dlk_serve_contract_json(const struct dlk_serve_sig *sig, struct dlk_buf *out)
{
	dlk_buf_adds(out, "\"input_form\":\"raw\"");
	if (sig->tokenizer) {
		const struct dlk_tokenizer *t = sig->tokenizer;
		dlk_buf_addf(out, ",\"raw\":\"text\",\"tokenizer\":\"%s\",\"vocab_size\":%d,\"pad_id\":%d,\"sequence_length\":%zu"
		             ",\"preprocessed\":\"token_ids\"", t->bpe ? "bpe" : "byte", t->vocab_size,
		             t->pad_id, sig->in_size);
		dlk_buf_adds(out, ",\"input_forms\":[\"raw\",\"preprocessed\"],\"form_parameter\":\"" DLK_INPUT_FORM_PARAM "\"");
		return;
	}
	if (sig->pixels)
		dlk_buf_adds(out, ",\"raw_range\":[0,255]");
	dlk_buf_addf(out, ",\"scale\":%.9g,\"mean\":%.9g,\"std\":%.9g", (double)sig->scale, (double)sig->mean,
	             (double)sig->std);
	for (int k = 0; k < 2 && sig->channels; k++) {
		const float *v = k ? sig->channel_std : sig->channel_mean;
		dlk_buf_adds(out, k ? ",\"channel_std\":[" : ",\"channel_mean\":[");
		for (int c = 0; c < sig->channels; c++)
			dlk_buf_addf(out, "%s%.9g", c ? "," : "", (double)v[c]);
		dlk_buf_addc(out, ']');
	}
	dlk_buf_adds(out, ",\"input_forms\":[\"raw\",\"preprocessed\"],\"form_parameter\":\"" DLK_INPUT_FORM_PARAM "\"");
}

static const char *const output_names[DLK_SERVE_N_OUTPUTS + 1] = { DLK_SERVE_OUT_PROBS, DLK_SERVE_OUT_LOGITS, NULL };

const char *dlk_serve_output_name(int i)
{
	return i >= 0 && i < DLK_SERVE_N_OUTPUTS ? output_names[i] : NULL;
}

int dlk_serve_output_find(const char *s, size_t len)
{
	for (int i = 0; i < DLK_SERVE_N_OUTPUTS; i++)
		if (strlen(output_names[i]) == len && !memcmp(output_names[i], s, len))
			return i;
	return -1;
}

void dlk_serve_shape_str(const struct dlk_serve_sig *sig, int flat, char *buf, size_t len)
{
	if (flat || sig->rank == 1)
		snprintf(buf, len, "[-1,%zu]", sig->in_size);
	else
		snprintf(buf, len, "[-1,%d,%d,%d]", sig->dims[0], sig->dims[1], sig->dims[2]);
}

long long dlk_serve_rows_of(const struct dlk_serve_sig *sig, const long long *shape, int rank, char *msg, size_t msg_len)
{
	char got[256], want[64], flat[64];
	size_t o = 0;
	int fits = 0;

	if (rank >= 1 && shape[0] >= 0) {
		if (rank == 2 && shape[1] == (long long)sig->in_size)
			fits = 1;
		else if (sig->rank == 3 && rank == 4 && shape[1] == sig->dims[0] && shape[2] == sig->dims[1] &&
		         shape[3] == sig->dims[2])
			fits = 1;
	}
	if (fits)
		return shape[0];
	got[0] = '\0';
	for (int i = 0; i < rank && o < sizeof(got); i++)
		o += (size_t)snprintf(got + o, sizeof(got) - o, "%s%lld", i ? "," : "", shape[i]);
	dlk_serve_shape_str(sig, 0, want, sizeof(want));
	dlk_serve_shape_str(sig, 1, flat, sizeof(flat));
	if (sig->rank == 3)
		snprintf(msg, msg_len, "input '%s': shape [%s] does not fit the model's %s (or %s): the first dimension is the batch",
		         DLK_SERVE_INPUT, got, want, flat);
	else
		snprintf(msg, msg_len, "input '%s': shape [%s] does not fit the model's %s: the first dimension is the batch",
		         DLK_SERVE_INPUT, got, want);
	return -1;
}

/* the channel of element i of a batch (rows of in_size values, channel-major) */
static inline int channel_of(const struct dlk_serve_sig *sig, size_t i)
{
	return (int)((i % sig->in_size) / (sig->in_size / (size_t)sig->channels));
}

/* raw value v of element i, scaled */
static inline float scaled(const struct dlk_serve_sig *sig, double v, size_t i)
{
	if (sig->channels) {
		int c = channel_of(sig, i);
		if (v >= 0 && v <= 255 && v == (double)(int)v)
			return sig->lut_c[c][(int)v];
		return ((float)v * sig->scale - sig->channel_mean[c]) / sig->channel_std[c];
	}
	if (v >= 0 && v <= 255 && v == (double)(int)v)
		return sig->lut[(int)v];
	return ((float)v * sig->scale - sig->mean) / sig->std;
}

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	float f;
	if (exp == 0) {
		f = ldexpf((float)man, -24); /* zero or subnormal */
		return sign ? -f : f;
	}
	if (exp == 31)
		return man ? NAN : (sign ? -INFINITY : INFINITY);
	uint32_t bits = sign | ((exp + 112) << 23) | (man << 13);
	memcpy(&f, &bits, 4);
	return f;
}

static inline uint64_t le(const unsigned char *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int dlk_serve_convert_binary(const struct dlk_serve_sig *sig, enum dlk_dtype t, const unsigned char *src, size_t n,
                             float *dst, size_t *bad)
{
	size_t w = dlk_dtype_size(t);

	switch (t) {
	case DLK_DT_UINT8:
		if (sig->channels)
			for (size_t i = 0; i < n; i++)
				dst[i] = sig->lut_c[channel_of(sig, i)][src[i]];
		else
			for (size_t i = 0; i < n; i++)
				dst[i] = sig->lut[src[i]];
		return 0;
	case DLK_DT_FP32:
		for (size_t i = 0; i < n; i++) {
			uint32_t u = (uint32_t)le(src + 4 * i, 4);
			float f;
			memcpy(&f, &u, 4);
			if (!isfinite(f))
				return *bad = i, -1;
			dst[i] = scaled(sig, f, i);
		}
		return 0;
	default:
		break;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t u = le(src + w * i, w);
		double v;
		switch (t) {
		case DLK_DT_UINT16: case DLK_DT_UINT32: case DLK_DT_UINT64: v = (double)u; break;
		case DLK_DT_INT8: v = (int8_t)u; break;
		case DLK_DT_INT16: v = (int16_t)u; break;
		case DLK_DT_INT32: v = (int32_t)u; break;
		case DLK_DT_INT64: v = (double)(int64_t)u; break;
		case DLK_DT_FP16: v = half_to_float((uint16_t)u); break;
		case DLK_DT_FP64: memcpy(&v, &u, 8); break;
		default: return *bad = i, -1;
		}
		if (!isfinite(v))
			return *bad = i, -1;
		dst[i] = scaled(sig, v, i);
	}
	return 0;
}

int dlk_serve_convert_doubles(const struct dlk_serve_sig *sig, enum dlk_dtype t, const double *src, size_t n,
                              float *dst, size_t *bad)
{
	double lo = 0, hi = 0;
	int integral = 1;

	switch (t) {
	case DLK_DT_UINT8: lo = 0, hi = 255; break;
	case DLK_DT_UINT16: lo = 0, hi = 65535; break;
	case DLK_DT_UINT32: lo = 0, hi = 4294967295.0; break;
	case DLK_DT_UINT64: lo = 0, hi = 18446744073709551615.0; break;
	case DLK_DT_INT8: lo = -128, hi = 127; break;
	case DLK_DT_INT16: lo = -32768, hi = 32767; break;
	case DLK_DT_INT32: lo = -2147483648.0, hi = 2147483647.0; break;
	case DLK_DT_INT64: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
	case DLK_DT_FP16: lo = -65504, hi = 65504, integral = 0; break;
	case DLK_DT_FP32: lo = -3.4028234663852886e38, hi = 3.4028234663852886e38, integral = 0; break;
	case DLK_DT_FP64: lo = -1.7976931348623157e308, hi = 1.7976931348623157e308, integral = 0; break;
	default: return *bad = 0, -1;
	}
	for (size_t i = 0; i < n; i++) {
		double v = src[i];
		if (!(v >= lo && v <= hi) || (integral && v != floor(v)))
			return *bad = i, -1;
		dst[i] = scaled(sig, v, i);
	}
	return 0;
}

void dlk_serve_softmax(const float *logits, int rows, int k, float *probs)
{
	for (int r = 0; r < rows; r++) {
		const float *x = logits + (size_t)r * k;
		float *p = probs + (size_t)r * k, m = x[0];
		double sum = 0;
		for (int j = 1; j < k; j++)
			if (x[j] > m)
				m = x[j];
		for (int j = 0; j < k; j++) {
			p[j] = expf(x[j] - m);
			sum += p[j];
		}
		float inv = (float)(1.0 / sum);
		for (int j = 0; j < k; j++)
			p[j] *= inv;
	}
}

long dlk_serve_nonfinite_row(const float *logits, size_t rows, size_t k)
{
	for (size_t i = 0; i < rows * k; i++)
		if (!isfinite(logits[i]))
			return (long)(i / k);
	return -1;
}

/* What a request's values say about the form they are in. */
struct raw_scan {
	int unit_interval;   /* every value so far is within [0, 1] */
	int fractional;      /* some value is not a whole number */
	size_t neg_fraction; /* 1 + the index of the first negative value that is not whole, or 0 */
	double bad;
};

static void scan(struct raw_scan *r, double v, size_t i)
{
	if (!isfinite(v))
		return; /* the conversion names it */
	if (v < 0 || v > 1)
		r->unit_interval = 0;
	if (v != floor(v)) {
		r->fractional = 1;
		if (v < 0 && !r->neg_fraction) {
			r->neg_fraction = i + 1;
			r->bad = v;
		}
	}
}

static int verdict(const struct dlk_serve_sig *sig, enum dlk_dtype t, const struct raw_scan *r, char *msg,
                   size_t msg_len)
{
	char contract[256];

	if (t != DLK_DT_FP16 && t != DLK_DT_FP32 && t != DLK_DT_FP64)
		return 0;
	if (sig->channels)
		snprintf(contract, sizeof(contract), "the model's input takes raw pixels 0..255, which the server scales as "
		         "(v * %.9g - mean[c]) / std[c] with each channel's mean and std (the model's metadata lists them)",
		         (double)sig->scale);
	else
		snprintf(contract, sizeof(contract), "the model's input takes raw pixels 0..255, which the server scales as "
		         "(v * %.9g - %.9g) / %.9g", (double)sig->scale, (double)sig->mean, (double)sig->std);
	if (r->unit_interval && r->fractional)
		snprintf(msg, msg_len, "input '%s': every value is within [0, 1] and not all are whole numbers, as pixels "
		         "already scaled are, but %s; send the pixels, or declare the form with the request parameter "
		         "%s = \"preprocessed\" (or \"raw\")", DLK_SERVE_INPUT, contract, DLK_INPUT_FORM_PARAM);
	else if (r->neg_fraction)
		snprintf(msg, msg_len, "input '%s': element %zu (%g) is negative and not a whole number, as normalised "
		         "values are, but %s; send the pixels, or declare the form with the request parameter "
		         "%s = \"preprocessed\" (or \"raw\")", DLK_SERVE_INPUT, r->neg_fraction - 1, r->bad, contract,
		         DLK_INPUT_FORM_PARAM);
	else
		return 0;
	return -1;
}

int dlk_serve_check_raw_binary(const struct dlk_serve_sig *sig, enum dlk_dtype t, const unsigned char *src,
                               size_t n, char *msg, size_t msg_len)
{
	struct raw_scan r = { 1, 0, 0, 0 };
	size_t w = dlk_dtype_size(t);

	if (!sig->pixels || t == DLK_DT_UINT8)
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t u = le(src + w * i, w);
		double v;
		switch (t) {
		case DLK_DT_UINT16: case DLK_DT_UINT32: case DLK_DT_UINT64: v = (double)u; break;
		case DLK_DT_INT8: v = (int8_t)u; break;
		case DLK_DT_INT16: v = (int16_t)u; break;
		case DLK_DT_INT32: v = (int32_t)u; break;
		case DLK_DT_INT64: v = (double)(int64_t)u; break;
		case DLK_DT_FP16: v = half_to_float((uint16_t)u); break;
		case DLK_DT_FP32: { uint32_t b = (uint32_t)u; float f; memcpy(&f, &b, 4); v = f; break; }
		case DLK_DT_FP64: memcpy(&v, &u, 8); break;
		default: return 0;
		}
		scan(&r, v, i);
	}
	return verdict(sig, t, &r, msg, msg_len);
}

int dlk_serve_check_raw_doubles(const struct dlk_serve_sig *sig, enum dlk_dtype t, const double *src, size_t n,
                                char *msg, size_t msg_len)
{
	struct raw_scan r = { 1, 0, 0, 0 };

	if (!sig->pixels)
		return 0;
	for (size_t i = 0; i < n; i++)
		scan(&r, src[i], i);
	return verdict(sig, t, &r, msg, msg_len);
}
