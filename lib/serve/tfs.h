/* The TensorFlow Serving REST codec, v1 (tensorflow/serving g3doc/api_rest.md): predict in row
 * ("instances") or columnar ("inputs") form, model status and metadata.
 *
 *   {"instances": [row, ...]}            a row is the model input of one sample, nested as the
 *                                        model declares it ([C][H][W]) or flat, or {"input": row}
 *   {"inputs": tensor | {"input": tensor}} the whole batch, batch dimension first
 * Rows answer {"predictions": [{"probabilities": [...], "logits": [...]}, ...]} (the model has two
 * named outputs, so each prediction is an object, as TF Serving answers for several outputs);
 * columns answer {"outputs": {"probabilities": [[...]], "logits": [[...]]}}.
 * A text model (sig->tokenizer) takes texts in either form, one string a row ("text", ["text"],
 * {"b64": base64 of the text's bytes} or, as instances, {"input": any of those}), tokenized as training did (dlk_text_encode_row); its token
 * ids as numbers are the preprocessed form. */
#ifndef DLK_SERVE_TFS_H
#define DLK_SERVE_TFS_H

#include <stddef.h>

#include "lib/serve/jsondoc.h"
#include "lib/serve/tensor.h"
#include "lib/util/buf.h"

struct dlk_tfs_request {
	int columnar;      /* "inputs" rather than "instances" */
	float *x;          /* rows * in_size network inputs, owned */
	long long rows;
};
#define DLK_TFS_REQUEST_INIT { 0, NULL, 0 }

/* Decodes a :predict body. Returns 0, or -1 with a message for the client (a 400). */
int dlk_tfs_parse_predict(const struct dlk_serve_sig *sig, const char *body, size_t len, const struct jd_limits *lim,
                          struct dlk_tfs_request *req, char *msg, size_t msg_len);
void dlk_tfs_request_release(struct dlk_tfs_request *req);
void dlk_tfs_write_predict(const struct dlk_serve_sig *sig, const struct dlk_tfs_request *req, const float *logits,
                           struct dlk_buf *out);

/* GET /v1/models/{m}: TF Serving's model_version_status (state LOADING, AVAILABLE or UNLOADING),
 * and KServe V1's name and ready in the same object. */
void dlk_tfs_write_status(const char *name, const char *state, int ready, struct dlk_buf *out);
/* GET /v1/models/{m}/metadata: model_spec and the serving_default signature_def. */
void dlk_tfs_write_metadata(const struct dlk_serve_sig *sig, struct dlk_buf *out);

#endif
