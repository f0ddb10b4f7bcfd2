/* ONNX export of a model bundle: the network as an ONNX graph (IR version 7, opset 13: what
 * ONNX Runtime, Triton's onnxruntime backend and the onnx checker all accept), written with the
 * protobuf writer of pbwrite.h.
 *
 * The graph's contract is the one `dlk serve` keeps:
 *   input  "input"          FLOAT [batch, C, H, W] (or [batch, F] for a flat model); with
 *                           DLK_INPUT_RAW the raw values training read (pixels 0..255),
 *                           which the graph's first nodes scale as training did,
 *                           (v * scale - mean) / std; with DLK_INPUT_PREPROCESSED the
 *                           network's input itself (no scaling nodes);
 *   outputs "probabilities" FLOAT [batch, classes] (softmax of the logits) and
 *           "logits"        FLOAT [batch, classes].
 * Initializers keep the bundle's PyTorch names (layers.<i>.weight, layers.<i>.bias). The
 * model's metadata_props carry the producer's and the bundle's facts: dlk.version,
 * dlk.bundle.weights_sha256, dlk.bundle.name, dlk.input_form, dlk.input.scale/mean/std,
 * dlk.classes (a JSON array) and dlk.test_accuracy when recorded.
 *
 * Each layer kind is mapped by one function in a table in onnx.c; a kind without one is
 * refused with its model.layers[i] named. */
#ifndef DLK_EXPORT_ONNX_H
#define DLK_EXPORT_ONNX_H

#include "lib/serve/tensor.h"
#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

#define DLK_ONNX_OPSET 13
#define DLK_ONNX_IR_VERSION 7
/* protobuf's own limit on a message: larger models need ONNX's external data (not written) */
#define DLK_ONNX_MAX_BYTES ((size_t)2 << 30)

/* Appends the ONNX model of the read bundle b to out. -1 with err (DLK_EXIT_CONFIG) when the
 * bundle's model cannot be expressed: a layer kind without a mapping (naming model.layers[i]),
 * weights that do not match the architecture, a model past DLK_ONNX_MAX_BYTES. */
int dlk_onnx_export(const struct dlk_bundle *b, enum dlk_input_form form, struct dlk_buf *out,
                    struct dlk_err *err);

#endif
