/* The serving input contract (lib/serve/tensor.h): what the protocols' metadata says the input
 * takes, and which requests are refused for contradicting it. A raw-pixel model (its scaling
 * divides by 255) refuses a float tensor of pixels already scaled (x / 255) or normalised
 * ((x - mean) / std) unless the request declares its form with input_form, in V2's parameters
 * (request or input level) or TF Serving's top level; declared preprocessed, the values enter the
 * network as they are. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>

#include "lib/serve/tfs.h"
#include "lib/serve/v2.h"

static struct dlk_serve_sig sig = { "m", { 1, 2, 2 }, 3, 4, 2, NULL, 1.0f / 255, 0.5f, 2.0f, { 0 }, 0, NULL };
static struct jd_limits lim = { 32, 0 };

/* 0 accepted (r filled), -1 refused (msg) */
static int v2(const struct dlk_serve_sig *s, const char *body, struct dlk_v2_request *r, char *msg)
{
	return dlk_v2_parse_infer(s, body, strlen(body), -1, &lim, r, msg, 1024);
}

#define INPUT(dt, data, params) \
	"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"" dt "\",\"data\":" data params "}]"

static void test_v2(void)
{
	struct dlk_v2_request r;
	char msg[1024];

	/* x / 255 as FP32: refused, naming the contract and the parameter */
	CHECK(v2(&sig, INPUT("FP32", "[0.0, 0.25, 0.5, 1.0]", "") "}", &r, msg) == -1);
	CHECK_CONTAINS(msg, "every value is within [0, 1] and not all are whole numbers");
	CHECK_CONTAINS(msg, "raw pixels 0..255, which the server scales as (v * 0.00392156886 - 0.5) / 2");
	CHECK_CONTAINS(msg, "input_form = \"preprocessed\"");
	/* FP16 and FP64 too; normalised values (a negative fraction) as well */
	CHECK(v2(&sig, INPUT("FP64", "[0.1, 0.2, 0.3, 0.4]", "") "}", &r, msg) == -1);
	CHECK(v2(&sig, INPUT("FP32", "[-0.42, 1.3, 2.0, 0.0]", "") "}", &r, msg) == -1);
	CHECK_CONTAINS(msg, "element 0 (-0.42) is negative and not a whole number");
	/* declared preprocessed at the request's level: the values are the network's input */
	CHECK(v2(&sig, "{\"parameters\":{\"input_form\":\"preprocessed\"},\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],"
	               "\"datatype\":\"FP32\",\"data\":[0.0,0.25,0.5,-1.5]}]}", &r, msg) == 0);
	CHECK_MSG(r.x[0] == 0.0f && r.x[1] == 0.25f && r.x[3] == -1.5f, "preprocessed values enter the network unscaled");
	dlk_v2_request_release(&r);
	/* ... or at the input's */
	CHECK(v2(&sig, INPUT("FP32", "[0.0, 0.25, 0.5, 1.0]", ",\"parameters\":{\"input_form\":\"preprocessed\"}") "}", &r,
	         msg) == 0);
	CHECK(r.x[2] == 0.5f);
	dlk_v2_request_release(&r);
	/* declared raw: the client says these are raw values, and they are scaled as such */
	CHECK(v2(&sig, INPUT("FP32", "[0.0, 0.25, 0.5, 1.0]", ",\"parameters\":{\"input_form\":\"raw\"}") "}", &r, msg) == 0);
	CHECK(r.x[1] == (0.25f * sig.scale - sig.mean) / sig.std);
	dlk_v2_request_release(&r);
	/* real pixels pass undeclared, as floats or integers, a black-and-white image of 0s and 1s too */
	CHECK(v2(&sig, INPUT("FP32", "[0, 17, 254.5, 255]", "") "}", &r, msg) == 0);
	dlk_v2_request_release(&r);
	CHECK(v2(&sig, INPUT("FP32", "[0, 1, 1, 0]", "") "}", &r, msg) == 0);
	CHECK(r.x[1] == sig.lut[1]);
	dlk_v2_request_release(&r);
	CHECK(v2(&sig, INPUT("UINT8", "[0, 1, 1, 0]", "") "}", &r, msg) == 0);
	dlk_v2_request_release(&r);
	/* a bad form, or two levels that disagree */
	CHECK(v2(&sig, INPUT("FP32", "[1, 2, 3, 4]", ",\"parameters\":{\"input_form\":\"pixels\"}") "}", &r, msg) == -1);
	CHECK_CONTAINS(msg, "input_form must be \"raw\"");
	CHECK(v2(&sig, "{\"parameters\":{\"input_form\":\"raw\"},\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],"
	               "\"datatype\":\"FP32\",\"parameters\":{\"input_form\":\"preprocessed\"},\"data\":[1,2,3,4]}]}",
	         &r, msg) == -1);
	CHECK_CONTAINS(msg, "disagree");
	/* binary FP32 x / 255: refused as well */
	{
		const char *h = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":16}}]}";
		float v[4] = { 0.1f, 0.2f, 0.3f, 0.0f };
		char body[256];
		size_t hl = strlen(h);
		memcpy(body, h, hl);
		memcpy(body + hl, v, 16);
		CHECK(dlk_v2_parse_infer(&sig, body, hl + 16, (long long)hl, &lim, &r, msg, sizeof(msg)) == -1);
		CHECK_CONTAINS(msg, "within [0, 1]");
	}
	/* a model whose raw values are not pixels (a CSV's, scale 1) has no range to hold requests to */
	{
		struct dlk_serve_sig csv = sig;
		csv.scale = 1.0f;
		dlk_serve_sig_init_lut(&csv);
		CHECK(!csv.pixels);
		CHECK(v2(&csv, INPUT("FP32", "[0.1, 0.2, 0.3, -0.4]", "") "}", &r, msg) == 0);
		dlk_v2_request_release(&r);
	}
}

static void test_metadata(void)
{
	struct dlk_buf b = DLK_BUF_INIT;
	cJSON *j, *p;

	dlk_v2_write_model_metadata(&sig, &b);
	j = cJSON_Parse(b.data);
	p = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "inputs"), 0), "parameters");
	CHECK_MSG(p != NULL, "the V2 metadata is JSON and its input has parameters: %s", b.data);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(p, "input_form")), "raw");
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(p, "raw_range")) == 2 &&
	      cJSON_GetArrayItem(cJSON_GetObjectItem(p, "raw_range"), 1)->valuedouble == 255);
	CHECK(fabs(cJSON_GetObjectItem(p, "mean")->valuedouble - 0.5) < 1e-9 &&
	      fabs(cJSON_GetObjectItem(p, "std")->valuedouble - 2) < 1e-9);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(p, "input_forms"), 1)), "preprocessed");
	cJSON_Delete(j);
	dlk_buf_reset(&b);
	dlk_tfs_write_metadata(&sig, &b);
	j = cJSON_Parse(b.data);
	p = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "dlk_input_contract");
	CHECK_MSG(p && cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "signature_def"),
	          "TF Serving's metadata keeps its signature_def and adds the contract: %s", b.data);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(p, "form_parameter")), "input_form");
	cJSON_Delete(j);
	dlk_buf_release(&b);
}

static void test_tfs(void)
{
	struct dlk_tfs_request r;
	char msg[1024];
	const char *scaled = "{\"instances\":[[0.0,0.25,0.5,1.0]]}";
	const char *declared = "{\"input_form\":\"preprocessed\",\"instances\":[[0.0,0.25,0.5,1.0]]}";
	const char *columns = "{\"inputs\":[[0.5,0.5,0.5,0.5]]}";
	const char *objects = "{\"instances\":[{\"input\":[0.5,0.5,0.5,0.5]}]}";

	CHECK(dlk_tfs_parse_predict(&sig, scaled, strlen(scaled), &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "input_form");
	CHECK(dlk_tfs_parse_predict(&sig, columns, strlen(columns), &lim, &r, msg, sizeof(msg)) == -1);
	CHECK(dlk_tfs_parse_predict(&sig, objects, strlen(objects), &lim, &r, msg, sizeof(msg)) == -1);
	CHECK(dlk_tfs_parse_predict(&sig, declared, strlen(declared), &lim, &r, msg, sizeof(msg)) == 0);
	CHECK(r.rows == 1 && r.x[1] == 0.25f);
	dlk_tfs_request_release(&r);
	const char *bad_form = "{\"input_form\":3,\"instances\":[[1,2,3,4]]}";
	CHECK(dlk_tfs_parse_predict(&sig, bad_form, strlen(bad_form), &lim, &r, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "'input_form' must be");
}

int main(void)
{
	dlk_serve_sig_init_lut(&sig);
	CHECK(sig.pixels);
	test_v2();
	test_metadata();
	test_tfs();
	return CHECK_DONE();
}
