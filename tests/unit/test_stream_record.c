/* Stream records: raw, V2 JSON and text decoding, the errors a dead letter carries, the output record,
 * the kafka:// URL, and the Prometheus text of the stream's metrics. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/data/bpe.h"
#include "lib/stream/metrics.h"
#include "lib/stream/record.h"
#include "lib/stream/stream.h"
#include "lib/util/mem.h"

static struct dlk_serve_sig sig;
static struct dlk_record_spec spec4;

static int dec(const struct dlk_record_spec *s, const char *payload, size_t len, const char *ct,
               const char *dt, float *out, struct dlk_err *err)
{
	dlk_err_clear(err);
	return dlk_record_decode(s, payload, len, ct, ct ? strlen(ct) : 0, dt, dt ? strlen(dt) : 0, out, err);
}

#define JS(s) s, strlen(s)

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	float out[4];
	float f[4] = { 1.5f, -2, 0.25f, 3e-8f };
	unsigned char u8[4] = { 0, 1, 128, 255 };
	int16_t i16[4] = { -32768, 0, 7, 32767 };

	/* a 1x2x2 model whose training scaled raw values v to (v * 0.5 - 1) / 2 */
	sig.name = "m";
	sig.dims[0] = 1, sig.dims[1] = 2, sig.dims[2] = 2;
	sig.rank = 3;
	sig.in_size = 4;
	sig.n_classes = 3;
	sig.scale = 0.5f, sig.mean = 1, sig.std = 2;
	dlk_serve_sig_init_lut(&sig);
	spec4.sig = &sig;
	spec4.format = DLK_RECORD_RAW;
	spec4.dtype = DLK_DT_FP32;
	spec4.max_bytes = 1 << 20;
	spec4.lim.max_depth = 32;

	/* raw, scaled as training scaled */
	CHECK(dec(&spec4, (const char *)f, sizeof(f), NULL, NULL, out, &err) == 0 && out[0] == (1.5f * 0.5f - 1) / 2 &&
	      out[1] == (-2 * 0.5f - 1) / 2);
	CHECK(dec(&spec4, (const char *)f, sizeof(f), "application/octet-stream", NULL, out, &err) == 0);
	CHECK(dec(&spec4, (const char *)u8, 4, NULL, "UINT8", out, &err) == 0 && out[3] == sig.lut[255] &&
	      out[2] == (128 * 0.5f - 1) / 2);
	CHECK(dec(&spec4, (const char *)i16, 8, NULL, "INT16", out, &err) == 0 && out[3] == (32767 * 0.5f - 1) / 2);
	CHECK(dec(&spec4, (const char *)f, 15, NULL, NULL, out, &err) == -1);
	CHECK_STR(err.msg, "raw: 15 bytes, expected 16 (4 FP32 values for input [-1,1,2,2])");
	CHECK(dec(&spec4, (const char *)f, 16, NULL, "BYTES", out, &err) == -1);
	CHECK_CONTAINS(err.msg, "dlk-datatype 'BYTES': expected a number type");
	CHECK(dec(&spec4, (const char *)f, 16, NULL, "fp32", out, &err) == -1); /* names are case-sensitive, as in V2 */
	float bad[4] = { 0, 0, 0, 0 };
	uint32_t nan = 0x7fc00000;
	memcpy(&bad[2], &nan, 4);
	CHECK(dec(&spec4, (const char *)bad, 16, NULL, NULL, out, &err) == -1);
	CHECK_STR(err.msg, "raw: element 2 (FP32) is not a finite number");
	CHECK(dec(&spec4, NULL, 0, NULL, NULL, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "tombstone");
	CHECK(dec(&spec4, "x", 1, "text/csv; charset=utf-8", NULL, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "content-type 'text/csv; charset=utf-8': expected application/octet-stream");
	CHECK(dec(&spec4, "\x01\x02", 2, "\x01\xff", NULL, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "content-type '\\x01\\xff'");
	struct dlk_record_spec small = spec4;
	small.max_bytes = 8;
	CHECK(dec(&small, (const char *)f, 16, NULL, NULL, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "larger than the 8 a record may have");

	/* V2 JSON requests, read by the HTTP front end's codec: one row, flat or nested */
	const char *req = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4.5]}]}";
	CHECK(dec(&spec4, JS(req), "application/json", NULL, out, &err) == 0 && out[3] == (4.5f * 0.5f - 1) / 2);
	const char *nested = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,1,2,2],\"datatype\":\"UINT8\","
	                     "\"data\":[[[[1,2],[3,255]]]]}]}";
	struct dlk_record_spec js = spec4;
	js.format = DLK_RECORD_JSON;
	CHECK(dec(&js, JS(nested), NULL, NULL, out, &err) == 0 && out[3] == sig.lut[255]);
	CHECK(dec(&spec4, JS(nested), NULL, NULL, out, &err) == -1); /* raw by configuration */
	CHECK_CONTAINS(err.msg, "raw: ");
	CHECK(dec(&js, JS("{\"inputs\":[{\"name\":\"input\",\"shape\":[2,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5,6,7,8]}]}"),
	          NULL, NULL, out, &err) == -1);
	CHECK_STR(err.msg, "json: 2 rows: a record carries one example");
	CHECK(dec(&js, JS("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"UINT8\",\"data\":[1,2,3,256]}]}"),
	          NULL, NULL, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "json: ");
	CHECK(dec(&js, JS("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,5],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5]}]}"),
	          NULL, NULL, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "json: ");
	CHECK(dec(&js, JS("{\"inputs\":[]}"), NULL, NULL, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "json: ");
	CHECK(dec(&js, JS("{\"shape\":[4],"), NULL, NULL, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "json: ");
	{
		/* nesting beyond the limit is refused, not recursed into */
		struct dlk_buf b = DLK_BUF_INIT;
		dlk_buf_adds(&b, "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":");
		for (int i = 0; i < 40; i++)
			dlk_buf_addc(&b, '[');
		dlk_buf_adds(&b, "1");
		for (int i = 0; i < 40; i++)
			dlk_buf_addc(&b, ']');
		dlk_buf_adds(&b, "}]}");
		CHECK(dec(&js, b.data, b.len, NULL, NULL, out, &err) == -1);
		CHECK_CONTAINS(err.msg, "deeper than 32");
		dlk_buf_release(&b);
	}

	/* a text model's records: the text itself (text/plain, or format text), tokenized as the
	 * HTTP routes and training tokenize (the byte tokenizer: id 1 + byte, pad 0); a V2 BYTES
	 * request; its ids as raw bytes. A model without a tokenizer, and bytes that are not UTF-8,
	 * go to the dead letters with the reason. */
	CHECK(dec(&spec4, "hi", 2, "text/plain", NULL, out, &err) == -1);
	CHECK_STR(err.msg, "text: the model 'm' takes no texts (it has no tokenizer): send its input as raw tensor bytes or a V2 request");
	{
		struct dlk_serve_sig ts = sig;
		struct dlk_record_spec tx = spec4;
		float ids[4] = { 5, 6, 0, 0 };
		ts.scale = 1, ts.mean = 0, ts.std = 1;
		ts.rank = 1, ts.dims[0] = ts.dims[1] = 1, ts.dims[2] = 4;
		ts.tokenizer = dlk_tokenizer_byte();
		dlk_serve_sig_init_lut(&ts);
		tx.sig = &ts;
		CHECK(dec(&tx, "hi", 2, "text/plain; charset=utf-8", NULL, out, &err) == 0 && out[0] == 1 + 'h' &&
		      out[1] == 1 + 'i' && out[2] == 0 && out[3] == 0);
		tx.format = DLK_RECORD_TEXT;
		CHECK(dec(&tx, "hello", 5, NULL, NULL, out, &err) == 0 && out[0] == 1 + 'h' && out[3] == 1 + 'l');
		CHECK(dec(&tx, "", 0, NULL, NULL, out, &err) == 0 && out[0] == 0);
		CHECK(dec(&tx, "a\xff", 2, NULL, NULL, out, &err) == -1);
		CHECK_STR(err.msg, "text: 2 bytes that are not UTF-8 text (the record's value is one text, which the server tokenizes)");
		CHECK(dec(&tx, (const char *)ids, sizeof(ids), "application/octet-stream", NULL, out, &err) == 0 &&
		      out[0] == 5 && out[1] == 6);
		CHECK(dec(&tx, JS("{\"inputs\":[{\"name\":\"input\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"ab\"]}]}"),
		          "application/json", NULL, out, &err) == 0 && out[0] == 1 + 'a' && out[1] == 1 + 'b' && out[2] == 0);
		CHECK(dec(&tx, JS("{\"inputs\":[{\"name\":\"input\",\"shape\":[2],\"datatype\":\"BYTES\",\"data\":[\"a\",\"b\"]}]}"),
		          "application/json", NULL, out, &err) == -1);
		CHECK_STR(err.msg, "json: 2 rows: a record carries one example");
		dlk_tokenizer_free((struct dlk_tokenizer *)ts.tokenizer);
	}
	CHECK(dlk_record_format_parse("text") == DLK_RECORD_TEXT && !strcmp(dlk_record_format_name(DLK_RECORD_TEXT), "text"));
	CHECK(dlk_record_format_parse("csv") == -1);

	/* the output record */
	{
		float logits[3] = { 1, 3, 2 };
		char *names[3] = { "a", "b\"q", "c" };
		struct dlk_record_origin o = { "in", 2, 1234, "key-1", 5 };
		struct dlk_buf b = DLK_BUF_INIT;
		dlk_record_encode(&b, logits, 3, names, "sha256:ab", &o);
		cJSON *j = cJSON_Parse(b.data);
		CHECK_MSG(j != NULL, "the output record is JSON: %s", b.data);
		CHECK(cJSON_GetObjectItem(j, "class")->valueint == 1);
		CHECK_STR(cJSON_GetObjectItem(j, "label")->valuestring, "b\"q");
		CHECK_NEAR(cJSON_GetObjectItem(j, "score")->valuedouble, 0.66524096, 1e-6);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "scores")) == 3);
		CHECK_STR(cJSON_GetObjectItem(j, "model")->valuestring, "sha256:ab");
		cJSON *in = cJSON_GetObjectItem(j, "input");
		CHECK(cJSON_GetObjectItem(in, "partition")->valueint == 2 &&
		      cJSON_GetObjectItem(in, "offset")->valuedouble == 1234);
		CHECK_STR(cJSON_GetObjectItem(in, "key")->valuestring, "key-1");
		cJSON_Delete(j);
		dlk_buf_reset(&b);
		o.key = "\xff\x00\x01";
		o.key_len = 3;
		dlk_record_encode(&b, logits, 3, NULL, "sha256:ab", &o);
		CHECK_CONTAINS(b.data, "\"key_base64\":\"/wAB\"");
		CHECK(!strstr(b.data, "label"));
		dlk_buf_reset(&b);
		o.key = NULL;
		dlk_record_encode(&b, logits, 3, NULL, "sha256:ab", &o);
		CHECK_CONTAINS(b.data, "\"key\":null");
		dlk_buf_release(&b);
	}

	/* kafka:// URLs */
	{
		char *br, *t;
		CHECK(dlk_stream_parse_url("kafka://h1:9092,h2:9093/images.v1", &br, &t, &err) == 0);
		CHECK_STR(br, "h1:9092,h2:9093");
		CHECK_STR(t, "images.v1");
		free(br), free(t);
		CHECK(dlk_stream_parse_url("http://h/t", &br, &t, &err) == -1 && err.code == DLK_EXIT_USAGE);
		CHECK(dlk_stream_parse_url("kafka://h:1/", &br, &t, &err) == -1);
		CHECK(dlk_stream_parse_url("kafka:///t", &br, &t, &err) == -1);
		CHECK(dlk_stream_parse_url("kafka://h:1/a/b", &br, &t, &err) == -1);
		CHECK(dlk_stream_parse_url("kafka://h:1/a b", &br, &t, &err) == -1);
		CHECK_CONTAINS(err.msg, "letters, digits");
	}

	/* metrics: cumulative buckets, escaped labels */
	{
		struct dlk_stream_metrics m;
		struct dlk_buf b = DLK_BUF_INIT;
		dlk_stream_metrics_init(&m, "in\"x");
		dlk_hist_observe(&m.round, 3);
		dlk_hist_observe(&m.round, 64);
		dlk_hist_observe(&m.round, 100000);
		m.records_in = 7;
		m.lag[0].partition = 3, m.lag[0].lag = 42, m.n_lag = 1;
		dlk_stream_metrics_write(&m, &b);
		CHECK_CONTAINS(b.data, "dlk_stream_records_in_total{topic=\"in\\\"x\"} 7\n");
		CHECK_CONTAINS(b.data, "dlk_stream_round_records_bucket{topic=\"in\\\"x\",le=\"4\"} 1\n");
		CHECK_CONTAINS(b.data, "dlk_stream_round_records_bucket{topic=\"in\\\"x\",le=\"64\"} 2\n");
		CHECK_CONTAINS(b.data, "dlk_stream_round_records_bucket{topic=\"in\\\"x\",le=\"+Inf\"} 3\n");
		CHECK_CONTAINS(b.data, "dlk_stream_round_records_sum{topic=\"in\\\"x\"} 100067.000000\n");
		CHECK_CONTAINS(b.data, "dlk_stream_consumer_lag{topic=\"in\\\"x\",partition=\"3\"} 42\n");
		CHECK_CONTAINS(b.data, "# TYPE dlk_stream_latency_seconds histogram\n");
		dlk_buf_release(&b);
		dlk_stream_metrics_release(&m);
	}
	return CHECK_DONE();
}
