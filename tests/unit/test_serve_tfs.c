/* The TensorFlow Serving REST codec: rows ("instances", plain or as objects) and columns
 * ("inputs"), the errors, and the answers TF Serving's clients expect. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>

#include "lib/data/bpe.h"
#include "lib/serve/tfs.h"

static struct dlk_serve_sig sig = { "m", { 1, 2, 2 }, 3, 4, 3, NULL, 1.0f / 255, 0.0f, 1.0f, { 0 }, 0, NULL, 0, { 0 }, { 0 }, { { 0 } } };
static struct jd_limits lim = { 32, 0 };

static int parse(const char *body, struct dlk_tfs_request *r, char *msg)
{
	return dlk_tfs_parse_predict(&sig, body, strlen(body), &lim, r, msg, 1024);
}

static const char *bad(const char *body)
{
	static char msg[1024];
	struct dlk_tfs_request r;
	if (!parse(body, &r, msg)) {
		dlk_tfs_request_release(&r);
		return "(accepted)";
	}
	return msg;
}

/* A text model (a tokenizer in the signature): strings in rows or columns become in_size ids as
 * the byte tokenizer encodes them (id 1 + byte, pad 0), the same ids the V2 route's BYTES give;
 * ids as numbers still pass; texts declared preprocessed, mixed rows and other values are named. */
static void test_text(void)
{
	struct dlk_serve_sig ts = { "t", { 1, 1, 4 }, 1, 4, 3, NULL, 1, 0, 1, { 0 }, 0, NULL, 0, { 0 }, { 0 }, { { 0 } } };
	struct dlk_serve_sig keep = sig;
	struct dlk_tfs_request r;
	struct dlk_buf out = DLK_BUF_INIT;
	char msg[1024];

	ts.tokenizer = dlk_tokenizer_byte();
	dlk_serve_sig_init_lut(&ts);
	sig = ts;
	CHECK(parse("{\"instances\":[\"ab\",[\"hello\"],{\"input\":\"x\"}]}", &r, msg) == 0);
	CHECK(r.rows == 3 && !r.columnar && r.x[0] == 1 + 'a' && r.x[1] == 1 + 'b' && r.x[2] == 0 && r.x[3] == 0);
	CHECK(r.x[4] == 1 + 'h' && r.x[7] == 1 + 'l' && r.x[8] == 1 + 'x' && r.x[9] == 0);
	dlk_tfs_request_release(&r);
	CHECK(parse("{\"inputs\":{\"input\":[\"\",\"hi\"]}}", &r, msg) == 0);
	CHECK(r.rows == 2 && r.columnar && r.x[0] == 0 && r.x[4] == 1 + 'h' && r.x[5] == 1 + 'i' && r.x[6] == 0);
	dlk_tfs_request_release(&r);
	CHECK(parse("{\"inputs\":[[\"hi\"]],\"input_form\":\"raw\"}", &r, msg) == 0 && r.rows == 1 && r.x[1] == 1 + 'i');
	dlk_tfs_request_release(&r);
	/* TF Serving's binary strings: {"b64": base64}, as a row, in {"input": ...} or a column */
	CHECK(parse("{\"instances\":[{\"b64\":\"aGk=\"},{\"input\":{\"b64\":\"//8A\"}},{\"b64\":\"\"}]}", &r, msg) == 0);
	CHECK(r.rows == 3 && r.x[0] == 1 + 'h' && r.x[1] == 1 + 'i' && r.x[2] == 0 && r.x[4] == 256 && r.x[5] == 256 &&
	      r.x[6] == 1 && r.x[7] == 0 && r.x[8] == 0);
	dlk_tfs_request_release(&r);
	CHECK(parse("{\"inputs\":[{\"b64\":\"aGVsbG8=\"}]}", &r, msg) == 0 && r.rows == 1 && r.x[3] == 1 + 'l');
	dlk_tfs_request_release(&r);
	CHECK_CONTAINS(bad("{\"instances\":[\"a\",{\"b64\":\"aGk\"}]}"), "'instances'[1]: 'b64' is not base64");
	CHECK_CONTAINS(bad("{\"instances\":[{\"b64\":\"a*k=\"}]}"), "'instances'[0]: 'b64' is not base64");
	CHECK(parse("{\"instances\":[[5,6,7,0]]}", &r, msg) == 0 && r.rows == 1 && r.x[0] == 5 && r.x[3] == 0);
	dlk_tfs_request_release(&r);
	CHECK_CONTAINS(bad("{\"instances\":[\"a\"],\"input_form\":\"preprocessed\"}"),
	               "'instances': texts are the raw form, which the server tokenizes; the preprocessed form is the 4 token ids");
	CHECK_CONTAINS(bad("{\"inputs\":[\"a\",3]}"), "'inputs' mixes texts with numbers");
	CHECK_CONTAINS(bad("{\"instances\":[\"a\",{\"input\":[1,2,3,4]}]}"),
	               "'instances'[1] is not a text: the model 't' takes one string a row");
	CHECK_CONTAINS(bad("{\"instances\":[\"a\",[\"b\",\"c\"]]}"), "'instances'[1] is not a text");
	CHECK_CONTAINS(bad("{\"instances\":[{\"input\":\"a\",\"other\":\"b\"}]}"), "instances[0] names inputs the model does not have");
	dlk_tfs_write_metadata(&ts, &out);
	CHECK_CONTAINS(out.data, "\"input\":{\"dtype\":\"DT_STRING\",\"tensor_shape\":{\"dim\":[{\"size\":\"-1\"");
	CHECK_CONTAINS(out.data, "\"raw\":\"text\",\"tokenizer\":\"byte\"");
	dlk_buf_release(&out);
	sig = keep;
	/* a model without a tokenizer takes no texts */
	CHECK_CONTAINS(bad("{\"instances\":[\"ab\"]}"), "instances[0]: the input must be a (nested) array of numbers");
	dlk_tokenizer_free((struct dlk_tokenizer *)ts.tokenizer);
}

int main(void)
{
	struct dlk_tfs_request r;
	struct dlk_buf out = DLK_BUF_INIT;
	char msg[1024];
	float logits[6] = { 0, 1, 2, 3, 4, 5 };

	dlk_serve_sig_init_lut(&sig);
	/* rows, nested as the model declares them or flat */
	CHECK(parse("{\"instances\":[[[[0,1],[2,3]]],[[[4,5],[6,255]]]]}", &r, msg) == 0);
	CHECK(r.rows == 2 && !r.columnar && r.x[7] == sig.lut[255]);
	dlk_tfs_write_predict(&sig, &r, logits, &out);
	cJSON *j = cJSON_Parse(out.data);
	cJSON *p1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "predictions"), 1);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "predictions")) == 2);
	CHECK(cJSON_GetArrayItem(cJSON_GetObjectItem(p1, "logits"), 2)->valuedouble == 5);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(p1, "probabilities")) == 3);
	cJSON_Delete(j);
	dlk_buf_reset(&out);
	dlk_tfs_request_release(&r);
	CHECK(parse("{\"signature_name\":\"serving_default\",\"instances\":[[0,1,2,3]]}", &r, msg) == 0 && r.rows == 1);
	dlk_tfs_request_release(&r);
	/* rows as objects naming the input */
	CHECK(parse("{\"instances\":[{\"input\":[0,1,2,3]},{\"input\":[[[4,5],[6,7]]]}]}", &r, msg) == 0);
	CHECK(r.rows == 2 && r.x[6] == sig.lut[6]);
	dlk_tfs_request_release(&r);
	/* columns, bare or named */
	CHECK(parse("{\"inputs\":{\"input\":[[0,1,2,3],[4,5,6,7]]}}", &r, msg) == 0 && r.rows == 2 && r.columnar);
	dlk_tfs_write_predict(&sig, &r, logits, &out);
	j = cJSON_Parse(out.data);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "outputs"), "logits")) == 2);
	cJSON_Delete(j);
	dlk_buf_reset(&out);
	dlk_tfs_request_release(&r);
	CHECK(parse("{\"inputs\":[[0,1,2,3]]}", &r, msg) == 0 && r.rows == 1);
	dlk_tfs_request_release(&r);

	CHECK_CONTAINS(bad("{}"), "exactly one of 'instances' (rows) and 'inputs' (columns), not neither");
	CHECK_CONTAINS(bad("{\"instances\":[[0,1,2,3]],\"inputs\":[[0,1,2,3]]}"), "not both");
	CHECK_CONTAINS(bad("{\"instances\":[]}"), "non-empty array");
	CHECK_CONTAINS(bad("{\"instances\":[[0,1,2]]}"), "shape [1,3] does not fit the model's [-1,1,2,2]");
	CHECK_CONTAINS(bad("{\"instances\":[[0,1,2,3],[0,1]]}"), "not a rectangular array");
	CHECK_CONTAINS(bad("{\"instances\":[{\"input\":[0,1,2,3]},{\"x\":[0,1,2,3]}]}"), "instances[1] names inputs");
	CHECK_CONTAINS(bad("{\"instances\":[{\"input\":[0,1,2,3]},[0,1,\"2\",3]]}"), "instances[1]: the input must be");
	CHECK_CONTAINS(bad("{\"instances\":[1,{\"input\":[0,1,2,3]}]}"), "mixes numbers with other values");
	CHECK_CONTAINS(bad("{\"inputs\":{\"input\":[[0,1,2,3]],\"other\":[1]}}"), "it takes one, 'input'");
	CHECK_CONTAINS(bad("{\"signature_name\":\"predict\",\"instances\":[[0,1,2,3]]}"), "unknown signature_name");
	CHECK_CONTAINS(bad("{\"instances\":[[0,1,2,3]"), "invalid JSON");

	test_text();

	dlk_tfs_write_status("m", "AVAILABLE", 1, &out);
	j = cJSON_Parse(out.data);
	cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "model_version_status"), 0);
	CHECK_STR(cJSON_GetObjectItem(st, "state")->valuestring, "AVAILABLE");
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "ready")));
	cJSON_Delete(j);
	dlk_buf_reset(&out);
	dlk_tfs_write_metadata(&sig, &out);
	j = cJSON_Parse(out.data);
	CHECK_MSG(j != NULL, "metadata is JSON: %s", out.data);
	cJSON *sd = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "signature_def"), "signature_def");
	cJSON *in = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(sd, "serving_default"), "inputs"), "input");
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(in, "tensor_shape"), "dim")) == 4);
	cJSON_Delete(j);
	dlk_buf_release(&out);
	return CHECK_DONE();
}
