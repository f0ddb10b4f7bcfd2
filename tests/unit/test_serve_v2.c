/* The KServe V2 codec: every way a request can carry the input (JSON flat or nested, each numeric
 * datatype, binary tensors), every way it can be wrong (and the message that says so), and
 * responses in JSON, binary and classification form, as Triton's clients read them. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/data/bpe.h"
#include "lib/serve/v2.h"

static char *const labels[3] = { "cat", "dog", "" };
static struct dlk_serve_sig sig = { "m", { 1, 2, 2 }, 3, 4, 3, labels, 1.0f / 255, 0.5f, 2.0f, { 0 }, 0, NULL, 0, { 0 }, { 0 }, { { 0 } } };
static struct jd_limits lim = { 32, 0 };

static int parse_json(const char *body, struct dlk_v2_request *r, char *msg)
{
	return dlk_v2_parse_infer(&sig, body, strlen(body), -1, &lim, r, msg, 1024);
}

/* "msg" of a request that must fail */
static const char *bad(const char *body)
{
	static char msg[1024];
	struct dlk_v2_request r;
	if (!parse_json(body, &r, msg)) {
		dlk_v2_request_release(&r);
		return "(accepted)";
	}
	return msg;
}

static float scaled(double v) { return ((float)v * sig.scale - sig.mean) / sig.std; }

static void test_decode(void)
{
	struct dlk_v2_request r;
	char msg[1024];

	CHECK(parse_json("{\"id\":\"42\",\"inputs\":[{\"name\":\"input\",\"shape\":[2,4],\"datatype\":\"UINT8\","
	                 "\"data\":[0,1,2,3,255,254,253,252]}]}", &r, msg) == 0);
	CHECK(r.rows == 2 && r.id && !strcmp(r.id, "42") && r.n_outputs == 2);
	CHECK(r.x[0] == sig.lut[0] && r.x[4] == sig.lut[255] && r.x[7] == scaled(252));
	CHECK(r.outputs[0].which == 0 && r.outputs[1].which == 1 && !r.outputs[0].binary);
	dlk_v2_request_release(&r);

	/* nested data in the model's own shape, FP32 values that are not integers */
	CHECK(parse_json("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,1,2,2],\"datatype\":\"FP32\","
	                 "\"data\":[[[[0.5,1.5],[2.25,-3]]]]}],\"parameters\":{\"binary_data_output\":true}}", &r, msg) == 0);
	CHECK(r.rows == 1 && r.x[0] == scaled(0.5) && r.x[3] == scaled(-3) && r.outputs[0].binary && r.outputs[1].binary);
	dlk_v2_request_release(&r);

	/* every numeric datatype, in range */
	static const char *const types[] = { "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64" };
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		char body[256];
		snprintf(body, sizeof(body), "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"%s\",\"data\":[1,2,3,%s]}]}",
		         types[t], types[t][0] == 'U' ? "4" : "-4");
		int ok = parse_json(body, &r, msg) == 0;
		CHECK_MSG(ok && r.x[1] == sig.lut[2], "datatype %s is read", types[t]);
		if (ok)
			dlk_v2_request_release(&r);
	}

	/* outputs: selection, order, binary and classification per output */
	CHECK(parse_json("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}],"
	                 "\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"binary_data\":true}},"
	                 "{\"name\":\"probabilities\",\"parameters\":{\"classification\":2}}]}", &r, msg) == 0);
	CHECK(r.n_outputs == 2 && r.outputs[0].which == 1 && r.outputs[0].binary && r.outputs[1].which == 0 &&
	      r.outputs[1].classification == 2 && !r.outputs[1].binary);
	dlk_v2_request_release(&r);
	/* unknown keys are someone else's extension: ignored */
	CHECK(parse_json("{\"model_name\":\"m\",\"parameters\":{\"priority\":1},\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],"
	                 "\"datatype\":\"FP32\",\"data\":[1,2,3,4],\"extra\":{}}]}", &r, msg) == 0);
	dlk_v2_request_release(&r);
}

static void test_binary(void)
{
	struct dlk_v2_request r;
	char msg[1024], body[512];
	const char *hdr = "{\"inputs\":[{\"name\":\"input\",\"shape\":[2,1,2,2],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":32}}]}";
	float v[8] = { 0, 1, 2, 3, 255, 0.5f, -1, 7 };
	size_t hl = strlen(hdr);

	memcpy(body, hdr, hl);
	memcpy(body + hl, v, sizeof(v));
	CHECK(dlk_v2_parse_infer(&sig, body, hl + 32, (long long)hl, &lim, &r, msg, sizeof(msg)) == 0);
	CHECK(r.rows == 2 && r.x[4] == sig.lut[255] && r.x[5] == scaled(0.5));
	dlk_v2_request_release(&r);
	/* the binary header lies: longer than the body, or sizes that do not add up */
	CHECK(dlk_v2_parse_infer(&sig, body, hl + 32, (long long)hl + 100, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "Inference-Header-Content-Length is");
	CHECK(dlk_v2_parse_infer(&sig, body, hl + 31, (long long)hl, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "runs past the end of the body");
	memcpy(body + hl + 32, "xx", 2);
	CHECK(dlk_v2_parse_infer(&sig, body, hl + 34, (long long)hl, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "34 bytes of binary data follow the JSON, but the inputs' binary_data_size add up to 32");
	CHECK(dlk_v2_parse_infer(&sig, body, hl + 32, (long long)hl - 3, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "invalid JSON");
	/* binary_data_size that does not match shape x datatype */
	const char *h2 = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":8}}]}";
	size_t l2 = strlen(h2);
	memcpy(body, h2, l2);
	CHECK(dlk_v2_parse_infer(&sig, body, l2 + 8, (long long)l2, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "binary_data_size is 8 bytes, but shape and datatype FP32 need 16");
	/* NaN in a binary tensor */
	const char *h3 = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":16}}]}";
	size_t l3 = strlen(h3);
	float nan4[4] = { 1, 2, __builtin_nanf(""), 4 };
	memcpy(body, h3, l3);
	memcpy(body + l3, nan4, 16);
	CHECK(dlk_v2_parse_infer(&sig, body, l3 + 16, (long long)l3, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "element 2 is not a finite number");
	/* FP16 and UINT8 binary */
	const char *h4 = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP16\",\"parameters\":{\"binary_data_size\":8}}]}";
	size_t l4 = strlen(h4);
	uint16_t half[4] = { 0x3c00, 0x4000, 0xc000, 0x5bf8 }; /* 1, 2, -2, 255 */
	memcpy(body, h4, l4);
	memcpy(body + l4, half, 8);
	CHECK(dlk_v2_parse_infer(&sig, body, l4 + 8, (long long)l4, &lim, &r, msg, sizeof(msg)) == 0);
	CHECK(r.x[0] == sig.lut[1] && r.x[2] == scaled(-2) && r.x[3] == sig.lut[255]);
	dlk_v2_request_release(&r);
	/* binary data without the header that says where the JSON ends */
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"UINT8\",\"parameters\":{\"binary_data_size\":4}}]}"),
	               "no Inference-Header-Content-Length header");
}

static void test_errors(void)
{
	CHECK_CONTAINS(bad("[1]"), "must be a JSON object");
	CHECK_CONTAINS(bad("{\"inputs\":[]}"), "no inputs");
	CHECK_CONTAINS(bad("{}"), "'inputs' must be an array");
	CHECK_CONTAINS(bad("{\"id\":5,\"inputs\":[]}"), "'id' must be a string");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"x\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}"),
	               "unknown input 'x': the model 'm' takes one input, 'input'");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]},"
	                   "{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}"),
	               "input 'input' is given twice");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,5],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5]}]}"),
	               "shape [1,5] does not fit the model's [-1,1,2,2] (or [-1,4])");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3]}]}"),
	               "'data' holds 3 numbers, but its shape needs 4");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,\"3\",4]}]}"),
	               "'data' must be an array of numbers");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"BYTES\",\"data\":[\"a\",\"b\",\"c\",\"d\"]}]}"),
	               "datatype BYTES is not a number type");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FLOAT\",\"data\":[1,2,3,4]}]}"),
	               "unknown datatype 'FLOAT'");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"UINT8\",\"data\":[1,2,3,256]}]}"),
	               "element 3 (256) is not a valid UINT8");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"INT32\",\"data\":[1,2,3.5,4]}]}"),
	               "element 2 (3.5) is not a valid INT32");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,-4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}"),
	               "shape[1] = -4 is not a size");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[0,4],\"datatype\":\"FP32\",\"data\":[]}]}"), "has no rows");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\"}]}"),
	               "exactly one of 'data' and parameters.binary_data_size, but has neither");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1099511627776,1099511627776],\"datatype\":\"FP32\",\"data\":[1]}]}"),
	               "more than any request can hold");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}],"
	                   "\"outputs\":[{\"name\":\"scores\"}]}"),
	               "unknown output 'scores'");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}],"
	                   "\"outputs\":[{\"name\":\"logits\"},{\"name\":\"logits\"}]}"),
	               "output 'logits' is requested twice");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}],"
	                   "\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"classification\":-1}}]}"),
	               "classification must be a non-negative integer");
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}],"
	                   "\"parameters\":{\"binary_data_output\":\"yes\"}}"),
	               "binary_data_output must be true or false");
	/* a name from the request is shown printable, never raw */
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"\\u0001\\u001b[31m\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}"),
	               "unknown input '??[31m'");
}

static void test_encode(void)
{
	struct dlk_v2_request r;
	struct dlk_buf out = DLK_BUF_INIT;
	char msg[1024];
	size_t json_len;
	float logits[6] = { 1, 3, 2, -1, -1, 5 };

	CHECK(parse_json("{\"id\":\"a\\\"b\",\"inputs\":[{\"name\":\"input\",\"shape\":[2,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5,6,7,8]}]}",
	                 &r, msg) == 0);
	dlk_v2_write_infer(&sig, &r, logits, &out, &json_len);
	CHECK(json_len == 0);
	cJSON *j = cJSON_Parse(out.data);
	CHECK_MSG(j != NULL, "the response is JSON: %s", out.data);
	CHECK_STR(cJSON_GetObjectItem(j, "id")->valuestring, "a\"b");
	CHECK_STR(cJSON_GetObjectItem(j, "model_name")->valuestring, "m");
	cJSON *o0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "outputs"), 0);
	CHECK_STR(cJSON_GetObjectItem(o0, "name")->valuestring, "probabilities");
	cJSON *d = cJSON_GetObjectItem(o0, "data");
	double sum = 0;
	for (int i = 0; i < 3; i++)
		sum += cJSON_GetArrayItem(d, i)->valuedouble;
	CHECK_NEAR(sum, 1.0, 1e-6);
	cJSON *o1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "outputs"), 1);
	CHECK((float)cJSON_GetArrayItem(cJSON_GetObjectItem(o1, "data"), 5)->valuedouble == 5.0f);
	CHECK(cJSON_GetArrayItem(cJSON_GetObjectItem(o1, "shape"), 0)->valueint == 2);
	cJSON_Delete(j);
	dlk_v2_request_release(&r);
	dlk_buf_reset(&out);

	/* binary logits and classification (binary BYTES: 4-byte length, then the string) */
	CHECK(parse_json("{\"inputs\":[{\"name\":\"input\",\"shape\":[2,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5,6,7,8]}],"
	                 "\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"binary_data\":true}},"
	                 "{\"name\":\"logits\",\"parameters\":{\"binary_data\":true,\"classification\":2}}]}", &r, msg) == -1);
	CHECK(parse_json("{\"inputs\":[{\"name\":\"input\",\"shape\":[2,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5,6,7,8]}],"
	                 "\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"binary_data\":true}},"
	                 "{\"name\":\"probabilities\",\"parameters\":{\"binary_data\":true,\"classification\":2}}]}", &r, msg) == 0);
	dlk_v2_write_infer(&sig, &r, logits, &out, &json_len);
	CHECK(json_len > 0 && json_len < out.len);
	j = cJSON_ParseWithLength(out.data, json_len);
	CHECK(j != NULL);
	o0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "outputs"), 0);
	o1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "outputs"), 1);
	int n0 = cJSON_GetObjectItem(cJSON_GetObjectItem(o0, "parameters"), "binary_data_size")->valueint;
	int n1 = cJSON_GetObjectItem(cJSON_GetObjectItem(o1, "parameters"), "binary_data_size")->valueint;
	CHECK(n0 == 24 && json_len + (size_t)n0 + (size_t)n1 == out.len);
	CHECK(!memcmp(out.data + json_len, logits, 24));
	CHECK_STR(cJSON_GetObjectItem(o1, "datatype")->valuestring, "BYTES");
	const unsigned char *p = (const unsigned char *)out.data + json_len + 24;
	uint32_t len0 = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	char first[64];
	snprintf(first, sizeof(first), "%.*s", (int)len0, (const char *)p + 4);
	CHECK_MSG(!strncmp(first, "0.6", 3) && strstr(first, ":1:dog"), "the best class of row 0 comes first: %s", first);
	/* row 1: logits -1, -1, 5: class 2 (no label) then class 0 (the lower index wins a tie) */
	p += 4 + len0;
	uint32_t len1 = (uint32_t)p[0] | (uint32_t)p[1] << 8;
	p += 4 + len1;
	uint32_t len2 = (uint32_t)p[0] | (uint32_t)p[1] << 8;
	snprintf(first, sizeof(first), "%.*s", (int)len2, (const char *)p + 4);
	CHECK_MSG(strstr(first, ":2") && !strstr(first, ":2:"), "an empty label is left out: %s", first);
	cJSON_Delete(j);
	dlk_v2_request_release(&r);
	dlk_buf_release(&out);
}

static void test_metadata(void)
{
	struct dlk_buf out = DLK_BUF_INIT;
	dlk_v2_write_model_metadata(&sig, &out);
	cJSON *j = cJSON_Parse(out.data);
	CHECK(j != NULL);
	cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "inputs"), 0);
	char *shape = cJSON_PrintUnformatted(cJSON_GetObjectItem(in, "shape"));
	CHECK_STR(shape, "[-1,1,2,2]");
	free(shape);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "outputs")) == 2);
	cJSON_Delete(j);
	dlk_buf_reset(&out);
	dlk_v2_write_server_metadata("1.2.3", &out);
	CHECK_CONTAINS(out.data, "\"extensions\":[\"binary_tensor_data\",\"classification\"]");
	dlk_buf_reset(&out);
	dlk_v2_write_error("bad \"thing\"\n", &out);
	CHECK_STR(out.data, "{\"error\":\"bad \\\"thing\\\"\\n\"}");
	dlk_buf_release(&out);
}

/* A text model (a tokenizer in the signature): BYTES texts, JSON or binary, become in_size ids
 * padded with the pad id, exactly as the byte tokenizer encodes them (id 1 + byte); its metadata
 * says BYTES; ids themselves are the preprocessed form; what does not fit is named. */
static void test_text(void)
{
	struct dlk_tokenizer *tok = dlk_tokenizer_byte();
	struct dlk_serve_sig ts = { "t", { 1, 1, 4 }, 1, 4, 3, labels, 1, 0, 1, { 0 }, 0, NULL, 0, { 0 }, { 0 }, { { 0 } } };
	struct dlk_v2_request r;
	struct dlk_buf out = DLK_BUF_INIT;
	char msg[1024], body[512];
	const char *b;

	ts.tokenizer = tok;
	dlk_serve_sig_init_lut(&ts);
	/* JSON: a flat array, and [N, 1] as arrays of one; a text longer than 4 ids is cut */
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[2],\"datatype\":\"BYTES\",\"data\":[\"ab\",\"hello\"]}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == 0);
	CHECK(r.rows == 2 && r.x[0] == 1 + 'a' && r.x[1] == 1 + 'b' && r.x[2] == 0 && r.x[3] == 0);
	CHECK(r.x[4] == 1 + 'h' && r.x[7] == 1 + 'l');
	dlk_v2_request_release(&r);
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[2,1],\"datatype\":\"BYTES\",\"data\":[[\"\"],[\"x\"]]}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == 0);
	CHECK(r.rows == 2 && r.x[0] == 0 && r.x[4] == 1 + 'x' && r.x[5] == 0);
	dlk_v2_request_release(&r);
	/* binary: 4-byte little-endian lengths, then the bytes (tritonclient's default) */
	const char *hdr = "{\"inputs\":[{\"name\":\"input\",\"shape\":[2,1],\"datatype\":\"BYTES\",\"parameters\":{\"binary_data_size\":11}}]}";
	size_t hl = strlen(hdr);
	memcpy(body, hdr, hl);
	memcpy(body + hl, "\2\0\0\0hi\1\0\0\0\0", 11);
	CHECK(dlk_v2_parse_infer(&ts, body, hl + 11, (long long)hl, &lim, &r, msg, sizeof(msg)) == 0);
	CHECK(r.rows == 2 && r.x[0] == 1 + 'h' && r.x[1] == 1 + 'i' && r.x[2] == 0 && r.x[4] == 1 && r.x[5] == 0);
	dlk_v2_request_release(&r);
	body[hl + 6] = 9; /* the second length runs past the data */
	CHECK(dlk_v2_parse_infer(&ts, body, hl + 11, (long long)hl, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "the binary data ends inside text 1 of 2");
	/* numbers are ids, as before; texts declared preprocessed, wrong shapes and counts are refused */
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"INT32\",\"data\":[5,6,7,0]}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == 0);
	CHECK(r.rows == 1 && r.x[0] == 5 && r.x[3] == 0);
	dlk_v2_request_release(&r);
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"a\"],"
	    "\"parameters\":{\"input_form\":\"preprocessed\"}}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "BYTES texts are the raw form");
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,2],\"datatype\":\"BYTES\",\"data\":[\"a\",\"b\"]}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "shape [N] or [N,1], one text a row");
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[3],\"datatype\":\"BYTES\",\"data\":[\"a\",\"b\"]}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "'data' holds 2 texts, but its shape needs 3");
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[2],\"datatype\":\"BYTES\",\"data\":[\"a\",{}]}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "data[1] is not a string");
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[2],\"datatype\":\"BYTES\",\"data\":[\"a\",1]}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "must be an array of strings");
	b = "{\"inputs\":[{\"name\":\"input\",\"shape\":[16777216],\"datatype\":\"BYTES\",\"data\":[\"a\"]}]}";
	CHECK(dlk_v2_parse_infer(&ts, b, strlen(b), -1, &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "this model takes at most 4194304");
	/* a model without a tokenizer still refuses BYTES */
	CHECK_CONTAINS(bad("{\"inputs\":[{\"name\":\"input\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"a\"]}]}"),
	               "is not a number type");
	dlk_v2_write_model_metadata(&ts, &out);
	CHECK_CONTAINS(out.data, "\"datatype\":\"BYTES\",\"shape\":[-1,1]");
	CHECK_CONTAINS(out.data, "\"raw\":\"text\",\"tokenizer\":\"byte\",\"vocab_size\":257,\"pad_id\":0,\"sequence_length\":4");
	dlk_buf_release(&out);
	dlk_tokenizer_free(tok);
}

int main(void)
{
	dlk_serve_sig_init_lut(&sig);
	test_decode();
	test_binary();
	test_errors();
	test_encode();
	test_metadata();
	test_text();
	return CHECK_DONE();
}
