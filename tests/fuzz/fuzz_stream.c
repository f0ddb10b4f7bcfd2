/* libFuzzer target: a stream record as the Kafka front end reads it (lib/stream/record.c, over
 * lib/serve's conversions and V2 codec). The first byte chooses the content-type header (none,
 * JSON, octet-stream, text/plain), the dlk-datatype header, the configured format (bit 5 json,
 * bit 7 text) and the model (bit 6: a text model, the byte tokenizer and 24 ids, else a 2x3x4
 * image model); the rest is the record's value, decoded for that model. Whatever decodes is finite; the output record for
 * it, keyed by the value's first bytes (UTF-8 or not), is valid JSON. Corpus: tests/fuzz/stream/. */
#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/bpe.h"
#include "lib/stream/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const ctypes[4] = { NULL, "application/json", "application/octet-stream; x=y", "text/plain" };
	static const char *const dtypes[8] = { NULL, "FP32", "UINT8", "INT64", "FP64", "UINT16", "FP16", "BYTES" };
	static struct dlk_serve_sig sig, text;
	struct dlk_record_spec spec;
	struct dlk_err err = DLK_ERR_INIT;
	float out[24];

	if (!sig.in_size) {
		sig.name = "m";
		sig.dims[0] = 2, sig.dims[1] = 3, sig.dims[2] = 4;
		sig.rank = 3;
		sig.in_size = 24;
		sig.n_classes = 24;
		sig.scale = 1.0f / 255, sig.mean = 0.5f, sig.std = 0.25f;
		dlk_serve_sig_init_lut(&sig);
		text = sig;
		text.rank = 1, text.dims[0] = text.dims[1] = 1, text.dims[2] = 24;
		text.scale = 1, text.mean = 0, text.std = 1;
		text.tokenizer = dlk_tokenizer_byte();
		dlk_serve_sig_init_lut(&text);
	}
	if (size < 1)
		return 0;
	memset(&spec, 0, sizeof(spec));
	spec.sig = data[0] & 0x40 ? &text : &sig;
	spec.dtype = DLK_DT_FP32;
	spec.max_bytes = 4096;
	spec.lim.max_depth = 32;
	const char *ct = ctypes[data[0] & 3], *dt = dtypes[(data[0] >> 2) & 7];
	spec.format = data[0] & 0x80 ? DLK_RECORD_TEXT : data[0] & 0x20 ? DLK_RECORD_JSON : DLK_RECORD_RAW;
	if (dlk_record_decode(&spec, data + 1, size - 1, ct, ct ? strlen(ct) : 0, dt, dt ? strlen(dt) : 0, out, &err))
		return 0;
	for (int i = 0; i < 24; i++)
		if (!isfinite(out[i]))
			abort();
	struct dlk_record_origin o = { "in", 1, 2, data + 1, size - 1 < 8 ? size - 1 : 8 };
	struct dlk_buf b = DLK_BUF_INIT;
	dlk_record_encode(&b, out, 24, NULL, "sha256:00", &o);
	cJSON *j = cJSON_Parse(b.data);
	if (!j)
		abort();
	cJSON_Delete(j);
	dlk_buf_release(&b);
	return 0;
}
