/* The KServe V2 / Open Inference Protocol REST codec, with Triton's binary tensor data and
 * classification extensions (kserve docs/predict-api/v2/required_api.md; triton
 * docs/protocol/extension_binary_data.md and extension_classification.md).
 *
 * Request:  {id?, parameters?: {binary_data_output?, input_form?}, inputs: [{name, shape, datatype,
 *            parameters?: {binary_data_size?, input_form?}, data?}], outputs?: [{name, parameters?:
 *            {binary_data?, classification?}}]}, optionally followed by the inputs' raw bytes
 *            (little-endian, row-major) when the Inference-Header-Content-Length header gives the
 *            JSON's length.
 * Response: {model_name, model_version, id?, outputs: [{name, datatype, shape, data |
 *            parameters: {binary_data_size}}]} + the binary outputs in order.
 * A model served by dlk has one input, "input" ([-1, C, H, W] or [-1, C*H*W], any numeric
 * datatype, raw values as the training data holds them unless input_form says "preprocessed"; an
 * undeclared request that contradicts the contract is refused: tensor.h) and two FP32 outputs [-1, classes]:
 * "probabilities" and "logits". Classification turns an output into BYTES
 * "value:index[:label]", best first, per row. */
#ifndef DLK_SERVE_V2_H
#define DLK_SERVE_V2_H

#include <stddef.h>

#include "lib/serve/jsondoc.h"
#include "lib/serve/tensor.h"
#include "lib/util/buf.h"

#define DLK_V2_VERSION "1" /* every model is served as version 1 */

struct dlk_v2_output {
	int which;            /* index of the model output (dlk_serve_output_name) */
	int binary;           /* answer as binary data */
	int classification;   /* top-N classes as BYTES; 0 = the tensor itself */
};

struct dlk_v2_request {
	char *id;             /* echoed; NULL when the request had none */
	size_t id_len;
	int n_outputs;        /* what to answer, in this order */
	struct dlk_v2_output outputs[DLK_SERVE_N_OUTPUTS];
	float *x;             /* rows * in_size network inputs, owned */
	long long rows;
};
#define DLK_V2_REQUEST_INIT { NULL, 0, 0, { { 0, 0, 0 } }, NULL, 0 }

/* Decodes an inference request for the model of sig. header_len is the value of the
 * Inference-Header-Content-Length header (the JSON's length; the binary tensors follow), or -1
 * when the header is absent (the whole body is JSON). Returns 0, or -1
 * with a message for the client (a 400): what was wrong and what was expected, naming the input
 * or output ("input 'input': datatype BYTES is not a number type ..."). */
int dlk_v2_parse_infer(const struct dlk_serve_sig *sig, const char *body, size_t len, long long header_len,
                       const struct jd_limits *lim, struct dlk_v2_request *req, char *msg, size_t msg_len);
void dlk_v2_request_release(struct dlk_v2_request *req);

/* The response to req, from the model's logits [rows, n_classes]. *json_len is the JSON part's
 * length when binary outputs follow it (the Inference-Header-Content-Length to send), else 0. */
void dlk_v2_write_infer(const struct dlk_serve_sig *sig, const struct dlk_v2_request *req, const float *logits,
                        struct dlk_buf *out, size_t *json_len);

/* GET /v2/models/{m}: name, versions, platform, inputs, outputs. */
void dlk_v2_write_model_metadata(const struct dlk_serve_sig *sig, struct dlk_buf *out);
/* GET /v2: name, version, extensions. */
void dlk_v2_write_server_metadata(const char *version, struct dlk_buf *out);
/* {"error": msg} */
void dlk_v2_write_error(const char *msg, struct dlk_buf *out);

#endif
