/* KServe V2 REST: inference requests in, responses and metadata out. */
#include "lib/serve/v2.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/text.h"
#include "lib/util/mem.h"

#define MAX_INPUTS 64
#define MAX_OUTPUTS 64
#define MAX_DIM (1LL << 40)

static int fail(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* A name from the request, shown in a message: printable ASCII, at most 64 bytes. */
static const char *shown(const struct jd_value *v, char *buf, size_t len)
{
	size_t o = 0;
	if (!v || v->type != JD_STRING)
		return "?";
	for (size_t i = 0; i < v->len && o + 4 < len && i < 64; i++) {
		unsigned char c = (unsigned char)v->str[i];
		buf[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	if (v->len > 64 && o + 4 < len)
		buf[o++] = '.', buf[o++] = '.', buf[o++] = '.';
	buf[o] = '\0';
	return buf;
}

static int is_str(const struct jd_value *v, const char *s)
{
	return v && v->type == JD_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* parameters.NAME as a bool: absent 0, true/false, else -1 */
static int param_bool(const struct jd_value *params, const char *name, int *out)
{
	const struct jd_value *v = jd_get(params, name);
	*out = 0;
	if (!v)
		return 0;
	if (v->type != JD_BOOL)
		return -1;
	*out = v->boolean;
	return 0;
}

/* parameters.input_form, at the request's level or the input's: "raw" or "preprocessed"; *form
 * keeps what an earlier level said (-1: undeclared), and two levels must agree */
static int read_form(const struct jd_value *params, const char *where, int *form, char *msg, size_t len)
{
	const struct jd_value *v = jd_get(params, DLK_INPUT_FORM_PARAM);
	int f;

	if (!v)
		return 0;
	if (v->type != JD_STRING || (f = dlk_input_form_parse(v->str, v->len)) < 0)
		return fail(msg, len, "%s." DLK_INPUT_FORM_PARAM " must be \"raw\" (values as the training data holds them, "
		            "pixels 0..255) or \"preprocessed\" (already scaled, the network's input)", where);
	if (*form >= 0 && *form != f)
		return fail(msg, len, "the request's and the input's " DLK_INPUT_FORM_PARAM " disagree");
	*form = f;
	return 0;
}

struct input_desc {
	const struct jd_value *node;
	enum dlk_dtype dtype;
	long long shape[DLK_SERVE_MAX_RANK];
	int rank;
	long long count;        /* elements */
	int binary;
	long long binary_size;
	const unsigned char *bytes; /* binary: where its bytes start */
	const struct jd_value *data; /* JSON: its data */
};

static int read_input(const struct jd_value *in, struct input_desc *d, char *msg, size_t len)
{
	char nb[80];
	const struct jd_value *name = jd_get(in, "name"), *shape = jd_get(in, "shape"), *dt = jd_get(in, "datatype");

	memset(d, 0, sizeof(*d));
	d->node = in;
	if (in->type != JD_OBJECT)
		return fail(msg, len, "every element of 'inputs' must be an object");
	if (!name || name->type != JD_STRING)
		return fail(msg, len, "an input has no 'name' (a string)");
	shown(name, nb, sizeof(nb));
	if (!dt || dt->type != JD_STRING)
		return fail(msg, len, "input '%s': 'datatype' is missing or not a string", nb);
	d->dtype = dlk_dtype_parse(dt->str, dt->len);
	if (d->dtype == DLK_DT_INVALID) {
		char tb[80];
		return fail(msg, len, "input '%s': unknown datatype '%s' (expected BOOL, UINT8..UINT64, INT8..INT64, FP16, FP32, FP64 or BYTES)",
		            nb, shown(dt, tb, sizeof(tb)));
	}
	if (!shape || shape->type != JD_ARRAY || shape->n_numbers != shape->n_items)
		return fail(msg, len, "input '%s': 'shape' must be an array of integers", nb);
	if (shape->n_items < 1 || shape->n_items > DLK_SERVE_MAX_RANK)
		return fail(msg, len, "input '%s': a shape of %zu dimensions (expected 1 to %d)", nb, shape->n_items,
		            DLK_SERVE_MAX_RANK);
	d->rank = (int)shape->n_items;
	return 0;
}

static int read_shape(const struct jd_doc *doc, const struct jd_value *in, struct input_desc *d, char *msg, size_t len)
{
	char nb[80];
	const struct jd_value *shape = jd_get(in, "shape");
	long double count = 1;

	shown(jd_get(in, "name"), nb, sizeof(nb));
	for (int i = 0; i < d->rank; i++) {
		double v = doc->nums[shape->leaf_begin + (size_t)i];
		if (!(v >= 0 && v <= (double)MAX_DIM) || v != floor(v))
			return fail(msg, len, "input '%s': shape[%d] = %g is not a size (an integer from 0)", nb, i, v);
		d->shape[i] = (long long)v;
		count *= (long double)v;
	}
	if (count > (long double)MAX_DIM)
		return fail(msg, len, "input '%s': a shape of %Lg elements is more than any request can hold", nb, count);
	d->count = (long long)count;
	return 0;
}

/* the i-th text of a BYTES input's JSON data: a flat array of strings, or one of arrays of one */
static const struct jd_value *text_item(const struct jd_value *it)
{
	if (it && it->type == JD_ARRAY && it->n_items == 1 && !it->n_numbers)
		it = it->first;
	return it && it->type == JD_STRING ? it : NULL;
}

/* A text model's BYTES input: shape [N] or [N, 1], one text a row, each tokenized as training
 * tokenized its rows into the model's in_size ids (lib/data/text.h). */
static int read_texts(const struct dlk_serve_sig *sig, const struct input_desc *d, struct dlk_v2_request *req,
                      char *msg, size_t len)
{
	long long rows = d->shape[0];
	const unsigned char *p = d->bytes;
	size_t left = d->binary ? (size_t)d->binary_size : 0;
	const struct jd_value *it = NULL;
	int32_t *ids;

	if (!(d->rank == 1 || (d->rank == 2 && d->shape[1] == 1)))
		return fail(msg, len, "input '%s': a text model takes BYTES of shape [N] or [N,1], one text a row, not a shape of "
		            "%d dimensions%s", DLK_SERVE_INPUT, d->rank, d->rank == 2 ? " with more than one text a row" : "");
	if (rows == 0)
		return fail(msg, len, "input '%s' has no rows (its shape starts with 0)", DLK_SERVE_INPUT);
	if (rows > DLK_SERVE_MAX_TEXT_IDS / (long long)sig->in_size)
		return fail(msg, len, "input '%s': %lld texts in one request; this model takes at most %lld (each becomes %zu ids)",
		            DLK_SERVE_INPUT, rows, DLK_SERVE_MAX_TEXT_IDS / (long long)sig->in_size, sig->in_size);
	if (!d->binary) {
		const struct jd_value *data = d->data;
		if (data->type != JD_ARRAY || data->leaf_end != data->leaf_begin)
			return fail(msg, len, "input '%s': 'data' must be an array of strings, one text a row, as datatype BYTES says",
			            DLK_SERVE_INPUT);
		if ((long long)data->n_items != rows)
			return fail(msg, len, "input '%s': 'data' holds %zu texts, but its shape needs %lld", DLK_SERVE_INPUT,
			            data->n_items, rows);
		it = data->first;
	}
	req->x = xmalloc((size_t)rows * sig->in_size * sizeof(float));
	ids = xmalloc(sig->in_size * sizeof(*ids));
	for (long long r = 0; r < rows; r++) {
		const void *text;
		size_t n;
		if (d->binary) {
			/* the binary tensor extension's BYTES: a 4-byte little-endian length, then the bytes */
			if (left < 4 || (n = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24) > left - 4) {
				free(ids);
				return fail(msg, len, "input '%s': the binary data ends inside text %lld of %lld (each is a 4-byte "
				            "little-endian length, then its bytes)", DLK_SERVE_INPUT, r, rows);
			}
			text = p + 4;
			p += 4 + n;
			left -= 4 + n;
		} else {
			const struct jd_value *t = text_item(it);
			if (!t) {
				free(ids);
				return fail(msg, len, "input '%s': data[%lld] is not a string (a text model's BYTES input holds "
				            "texts)", DLK_SERVE_INPUT, r);
			}
			text = t->str;
			n = t->len;
			it = it->next;
		}
		dlk_text_encode_row(sig->tokenizer, text, n, (int)sig->in_size, ids, req->x + (size_t)r * sig->in_size);
	}
	free(ids);
	if (left)
		return fail(msg, len, "input '%s': %zu bytes of binary data follow its %lld texts", DLK_SERVE_INPUT, left, rows);
	req->rows = rows;
	return 0;
}

int dlk_v2_parse_infer(const struct dlk_serve_sig *sig, const char *body, size_t len, long long header_len,
                       const struct jd_limits *lim, struct dlk_v2_request *req, char *msg, size_t msg_len)
{
	struct jd_doc doc = JD_DOC_INIT;
	struct input_desc inp;
	const struct jd_value *root, *v, *inputs, *outputs;
	const unsigned char *bin = NULL;
	size_t json_len = len, bin_len = 0;
	int binary_default = 0, n_inputs = 0, ret = -1, form = -1;
	char nb[80], jmsg[200];

	*req = (struct dlk_v2_request)DLK_V2_REQUEST_INIT;
	memset(&inp, 0, sizeof(inp));
	if (header_len >= 0) {
		if ((unsigned long long)header_len > len)
			return fail(msg, msg_len, "Inference-Header-Content-Length is %lld but the body has only %zu bytes",
			            header_len, len);
		json_len = (size_t)header_len;
		bin = (const unsigned char *)body + json_len;
		bin_len = len - json_len;
	}
	if (jd_parse(&doc, body, json_len, lim, jmsg, sizeof(jmsg))) {
		fail(msg, msg_len, "%s%s", jmsg,
		     header_len < 0 && memchr(body, 0, len) ? " (binary data in the body needs the Inference-Header-Content-Length header)" : "");
		return -1;
	}
	root = doc.root;
	if (root->type != JD_OBJECT) {
		fail(msg, msg_len, "the request must be a JSON object");
		goto out;
	}
	v = jd_get(root, "id");
	if (v) {
		if (v->type != JD_STRING) {
			fail(msg, msg_len, "'id' must be a string");
			goto out;
		}
		req->id = xmalloc(v->len + 1);
		memcpy(req->id, v->str, v->len + 1);
		req->id_len = v->len;
	}
	v = jd_get(root, "parameters");
	if (v && v->type != JD_OBJECT) {
		fail(msg, msg_len, "'parameters' must be an object");
		goto out;
	}
	if (param_bool(v, "binary_data_output", &binary_default)) {
		fail(msg, msg_len, "parameters.binary_data_output must be true or false");
		goto out;
	}
	if (read_form(v, "parameters", &form, msg, msg_len))
		goto out;

	/* inputs: exactly the model's one input */
	inputs = jd_get(root, "inputs");
	if (!inputs || inputs->type != JD_ARRAY || inputs->n_numbers) {
		fail(msg, msg_len, "'inputs' must be an array of input objects");
		goto out;
	}
	if (inputs->n_items > MAX_INPUTS) {
		fail(msg, msg_len, "%zu inputs: the model '%s' takes one, '%s'", inputs->n_items, sig->name, DLK_SERVE_INPUT);
		goto out;
	}
	size_t bin_off = 0;
	for (const struct jd_value *in = inputs->first; in; in = in->next) {
		struct input_desc d;
		if (read_input(in, &d, msg, msg_len) || read_shape(&doc, in, &d, msg, msg_len))
			goto out;
		const struct jd_value *name = jd_get(in, "name"), *params = jd_get(in, "parameters");
		const struct jd_value *bsize = jd_get(params, "binary_data_size"), *data = jd_get(in, "data");
		shown(name, nb, sizeof(nb));
		if (!is_str(name, DLK_SERVE_INPUT)) {
			fail(msg, msg_len, "unknown input '%s': the model '%s' takes one input, '%s'", nb, sig->name, DLK_SERVE_INPUT);
			goto out;
		}
		if (n_inputs++) {
			fail(msg, msg_len, "input '%s' is given twice", nb);
			goto out;
		}
		if (params && params->type != JD_OBJECT) {
			fail(msg, msg_len, "input '%s': 'parameters' must be an object", nb);
			goto out;
		}
		if (read_form(params, "the input's parameters", &form, msg, msg_len))
			goto out;
		if (!!bsize + !!data != 1) {
			fail(msg, msg_len, "input '%s' must have exactly one of 'data' and parameters.binary_data_size, but has %s", nb,
			     bsize ? "both" : "neither");
			goto out;
		}
		if (bsize) {
			long long n;
			if (!jd_int(bsize, 0, (long long)1 << 62, &n)) {
				fail(msg, msg_len, "input '%s': parameters.binary_data_size must be a non-negative integer", nb);
				goto out;
			}
			if (header_len < 0) {
				fail(msg, msg_len, "input '%s' has parameters.binary_data_size but the request has no Inference-Header-Content-Length header",
				     nb);
				goto out;
			}
			/* tensors follow the JSON in input order: this input's bytes start here */
			if ((unsigned long long)n > bin_len - bin_off) {
				fail(msg, msg_len, "input '%s': binary_data_size %lld runs past the end of the body (%zu bytes of binary data left)",
				     nb, n, bin_len - bin_off);
				goto out;
			}
			d.binary = 1;
			d.binary_size = n;
			d.bytes = bin + bin_off;
			bin_off += (size_t)n;
		} else {
			d.data = data;
		}
		inp = d;
	}
	if (!n_inputs) {
		fail(msg, msg_len, "no inputs: the model '%s' takes '%s'", sig->name, DLK_SERVE_INPUT);
		goto out;
	}
	if (bin_off != bin_len) {
		fail(msg, msg_len, "%zu bytes of binary data follow the JSON, but the inputs' binary_data_size add up to %zu",
		     bin_len, bin_off);
		goto out;
	}
	if (inp.dtype == DLK_DT_BYTES && sig->tokenizer) {
		if (form == DLK_INPUT_PREPROCESSED) {
			fail(msg, msg_len, "input '%s': BYTES texts are the raw form, which the server tokenizes; the "
			     "preprocessed form is the %zu token ids a row as numbers (INT32, FP32, ...)", DLK_SERVE_INPUT, sig->in_size);
			goto out;
		}
		if (read_texts(sig, &inp, req, msg, msg_len))
			goto out;
		goto outputs;
	}
	if (!dlk_dtype_numeric(inp.dtype)) {
		fail(msg, msg_len, "input '%s': datatype %s is not a number type; the model takes FP32 (or FP16, FP64, INT8..INT64, UINT8..UINT64)%s",
		     DLK_SERVE_INPUT, dlk_dtype_name(inp.dtype),
		     sig->tokenizer ? ", or BYTES: texts, one a row" : "");
		goto out;
	}
	long long rows = dlk_serve_rows_of(sig, inp.shape, inp.rank, msg, msg_len);
	if (rows < 0)
		goto out;
	if (rows == 0) {
		fail(msg, msg_len, "input '%s' has no rows (its shape starts with 0)", DLK_SERVE_INPUT);
		goto out;
	}
	size_t count = (size_t)inp.count, bad = 0;
	/* the form the values are in: declared, or raw pixels held to their contract */
	struct dlk_serve_sig pre;
	if (form == DLK_INPUT_PREPROCESSED) {
		dlk_serve_sig_preprocessed(sig, &pre);
		sig = &pre;
	}
	if (inp.binary) {
		size_t want = count * dlk_dtype_size(inp.dtype);
		if ((unsigned long long)inp.binary_size != want) {
			fail(msg, msg_len, "input '%s': binary_data_size is %lld bytes, but shape and datatype %s need %zu",
			     DLK_SERVE_INPUT, inp.binary_size, dlk_dtype_name(inp.dtype), want);
			goto out;
		}
		if (form < 0 && dlk_serve_check_raw_binary(sig, inp.dtype, inp.bytes, count, msg, msg_len))
			goto out;
		req->x = xmalloc(count * sizeof(float));
		if (dlk_serve_convert_binary(sig, inp.dtype, inp.bytes, count, req->x, &bad)) {
			fail(msg, msg_len, "input '%s': element %zu is not a finite number", DLK_SERVE_INPUT, bad);
			goto out;
		}
	} else {
		const struct jd_value *data = inp.data;
		if (data->type != JD_ARRAY || !data->numeric) {
			fail(msg, msg_len, "input '%s': 'data' must be an array of numbers (flat or nested), as datatype %s says",
			     DLK_SERVE_INPUT, dlk_dtype_name(inp.dtype));
			goto out;
		}
		size_t have = data->leaf_end - data->leaf_begin;
		if (have != count) {
			fail(msg, msg_len, "input '%s': 'data' holds %zu numbers, but its shape needs %zu", DLK_SERVE_INPUT, have, count);
			goto out;
		}
		if (form < 0 && dlk_serve_check_raw_doubles(sig, inp.dtype, doc.nums + data->leaf_begin, count, msg, msg_len))
			goto out;
		req->x = xmalloc(count * sizeof(float));
		if (dlk_serve_convert_doubles(sig, inp.dtype, doc.nums + data->leaf_begin, count, req->x, &bad)) {
			fail(msg, msg_len, "input '%s': element %zu (%g) is not a valid %s", DLK_SERVE_INPUT, bad,
			     doc.nums[data->leaf_begin + bad], dlk_dtype_name(inp.dtype));
			goto out;
		}
	}
	req->rows = rows;

outputs:
	/* outputs: the ones asked for, or all */
	outputs = jd_get(root, "outputs");
	if (outputs && (outputs->type != JD_ARRAY || outputs->n_numbers)) {
		fail(msg, msg_len, "'outputs' must be an array of output objects");
		goto out;
	}
	if (outputs && outputs->n_items > MAX_OUTPUTS) {
		fail(msg, msg_len, "%zu outputs requested; the model has %d", outputs->n_items, DLK_SERVE_N_OUTPUTS);
		goto out;
	}
	if (!outputs || !outputs->n_items) {
		for (int i = 0; i < DLK_SERVE_N_OUTPUTS; i++)
			req->outputs[i] = (struct dlk_v2_output){ i, binary_default, 0 };
		req->n_outputs = DLK_SERVE_N_OUTPUTS;
	} else {
		for (const struct jd_value *o = outputs->first; o; o = o->next) {
			const struct jd_value *name = jd_get(o, "name"), *params = jd_get(o, "parameters");
			int which, bin_flag = binary_default;
			long long cls = 0;
			if (o->type != JD_OBJECT || !name || name->type != JD_STRING) {
				fail(msg, msg_len, "every element of 'outputs' must be an object with a 'name'");
				goto out;
			}
			shown(name, nb, sizeof(nb));
			which = dlk_serve_output_find(name->str, name->len);
			if (which < 0) {
				fail(msg, msg_len, "unknown output '%s': the model '%s' has '%s' and '%s'", nb, sig->name,
				     DLK_SERVE_OUT_PROBS, DLK_SERVE_OUT_LOGITS);
				goto out;
			}
			for (int k = 0; k < req->n_outputs; k++)
				if (req->outputs[k].which == which) {
					fail(msg, msg_len, "output '%s' is requested twice", nb);
					goto out;
				}
			if (params && params->type != JD_OBJECT) {
				fail(msg, msg_len, "output '%s': 'parameters' must be an object", nb);
				goto out;
			}
			if (jd_get(params, "binary_data") && param_bool(params, "binary_data", &bin_flag)) {
				fail(msg, msg_len, "output '%s': parameters.binary_data must be true or false", nb);
				goto out;
			}
			v = jd_get(params, "classification");
			if (v && !jd_int(v, 0, 1 << 30, &cls)) {
				fail(msg, msg_len, "output '%s': parameters.classification must be a non-negative integer (how many classes)", nb);
				goto out;
			}
			req->outputs[req->n_outputs++] = (struct dlk_v2_output){ which, bin_flag, (int)cls };
		}
	}
	ret = 0;
out:
	jd_release(&doc);
	if (ret)
		dlk_v2_request_release(req);
	return ret;
}

void dlk_v2_request_release(struct dlk_v2_request *req)
{
	free(req->id);
	free(req->x);
	*req = (struct dlk_v2_request)DLK_V2_REQUEST_INIT;
}

/* ---- responses ---- */

struct class_entry {
	float v;
	int i;
};

static int cmp_class(const void *a, const void *b)
{
	const struct class_entry *x = a, *y = b;
	/* best first; equal values keep the lower index first */
	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return x->i - y->i;
}

/* One row's top-n as "value:index[:label]" strings, each handed to emit. Triton prints the
 * value with std::to_string, i.e. "%f". */
static void classify_row(const struct dlk_serve_sig *sig, const float *row, int n, struct class_entry *tmp,
                         void (*emit)(void *ctx, const char *s, size_t len), void *ctx)
{
	int k = sig->n_classes;
	/* the whole label, however long: a fixed buffer cut it inside a character and the answer
	 * was not UTF-8 (labels are checked when the bundle is read) */
	struct dlk_buf s = DLK_BUF_INIT;
	for (int j = 0; j < k; j++)
		tmp[j] = (struct class_entry){ row[j], j };
	qsort(tmp, (size_t)k, sizeof(*tmp), cmp_class);
	for (int j = 0; j < n && j < k; j++) {
		dlk_buf_reset(&s);
		dlk_buf_addf(&s, "%f:%d", (double)tmp[j].v, tmp[j].i);
		if (sig->classes && sig->classes[tmp[j].i] && sig->classes[tmp[j].i][0]) {
			dlk_buf_addc(&s, ':');
			dlk_buf_adds(&s, sig->classes[tmp[j].i]);
		}
		emit(ctx, s.data, s.len);
	}
	dlk_buf_release(&s);
}

static void emit_json(void *ctx, const char *s, size_t len)
{
	struct dlk_buf *b = ctx;
	if (b->len && b->data[b->len - 1] != '[')
		dlk_buf_addc(b, ',');
	jd_write_string(b, s, len);
}

static void emit_bytes(void *ctx, const char *s, size_t len)
{
	struct dlk_buf *b = ctx;
	unsigned char n[4] = { (unsigned char)len, (unsigned char)(len >> 8), (unsigned char)(len >> 16),
		               (unsigned char)(len >> 24) };
	dlk_buf_add(b, n, 4);
	dlk_buf_add(b, s, len);
}

static void put_le_floats(struct dlk_buf *b, const float *f, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &f[i], 4);
		u = __builtin_bswap32(u);
		dlk_buf_add(b, &u, 4);
	}
#else
	dlk_buf_add(b, f, n * sizeof(float));
#endif
}

void dlk_v2_write_infer(const struct dlk_serve_sig *sig, const struct dlk_v2_request *req, const float *logits,
                        struct dlk_buf *out, size_t *json_len)
{
	int k = sig->n_classes, rows = (int)req->rows, any_binary = 0;
	float *probs = NULL;
	struct class_entry *tmp = NULL;
	struct dlk_buf bin = DLK_BUF_INIT;

	for (int o = 0; o < req->n_outputs; o++)
		if (req->outputs[o].which == 0) {
			probs = xmalloc((size_t)rows * (size_t)k * sizeof(float));
			dlk_serve_softmax(logits, rows, k, probs);
		}
	dlk_buf_adds(out, "{\"model_name\":");
	jd_write_string(out, sig->name, strlen(sig->name));
	dlk_buf_adds(out, ",\"model_version\":\"" DLK_V2_VERSION "\"");
	if (req->id) {
		dlk_buf_adds(out, ",\"id\":");
		jd_write_string(out, req->id, req->id_len);
	}
	dlk_buf_adds(out, ",\"outputs\":[");
	for (int o = 0; o < req->n_outputs; o++) {
		const struct dlk_v2_output *ro = &req->outputs[o];
		const float *t = ro->which == 0 ? probs : logits;
		const char *name = dlk_serve_output_name(ro->which);
		if (o)
			dlk_buf_addc(out, ',');
		dlk_buf_adds(out, "{\"name\":");
		jd_write_string(out, name, strlen(name));
		if (ro->classification) {
			int n = ro->classification < k ? ro->classification : k;
			if (!tmp)
				tmp = xmalloc((size_t)k * sizeof(*tmp));
			dlk_buf_addf(out, ",\"datatype\":\"BYTES\",\"shape\":[%d,%d]", rows, n);
			if (ro->binary) {
				size_t before = bin.len;
				for (int r = 0; r < rows; r++)
					classify_row(sig, t + (size_t)r * k, n, tmp, emit_bytes, &bin);
				dlk_buf_addf(out, ",\"parameters\":{\"binary_data_size\":%zu}}", bin.len - before);
				any_binary = 1;
			} else {
				dlk_buf_adds(out, ",\"data\":[");
				for (int r = 0; r < rows; r++)
					classify_row(sig, t + (size_t)r * k, n, tmp, emit_json, out);
				dlk_buf_adds(out, "]}");
			}
			continue;
		}
		dlk_buf_addf(out, ",\"datatype\":\"FP32\",\"shape\":[%d,%d]", rows, k);
		if (ro->binary) {
			put_le_floats(&bin, t, (size_t)rows * k);
			dlk_buf_addf(out, ",\"parameters\":{\"binary_data_size\":%zu}}", (size_t)rows * k * sizeof(float));
			any_binary = 1;
		} else {
			dlk_buf_adds(out, ",\"data\":[");
			for (size_t i = 0; i < (size_t)rows * k; i++) {
				if (i)
					dlk_buf_addc(out, ',');
				jd_write_float(out, t[i]);
			}
			dlk_buf_adds(out, "]}");
		}
	}
	dlk_buf_adds(out, "]}");
	*json_len = 0;
	if (any_binary) {
		*json_len = out->len;
		dlk_buf_add(out, bin.data, bin.len);
	}
	dlk_buf_release(&bin);
	free(probs);
	free(tmp);
}

static void tensor_meta(struct dlk_buf *out, const char *name, const char *dtype, const char *shape)
{
	dlk_buf_adds(out, "{\"name\":");
	jd_write_string(out, name, strlen(name));
	dlk_buf_addf(out, ",\"datatype\":\"%s\",\"shape\":%s}", dtype, shape);
}

void dlk_v2_write_model_metadata(const struct dlk_serve_sig *sig, struct dlk_buf *out)
{
	char shape[96];

	dlk_buf_adds(out, "{\"name\":");
	jd_write_string(out, sig->name, strlen(sig->name));
	dlk_buf_adds(out, ",\"versions\":[\"" DLK_V2_VERSION "\"],\"platform\":\"dlk_bundle\",\"inputs\":[");
	dlk_serve_shape_str(sig, 0, shape, sizeof(shape));
	/* the input with its contract in its parameters (tritonclient hands the metadata over as is);
	 * a text model's is BYTES, one text a row (its token ids, the preprocessed form, FP32 [-1, T]) */
	if (sig->tokenizer)
		snprintf(shape, sizeof(shape), "[-1,1]");
	dlk_buf_addf(out, "{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":%s,\"parameters\":{", DLK_SERVE_INPUT,
	             sig->tokenizer ? "BYTES" : "FP32", shape);
	dlk_serve_contract_json(sig, out);
	dlk_buf_adds(out, "}}],\"outputs\":[");
	snprintf(shape, sizeof(shape), "[-1,%d]", sig->n_classes);
	for (int i = 0; i < DLK_SERVE_N_OUTPUTS; i++) {
		if (i)
			dlk_buf_addc(out, ',');
		tensor_meta(out, dlk_serve_output_name(i), "FP32", shape);
	}
	dlk_buf_adds(out, "]}");
}

void dlk_v2_write_server_metadata(const char *version, struct dlk_buf *out)
{
	dlk_buf_adds(out, "{\"name\":\"dlk\",\"version\":");
	jd_write_string(out, version, strlen(version));
	dlk_buf_adds(out, ",\"extensions\":[\"binary_tensor_data\",\"classification\"]}");
}

void dlk_v2_write_error(const char *msg, struct dlk_buf *out)
{
	dlk_buf_adds(out, "{\"error\":");
	jd_write_string(out, msg, strlen(msg));
	dlk_buf_addc(out, '}');
}
