/* The serving input contract (lib/serve/tensor.h): what the protocols' metadata says the input
 * takes, and which requests are refused for contradicting it. A raw-pixel model (its scaling
 * divides by 255) refuses a float tensor of pixels already scaled (x / 255) or normalised
 * ((x - mean) / std) unless the request declares its form with input_form, in V2's parameters
 * (request or input level) or TF Serving's top level; declared preprocessed, the values enter the
 * network as they are. A model trained with per-channel normalisation scales each channel with
 * its own mean and std, says so in its metadata, and holds requests to the same contract. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>

#include "lib/serve/tfs.h"
#include "lib/serve/v2.h"

static struct dlk_serve_sig sig = { "m", { 1, 2, 2 }, 3, 4, 2, NULL, 1.0f / 255, 0.5f, 2.0f, { 0 }, 0, NULL, 0, { 0 }, { 0 }, { { 0 } } };
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

/* a 3x1x2 image model trained with data.images.mean/std: channel c's v is (v / 255 - mean[c]) / std[c] */
static void test_per_channel(void)
{
	struct dlk_serve_sig rgb = sig;
	struct dlk_v2_request r;
	struct dlk_tfs_request t;
	struct dlk_buf b = DLK_BUF_INIT;
	const float m[3] = { 0.485f, 0.456f, 0.406f }, sd[3] = { 0.229f, 0.224f, 0.225f };
	char msg[1024];
	cJSON *j, *p;

	rgb.dims[0] = 3, rgb.dims[1] = 1, rgb.dims[2] = 2;
	rgb.in_size = 6;
	rgb.channels = 3;
	memcpy(rgb.channel_mean, m, sizeof(m));
	memcpy(rgb.channel_std, sd, sizeof(sd));
	dlk_serve_sig_init_lut(&rgb);
	CHECK(rgb.pixels);
	/* two rows of UINT8, JSON numbers: element i of a row is of channel i / 2 (planar, C x H x W) */
	const char *u8 = "{\"inputs\":[{\"name\":\"input\",\"shape\":[2,3,1,2],\"datatype\":\"UINT8\","
	                 "\"data\":[0,255,10,20,30,40,1,2,3,4,5,6]}]}";
	CHECK(v2(&rgb, u8, &r, msg) == 0 && r.rows == 2);
	for (int i = 0; i < 12; i++) {
		static const int raw[12] = { 0, 255, 10, 20, 30, 40, 1, 2, 3, 4, 5, 6 };
		int c = (i % 6) / 2;
		CHECK_MSG(r.x[i] == ((float)raw[i] * rgb.scale - m[c]) / sd[c], "element %d: channel %d's mean and std", i, c);
	}
	dlk_v2_request_release(&r);
	/* FP32 pixels that are not whole take the same formula; binary UINT8 the same table */
	CHECK(v2(&rgb, "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,6],\"datatype\":\"FP32\",\"data\":[0.5,1,2,3,4,200.5]}]}",
	         &r, msg) == 0);
	CHECK(r.x[0] == (0.5f * rgb.scale - m[0]) / sd[0] && r.x[5] == (200.5f * rgb.scale - m[2]) / sd[2]);
	dlk_v2_request_release(&r);
	{
		const char *h = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,6],\"datatype\":\"UINT8\",\"parameters\":{\"binary_data_size\":6}}]}";
		char body[256];
		size_t hl = strlen(h);
		memcpy(body, h, hl);
		memcpy(body + hl, "\0\1\2\3\4\377", 6);
		CHECK(dlk_v2_parse_infer(&rgb, body, hl + 6, (long long)hl, &lim, &r, msg, sizeof(msg)) == 0);
		CHECK(r.x[1] == rgb.lut_c[0][1] && r.x[2] == rgb.lut_c[1][2] && r.x[5] == (255 * rgb.scale - m[2]) / sd[2]);
		dlk_v2_request_release(&r);
	}
	/* TF Serving rows, the same values */
	const char *rows = "{\"instances\":[[[[0,255]],[[10,20]],[[30,40]]]]}";
	CHECK(dlk_tfs_parse_predict(&rgb, rows, strlen(rows), &lim, &t, msg, sizeof(msg)) == 0);
	CHECK(t.rows == 1 && t.x[3] == (20 * rgb.scale - m[1]) / sd[1] && t.x[5] == (40 * rgb.scale - m[2]) / sd[2]);
	dlk_tfs_request_release(&t);
	/* normalised values undeclared: refused, naming the per-channel contract; declared: as they are */
	CHECK(v2(&rgb, "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,6],\"datatype\":\"FP32\",\"data\":[-2.1,-0.5,0.3,1.2,2.2,0]}]}",
	         &r, msg) == -1);
	CHECK_CONTAINS(msg, "is negative and not a whole number");
	CHECK_CONTAINS(msg, "(v * 0.00392156886 - mean[c]) / std[c] with each channel's mean and std");
	CHECK(v2(&rgb, "{\"parameters\":{\"input_form\":\"preprocessed\"},\"inputs\":[{\"name\":\"input\",\"shape\":[1,6],"
	               "\"datatype\":\"FP32\",\"data\":[-2.1,-0.5,0.3,1.2,2.2,0]}]}", &r, msg) == 0);
	CHECK(r.x[0] == -2.1f && r.x[4] == 2.2f);
	dlk_v2_request_release(&r);
	/* the metadata lists each channel's mean and std */
	dlk_v2_write_model_metadata(&rgb, &b);
	j = cJSON_Parse(b.data);
	p = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "inputs"), 0), "parameters");
	CHECK_MSG(cJSON_GetArraySize(cJSON_GetObjectItem(p, "channel_mean")) == 3 &&
	          cJSON_GetArraySize(cJSON_GetObjectItem(p, "channel_std")) == 3, "channel_mean and channel_std: %s", b.data);
	CHECK((float)cJSON_GetArrayItem(cJSON_GetObjectItem(p, "channel_mean"), 1)->valuedouble == m[1] &&
	      (float)cJSON_GetArrayItem(cJSON_GetObjectItem(p, "channel_std"), 2)->valuedouble == sd[2]);
	cJSON_Delete(j);
	dlk_buf_release(&b);
}

int main(void)
{
	dlk_serve_sig_init_lut(&sig);
	CHECK(sig.pixels);
	test_v2();
	test_metadata();
	test_tfs();
	test_per_channel();
	return CHECK_DONE();
}
