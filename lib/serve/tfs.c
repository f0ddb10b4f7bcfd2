/* TensorFlow Serving REST v1: predict, status, metadata. */
#include "lib/serve/tfs.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/text.h"
#include "lib/util/mem.h"

static int fail(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* A whole batch as one numeric tensor, batch dimension first: its rows. */
static long long batch_rows(const struct dlk_serve_sig *sig, const struct jd_value *t, const char *what, char *msg,
                            size_t len)
{
	long long dims[DLK_SERVE_MAX_RANK];
	int rank;
	char why[400];

	if (!t || t->type != JD_ARRAY || !t->numeric)
		return fail(msg, len, "%s must be an array of numbers, one row per sample", what);
	if (!jd_shape(t, dims, DLK_SERVE_MAX_RANK, &rank))
		return fail(msg, len, "%s is not a rectangular array of numbers (rows of different lengths?)", what);
	long long rows = dlk_serve_rows_of(sig, dims, rank, why, sizeof(why));
	if (rows < 0)
		return fail(msg, len, "%s: %s", what, why);
	if (rows == 0)
		return fail(msg, len, "%s holds no rows", what);
	return rows;
}

/* One row of the row format: a numeric tensor of the model's sample shape (or flat). */
static int one_row(const struct dlk_serve_sig *sig, const struct jd_value *t, long long i, char *msg, size_t len)
{
	long long dims[DLK_SERVE_MAX_RANK];
	int rank;
	char why[400];

	if (!t || t->type != JD_ARRAY || !t->numeric || !jd_shape(t, dims + 1, DLK_SERVE_MAX_RANK - 1, &rank))
		return fail(msg, len, "instances[%lld]: the input must be a (nested) array of numbers", i);
	dims[0] = 1;
	if (dlk_serve_rows_of(sig, dims, rank + 1, why, sizeof(why)) < 0)
		return fail(msg, len, "instances[%lld]: %s", i, why);
	return 0;
}

/* A text model's row (sig->tokenizer): a string, an array of one string, or TF Serving's binary
 * form {"b64": string} (*b64 set: base64 of the text's bytes); NULL otherwise. With objects, a row
 * may also be {"input": that}, as the row format names inputs. */
static const struct jd_value *row_text(const struct jd_value *v, int objects, int *b64)
{
	*b64 = 0;
	if (objects && v && v->type == JD_OBJECT && v->n_items == 1 && jd_get(v, DLK_SERVE_INPUT))
		v = jd_get(v, DLK_SERVE_INPUT);
	if (v && v->type == JD_ARRAY && v->n_items == 1 && !v->n_numbers)
		v = v->first;
	if (v && v->type == JD_OBJECT && v->n_items == 1 && jd_get(v, "b64")) {
		v = jd_get(v, "b64");
		*b64 = 1;
	}
	return v && v->type == JD_STRING ? v : NULL;
}

static int any_text(const struct jd_value *arr, int objects)
{
	int b64;
	for (const struct jd_value *v = arr->first; v; v = v->next)
		if (row_text(v, objects, &b64))
			return 1;
	return 0;
}

/* base64 (RFC 4648, padded, as TF Serving's clients send it) of len bytes into out (len / 4 * 3
 * bytes at least): the decoded length, or -1 */
static long unbase64(const char *s, size_t len, unsigned char *out)
{
	int n, pad = 0;
	if (len % 4 || len > (size_t)1 << 30)
		return -1;
	if (!len)
		return 0;
	n = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
	if (n < 0)
		return -1;
	/* EVP_DecodeBlock counts the padding's zero bytes too */
	while (pad < 2 && s[len - 1 - (size_t)pad] == '=')
		pad++;
	return n - pad;
}

/* A text model's rows, one string each: tokenized as training tokenized its rows into the
 * model's in_size ids (dlk_text_encode_row, lib/data/text.h, as the V2 route's BYTES). */
static int text_rows(const struct dlk_serve_sig *sig, const struct jd_value *arr, int objects, int form,
                     const char *what, struct dlk_tfs_request *req, char *msg, size_t len)
{
	long long rows = (long long)arr->n_items, i = 0;
	int32_t *ids;

	if (form == DLK_INPUT_PREPROCESSED)
		return fail(msg, len, "%s: texts are the raw form, which the server tokenizes; the preprocessed form is "
		            "the %zu token ids a row as numbers", what, sig->in_size);
	if (arr->n_numbers)
		return fail(msg, len, "%s mixes texts with numbers: every row is a text (a string), or every row its %zu "
		            "token ids", what, sig->in_size);
	if (rows > DLK_SERVE_MAX_TEXT_IDS / (long long)sig->in_size)
		return fail(msg, len, "%s: %lld texts in one request; this model takes at most %lld (each becomes %zu ids)",
		            what, rows, DLK_SERVE_MAX_TEXT_IDS / (long long)sig->in_size, sig->in_size);
	req->x = xmalloc((size_t)rows * sig->in_size * sizeof(float));
	ids = xmalloc(sig->in_size * sizeof(*ids));
	for (const struct jd_value *row = arr->first; row; row = row->next, i++) {
		int b64;
		const struct jd_value *t = row_text(row, objects, &b64);
		if (!t) {
			free(ids);
			return fail(msg, len, "%s[%lld] is not a text: the model '%s' takes one string a row (%s, or "
			            "{\"b64\": base64}), which the server tokenizes", what, i, sig->name,
			            objects ? "\"text\", [\"text\"] or {\"" DLK_SERVE_INPUT "\": \"text\"}" : "\"text\" or [\"text\"]");
		}
		if (b64) {
			unsigned char *bytes = xmalloc(t->len / 4 * 3 + 3);
			long n = unbase64(t->str, t->len, bytes);
			if (n >= 0)
				dlk_text_encode_row(sig->tokenizer, bytes, (size_t)n, (int)sig->in_size, ids,
				                    req->x + (size_t)i * sig->in_size);
			free(bytes);
			if (n < 0) {
				free(ids);
				return fail(msg, len, "%s[%lld]: 'b64' is not base64 (RFC 4648, padded to a multiple of 4 "
				            "characters)", what, i);
			}
			continue;
		}
		dlk_text_encode_row(sig->tokenizer, t->str, t->len, (int)sig->in_size, ids, req->x + (size_t)i * sig->in_size);
	}
	free(ids);
	req->rows = rows;
	return 0;
}

int dlk_tfs_parse_predict(const struct dlk_serve_sig *sig, const char *body, size_t len, const struct jd_limits *lim,
                          struct dlk_tfs_request *req, char *msg, size_t msg_len)
{
	struct jd_doc doc = JD_DOC_INIT;
	const struct jd_value *root, *inst, *inputs, *sn, *fv;
	const struct dlk_serve_sig *raw_sig = sig;
	struct dlk_serve_sig pre;
	size_t bad = 0;
	int ret = -1, form = -1;
	char jmsg[200];

	*req = (struct dlk_tfs_request)DLK_TFS_REQUEST_INIT;
	if (jd_parse(&doc, body, len, lim, jmsg, sizeof(jmsg)))
		return fail(msg, msg_len, "%s", jmsg);
	root = doc.root;
	if (root->type != JD_OBJECT) {
		fail(msg, msg_len, "the request must be a JSON object with 'instances' or 'inputs'");
		goto out;
	}
	sn = jd_get(root, "signature_name");
	if (sn && (sn->type != JD_STRING || (sn->len && strcmp(sn->str, "serving_default")))) {
		fail(msg, msg_len, "unknown signature_name: the model has one signature, 'serving_default'");
		goto out;
	}
	/* the input contract: raw pixels held to it, unless the request declares its form */
	fv = jd_get(root, DLK_INPUT_FORM_PARAM);
	if (fv && (fv->type != JD_STRING || (form = dlk_input_form_parse(fv->str, fv->len)) < 0)) {
		fail(msg, msg_len, "'" DLK_INPUT_FORM_PARAM "' must be \"raw\" (values as the training data holds them, "
		     "pixels 0..255) or \"preprocessed\" (already scaled, the network's input)");
		goto out;
	}
	if (form == DLK_INPUT_PREPROCESSED) {
		dlk_serve_sig_preprocessed(sig, &pre);
		raw_sig = sig;
		sig = &pre;
	}
	inst = jd_get(root, "instances");
	inputs = jd_get(root, "inputs");
	if (!!inst + !!inputs != 1) {
		fail(msg, msg_len, "the request needs exactly one of 'instances' (rows) and 'inputs' (columns), not %s",
		     inst ? "both" : "neither");
		goto out;
	}
	if (inputs) {
		const struct jd_value *t = inputs;
		req->columnar = 1;
		if (inputs->type == JD_OBJECT) {
			t = jd_get(inputs, DLK_SERVE_INPUT);
			if (!t || inputs->n_items != 1) {
				fail(msg, msg_len, "'inputs' names the model's inputs: it takes one, '%s'", DLK_SERVE_INPUT);
				goto out;
			}
		}
		if (sig->tokenizer && t && t->type == JD_ARRAY && !t->numeric && any_text(t, 0)) {
			ret = text_rows(raw_sig, t, 0, form, "'inputs'", req, msg, msg_len);
			goto out;
		}
		long long rows = batch_rows(sig, t, "'inputs'", msg, msg_len);
		if (rows < 0)
			goto out;
		req->rows = rows;
		req->x = xmalloc((size_t)rows * sig->in_size * sizeof(float));
		if (form < 0 && dlk_serve_check_raw_doubles(raw_sig, DLK_DT_FP64, doc.nums + t->leaf_begin,
		                                            (size_t)rows * sig->in_size, msg, msg_len))
			goto out;
		if (dlk_serve_convert_doubles(sig, DLK_DT_FP64, doc.nums + t->leaf_begin, (size_t)rows * sig->in_size, req->x, &bad)) {
			fail(msg, msg_len, "'inputs': element %zu is not a finite number", bad);
			goto out;
		}
		ret = 0;
		goto out;
	}
	if (inst->type != JD_ARRAY || !inst->n_items) {
		fail(msg, msg_len, "'instances' must be a non-empty array of rows");
		goto out;
	}
	if (inst->numeric) {
		/* rows of numbers: the whole batch is one tensor */
		long long rows = batch_rows(sig, inst, "'instances'", msg, msg_len);
		if (rows < 0)
			goto out;
		req->rows = rows;
		req->x = xmalloc((size_t)rows * sig->in_size * sizeof(float));
		if (form < 0 && dlk_serve_check_raw_doubles(raw_sig, DLK_DT_FP64, doc.nums + inst->leaf_begin,
		                                            (size_t)rows * sig->in_size, msg, msg_len))
			goto out;
		if (dlk_serve_convert_doubles(sig, DLK_DT_FP64, doc.nums + inst->leaf_begin, (size_t)rows * sig->in_size, req->x, &bad)) {
			fail(msg, msg_len, "'instances': element %zu is not a finite number", bad);
			goto out;
		}
		ret = 0;
		goto out;
	}
	if (sig->tokenizer && any_text(inst, 1)) {
		ret = text_rows(raw_sig, inst, 1, form, "'instances'", req, msg, msg_len);
		goto out;
	}
	/* rows as objects: {"input": row} each */
	if (inst->n_numbers) {
		fail(msg, msg_len, "'instances' mixes numbers with other values: every row must have the same form");
		goto out;
	}
	req->rows = (long long)inst->n_items;
	req->x = xmalloc(inst->n_items * sig->in_size * sizeof(float));
	long long i = 0;
	for (const struct jd_value *row = inst->first; row; row = row->next, i++) {
		const struct jd_value *t = row;
		if (row->type == JD_OBJECT) {
			t = jd_get(row, DLK_SERVE_INPUT);
			if (!t || row->n_items != 1) {
				fail(msg, msg_len, "instances[%lld] names inputs the model does not have: it takes one, '%s'", i,
				     DLK_SERVE_INPUT);
				goto out;
			}
		}
		if (one_row(sig, t, i, msg, msg_len))
			goto out;
		if (form < 0 && dlk_serve_check_raw_doubles(raw_sig, DLK_DT_FP64, doc.nums + t->leaf_begin, sig->in_size, msg,
		                                            msg_len))
			goto out;
		if (dlk_serve_convert_doubles(sig, DLK_DT_FP64, doc.nums + t->leaf_begin, sig->in_size,
		                              req->x + (size_t)i * sig->in_size, &bad)) {
			fail(msg, msg_len, "instances[%lld]: element %zu is not a finite number", i, bad);
			goto out;
		}
	}
	ret = 0;
out:
	jd_release(&doc);
	if (ret)
		dlk_tfs_request_release(req);
	return ret;
}

void dlk_tfs_request_release(struct dlk_tfs_request *req)
{
	free(req->x);
	*req = (struct dlk_tfs_request)DLK_TFS_REQUEST_INIT;
}

static void row_array(struct dlk_buf *out, const float *v, int k)
{
	dlk_buf_addc(out, '[');
	for (int j = 0; j < k; j++) {
		if (j)
			dlk_buf_addc(out, ',');
		jd_write_float(out, v[j]);
	}
	dlk_buf_addc(out, ']');
}

void dlk_tfs_write_predict(const struct dlk_serve_sig *sig, const struct dlk_tfs_request *req, const float *logits,
                           struct dlk_buf *out)
{
	int k = sig->n_classes;
	long long rows = req->rows;
	float *probs = xmalloc((size_t)rows * (size_t)k * sizeof(float));
	const float *t[DLK_SERVE_N_OUTPUTS] = { probs, logits };

	dlk_serve_softmax(logits, (int)rows, k, probs);
	if (req->columnar) {
		dlk_buf_adds(out, "{\"outputs\":{");
		for (int o = 0; o < DLK_SERVE_N_OUTPUTS; o++) {
			dlk_buf_addf(out, "%s\"%s\":[", o ? "," : "", dlk_serve_output_name(o));
			for (long long r = 0; r < rows; r++) {
				if (r)
					dlk_buf_addc(out, ',');
				row_array(out, t[o] + (size_t)r * k, k);
			}
			dlk_buf_addc(out, ']');
		}
		dlk_buf_adds(out, "}}");
	} else {
		dlk_buf_adds(out, "{\"predictions\":[");
		for (long long r = 0; r < rows; r++) {
			dlk_buf_adds(out, r ? ",{" : "{");
			for (int o = 0; o < DLK_SERVE_N_OUTPUTS; o++) {
				dlk_buf_addf(out, "%s\"%s\":", o ? "," : "", dlk_serve_output_name(o));
				row_array(out, t[o] + (size_t)r * k, k);
			}
			dlk_buf_addc(out, '}');
		}
		dlk_buf_adds(out, "]}");
	}
	free(probs);
}

void dlk_tfs_write_status(const char *name, const char *state, int ready, struct dlk_buf *out)
{
	dlk_buf_addf(out,
	             "{\"model_version_status\":[{\"version\":\"1\",\"state\":\"%s\",\"status\":{\"error_code\":\"OK\",\"error_message\":\"\"}}],",
	             state);
	/* KServe's V1 protocol asks the same URL for {name, ready} */
	dlk_buf_adds(out, "\"name\":");
	jd_write_string(out, name, strlen(name));
	dlk_buf_addf(out, ",\"ready\":%s}", ready ? "true" : "false");
}

static void tf_tensor(struct dlk_buf *out, const char *name, const char *dtype, const int *dims, int rank)
{
	dlk_buf_addf(out, "\"%s\":{\"dtype\":\"%s\",\"tensor_shape\":{\"dim\":[{\"size\":\"-1\",\"name\":\"\"}", name,
	             dtype);
	for (int i = 0; i < rank; i++)
		dlk_buf_addf(out, ",{\"size\":\"%d\",\"name\":\"\"}", dims[i]);
	dlk_buf_addf(out, "],\"unknown_rank\":false},\"name\":\"%s\"}", name);
}

void dlk_tfs_write_metadata(const struct dlk_serve_sig *sig, struct dlk_buf *out)
{
	int flat = (int)sig->in_size;

	dlk_buf_adds(out, "{\"model_spec\":{\"name\":");
	jd_write_string(out, sig->name, strlen(sig->name));
	dlk_buf_adds(out, ",\"signature_name\":\"\",\"version\":\"1\"},\"metadata\":{\"signature_def\":{\"signature_def\":"
	                  "{\"serving_default\":{\"inputs\":{");
	if (sig->tokenizer) /* texts, one a row (their token ids are the preprocessed form) */
		tf_tensor(out, DLK_SERVE_INPUT, "DT_STRING", NULL, 0);
	else if (sig->rank == 3)
		tf_tensor(out, DLK_SERVE_INPUT, "DT_FLOAT", sig->dims, 3);
	else
		tf_tensor(out, DLK_SERVE_INPUT, "DT_FLOAT", &flat, 1);
	dlk_buf_adds(out, "},\"outputs\":{");
	for (int o = 0; o < DLK_SERVE_N_OUTPUTS; o++) {
		if (o)
			dlk_buf_addc(out, ',');
		tf_tensor(out, dlk_serve_output_name(o), "DT_FLOAT", &sig->n_classes, 1);
	}
	dlk_buf_adds(out, "},\"method_name\":\"tensorflow/serving/predict\"}}},\"dlk_input_contract\":{");
	dlk_serve_contract_json(sig, out);
	dlk_buf_adds(out, "}}}");
}
