/* libFuzzer target: the request parsers of dlk serve, for a model of input [1, 4, 4] or [784]
 * (flat) with 3 classes. The first byte picks the parser and the model:
 *   bit 0-1: 0 KServe V2 JSON, 1 KServe V2 with binary tensors (the next 4 bytes, little-endian,
 *            are the Inference-Header-Content-Length), 2 TF Serving :predict, 3 jd_parse alone
 *   bit 2:   the flat model
 *   bit 3:   a text model (the byte tokenizer, 16 ids a row): BYTES inputs are texts
 * and a successful decode is answered (responses with every output, binary and classification),
 * so the encoders run on what the decoders accept. Corpus: tests/fuzz/serve/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/bpe.h"
#include "lib/serve/jsondoc.h"
#include "lib/serve/tfs.h"
#include "lib/serve/v2.h"

static char *const labels[3] = { "zero", "one:1", "" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_serve_sig sig = { "fuzz", { 1, 4, 4 }, 3, 16, 3, labels, 1.0f / 255, 0.5f, 2.0f, { 0 }, 0, NULL, 0, { 0 }, { 0 }, { { 0 } } };
	struct jd_limits lim = { 16, 1 << 20 };
	char msg[1024];
	struct dlk_buf out = DLK_BUF_INIT;

	if (size < 1)
		return 0;
	int mode = data[0] & 3;
	if (data[0] & 4) {
		sig.dims[0] = sig.dims[1] = 1;
		sig.dims[2] = 784;
		sig.rank = 1;
		sig.in_size = 784;
		sig.classes = NULL;
	}
	if (data[0] & 8) {
		static struct dlk_tokenizer *tok;
		if (!tok)
			tok = dlk_tokenizer_byte();
		sig.dims[0] = sig.dims[1] = 1;
		sig.dims[2] = 16;
		sig.rank = 1;
		sig.in_size = 16;
		sig.scale = 1, sig.mean = 0, sig.std = 1;
		sig.tokenizer = tok;
	}
	dlk_serve_sig_init_lut(&sig);
	data++, size--;
	if (mode == 3) {
		struct jd_doc doc;
		if (!jd_parse(&doc, (const char *)data, size, &lim, msg, sizeof(msg))) {
			long long dims[8];
			int rank;
			if (doc.root->type == JD_ARRAY)
				jd_shape(doc.root, dims, 8, &rank);
			jd_release(&doc);
		}
		return 0;
	}
	if (mode == 2) {
		struct dlk_tfs_request req;
		if (!dlk_tfs_parse_predict(&sig, (const char *)data, size, &lim, &req, msg, sizeof(msg))) {
			float *logits = calloc((size_t)req.rows * 3, sizeof(float));
			for (long long i = 0; i < req.rows * 3; i++)
				logits[i] = req.x[(size_t)i % ((size_t)req.rows * sig.in_size)];
			dlk_tfs_write_predict(&sig, &req, logits, &out);
			free(logits);
			dlk_tfs_request_release(&req);
		}
		dlk_buf_release(&out);
		return 0;
	}
	long long header_len = -1;
	if (mode == 1) {
		if (size < 4)
			return 0;
		uint32_t h;
		memcpy(&h, data, 4);
		header_len = (long long)h;
		data += 4, size -= 4;
	}
	struct dlk_v2_request req;
	if (!dlk_v2_parse_infer(&sig, (const char *)data, size, header_len, &lim, &req, msg, sizeof(msg))) {
		size_t json_len;
		float *logits = calloc((size_t)req.rows * 3, sizeof(float));
		for (long long i = 0; i < req.rows * 3; i++)
			logits[i] = req.x[(size_t)i % ((size_t)req.rows * sig.in_size)];
		dlk_v2_write_infer(&sig, &req, logits, &out, &json_len);
		free(logits);
		dlk_v2_request_release(&req);
	}
	dlk_buf_release(&out);
	return 0;
}
