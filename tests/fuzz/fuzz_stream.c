/* libFuzzer target: a stream record as the Kafka front end reads it (lib/stream/record.c). The
 * first byte chooses the content-type header (none, JSON, octet-stream, other), the configured
 * format and the dlk-datatype header; the rest is the record's value, decoded for a 2x3x4 model.
 * Whatever decodes is finite; the output record for it, keyed by the value's first bytes (UTF-8
 * or not), is valid JSON. Corpus: tests/fuzz/stream/. */
#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/stream/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const ctypes[4] = { NULL, "application/json", "application/octet-stream; x=y", "text/plain" };
	static const char *const dtypes[8] = { NULL, "FP32", "UINT8", "INT64", "FP64", "uint16", "INT8", "FP16" };
	struct dlk_record_spec spec = { 24, { 2, 3, 4 }, DLK_RECORD_RAW, DLK_DT_FP32, 4096 };
	struct dlk_err err = DLK_ERR_INIT;
	float out[24];

	if (size < 1)
		return 0;
	const char *ct = ctypes[data[0] & 3], *dt = dtypes[(data[0] >> 2) & 7];
	spec.format = data[0] & 0x20 ? DLK_RECORD_JSON : DLK_RECORD_RAW;
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
