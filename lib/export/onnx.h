/* ONNX export of a model bundle: the network as an ONNX graph (IR version 8, opset 17: what
 * ONNX Runtime, Triton's onnxruntime backend and the onnx checker all accept; 17 is the first
 * with LayerNormalization), written with the protobuf writer of pbwrite.h.
 *
 * The graph's contract is the one `dlk serve` keeps:
 *   input  "input"          FLOAT [batch, C, H, W] (or [batch, F] for a flat model); with
 *                           DLK_INPUT_RAW the raw values training read (pixels 0..255),
 *                           which the graph's first nodes scale as training did,
 *                           (v * scale - mean) / std; with DLK_INPUT_PREPROCESSED the
 *                           network's input itself (no scaling nodes). A text model (see
 *                           dlk_onnx_io_of) takes INT64 [batch, T] token ids instead.
 *   outputs "probabilities" FLOAT [batch, classes] (softmax of the logits) and
 *           "logits"        FLOAT [batch, classes]; a language model's [batch, T, vocab]; a
 *                           regression's "output" [batch, n], an image model's "output"
 *                           [batch, C, H, W] (no probabilities); multilabel's probabilities
 *                           are the sigmoid of each logit.
 * Every layer kind has a mapping and a graph model (layers naming their inputs, repeated
 * blocks) becomes the same DAG of nodes. Initializers keep the bundle's PyTorch names
 * (layers.<i>.weight, layers.<i>.bias, layers.<i>.running_mean, ...). The model's
 * metadata_props carry the producer's and the bundle's facts: dlk.version,
 * dlk.bundle.weights_sha256, dlk.bundle.name, dlk.input_form, dlk.input.scale/mean/std,
 * dlk.classes (a JSON array) and dlk.test_accuracy when recorded.
 *
 * Each layer kind is mapped by one function in a table in onnx.c. */
#ifndef DLK_EXPORT_ONNX_H
#define DLK_EXPORT_ONNX_H

#include "lib/serve/tensor.h"
#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

#define DLK_ONNX_OPSET 17
#define DLK_ONNX_IR_VERSION 8
/* protobuf's own limit on a message: larger models need ONNX's external data */
#define DLK_ONNX_MAX_BYTES ((size_t)2 << 30)

/* ONNX's external data: the model's large initializers in a file beside it. With it, every float
 * initializer of DLK_ONNX_EXTERNAL_MIN bytes or more goes to *data, little-endian, at an offset
 * that is a multiple of DLK_ONNX_EXTERNAL_ALIGN (the page: ONNX Runtime maps it), and the model
 * names `location` (the file's name relative to the model's folder), the offset and the length
 * (data_location EXTERNAL), as onnx.save_model(save_as_external_data=True) writes it. It is used
 * when `always` is set or when the model would otherwise pass max_inline bytes (0:
 * DLK_ONNX_MAX_BYTES); `used` says whether it was. */
#define DLK_ONNX_EXTERNAL_MIN 1024
#define DLK_ONNX_EXTERNAL_ALIGN 4096
struct dlk_onnx_external {
	const char *location;
	struct dlk_buf *data;
	int always;
	size_t max_inline;
	int used;
};

/* What the graph of bundle b takes and gives: ids = 1 when its input is int64 token ids (a model
 * with a tokenizer or an embedding reading its input: never scaled), else float; output the name
 * of its main output ("logits": classification, multilabel, lm; "output": regression, image) and
 * probabilities "probabilities" (softmax, or sigmoid for multilabel) or NULL when there is none. */
struct dlk_onnx_io {
	int ids;
	const char *output, *probabilities;
};
void dlk_onnx_io_of(const struct dlk_bundle *b, struct dlk_onnx_io *io);

/* Appends the ONNX model of the read bundle b to out (and with ext, what it decides to keep out
 * of the model to ext->data). -1 with err (DLK_EXIT_CONFIG) when the bundle's model cannot be
 * expressed: a layer kind without a mapping (naming model.layers[i]), weights that do not match
 * the architecture, a model past DLK_ONNX_MAX_BYTES without ext. */
int dlk_onnx_export(const struct dlk_bundle *b, enum dlk_input_form form, struct dlk_onnx_external *ext,
                    struct dlk_buf *out, struct dlk_err *err);

#endif
