/* The TensorFlow Serving REST codec: rows ("instances", plain or as objects) and columns
 * ("inputs"), the errors, and the answers TF Serving's clients expect. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>

#include "lib/serve/tfs.h"

static struct dlk_serve_sig sig = { "m", { 1, 2, 2 }, 3, 4, 3, NULL, 1.0f / 255, 0.0f, 1.0f, { 0 }, 0, NULL };
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
