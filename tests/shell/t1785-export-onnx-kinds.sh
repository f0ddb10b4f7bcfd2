#!/bin/sh
# dlk export --onnx of every layer kind and of graph models: the exported model passes the real
# onnx checker (full_check) and ONNX Runtime (the registry's wheel, .deps/frameworks) reproduces
# dlk's own forward pass of the bundle (tests/tools/onnx_case, evaluation mode) on the same
# inputs, every output within 1e-4 absolute + 1e-4 relative (measured: below 1e-6). The bundles
# hold random weights (PyTorch's initialisation, normalisation weights and batch norm's running
# statistics moved off their constants): what is checked is the graph's maths, which random
# weights exercise as well as trained ones, with no training in the test. Models:
#   ResNet-style: strided conv, batch norm (running statistics), residual blocks (model.blocks,
#     repeat), a grouped conv, avgpool with padding, global average pooling, batch norm over features;
#   U-Net-like (task image): maxpool down, convtranspose2d up with output_padding, a concat skip,
#     bilinear and nearest upsampling, gelu (erf form);
#   flat: batch norm, layernorm and softmax over features, a concat of two flat branches, reshape
#     to an image, a conv on it;
#   text classifier: embedding with positions over int64 token ids, attention (rotary, pad_id,
#     not causal) with a residual add, a causal attention with pad_id (one sample all padding: its
#     rows attend to nothing and give 0, as in dlk), per-position dense, reshape and pooling;
#   the GPT example as it ships (examples/gpt/dlk.yaml: 4 blocks, tied head, tanh gelu, T = 128).
. "$(dirname "$0")/../lib.sh"
PY=$TEST_ROOT/.deps/frameworks/bin/python
CHECK=$TEST_ROOT/tests/export/onnx_kinds.py
CASE=$TEST_ROOT/${BUILD:-build}/tests/tools/onnx_case
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks: onnx, onnxruntime)"
[ -x "$CASE" ] || test_missing "tests/tools/onnx_case (make test builds it)"

# model NAME INPUT LAYERS [MODEL-KEYS]: a project file of that model (its data is never read)
model() {
	cat >"$1.yaml" <<EOT
name: $1
data: {format: csv, train: {source: train.csv}}
model:
${4:-}
  input: $2
$3
EOT
}

# inputs NAME N PYTHON-EXPR: N samples of the network's input (float32), from numpy's rng r
inputs() {
	"$PY" -c "
import numpy as np
r = np.random.default_rng(7)
x = $3
x.astype(np.float32).tofile('$1.in')"
}

# check NAME N [onnx_kinds.py options]: dlk's forward pass and the export, then ONNX Runtime
check() {
	name=$1 n=$2
	shift 2
	"$CASE" "$name.yaml" 5 "$name.dlk" "$name.in" "$n" "$name.out" >case.out &&
	"$DLK" export "$name.dlk" --onnx "$name.onnx" --input-form preprocessed -o json >"$name.json" &&
	"$PY" "$CHECK" "$name.onnx" "$name.in" "$n" "$name.out" "$@" >check.out &&
	cat check.out &&
	grep_q "^agree $n/$n " check.out
}

test_expect_success 'ResNet-style: batch norm, residual blocks, grouped and strided conv, avg and global pooling' '
	model res "[3, 12, 12]" "  blocks:
    basic:
      - conv2d: {filters: 8, kernel: 3, padding: 1}
      - batchnorm
      - relu
      - conv2d: {filters: 8, kernel: 3, padding: 1, groups: 2}
      - batchnorm: {name: r}
      - add: {inputs: [input, r]}
      - relu
  layers:
    - conv2d: {filters: 8, kernel: 3, stride: 2, padding: 1}
    - batchnorm
    - relu
    - {block: basic, repeat: 2}
    - avgpool: {size: 2, stride: 1, padding: 1}
    - globalavgpool
    - batchnorm
    - dense: {units: 5}" &&
	inputs res 8 "r.standard_normal((8, 3, 12, 12))" &&
	check res 8 &&
	jq -e ".inputType == \"float\" and .outputs == [\"probabilities\", \"logits\"] and .opset == 17" res.json &&
	"$PY" -c "
import onnx
m = onnx.load(\"res.onnx\")
ops = [n.op_type for n in m.graph.node]
assert ops.count(\"BatchNormalization\") == 6 and ops.count(\"Add\") == 2 and \"GlobalAveragePool\" in ops, ops
names = {i.name for i in m.graph.initializer}
assert {\"layers.1.running_mean\", \"layers.1.running_var\", \"layers.1.weight\"} <= names, names
"
'

test_expect_success 'U-Net-like (task image): convtranspose2d, concat skip, bilinear and nearest upsampling' '
	model unet "[1, 16, 16]" "  layers:
    - conv2d: {filters: 4, kernel: 3, padding: 1, name: e1}
    - relu
    - maxpool: {size: 2}
    - conv2d: {filters: 8, kernel: 3, padding: 1}
    - gelu
    - convtranspose2d: {filters: 4, kernel: 3, stride: 2, padding: 1, output_padding: 1, name: up}
    - concat: {inputs: [e1, up]}
    - conv2d: {filters: 4, kernel: 1}
    - upsample: {scale: 2, mode: bilinear}
    - avgpool: {size: 2}
    - upsample: {scale: 2}
    - maxpool: {size: 2}
    - tanh
    - conv2d: {filters: 1, kernel: 3, padding: 1}" "  task: image" &&
	sed -i "s/format: csv,/format: csv, csv: {targets: 256},/" unet.yaml &&
	inputs unet 6 "r.standard_normal((6, 1, 16, 16))" &&
	check unet 6 --output output &&
	jq -e ".outputs == [\"output\"]" unet.json
'

test_expect_success 'flat: batch norm, layernorm, softmax over features, a concat of two branches, reshape' '
	model flat "[20]" "  layers:
    - dense: {units: 16}
    - batchnorm
    - layernorm: {name: n}
    - dense: {units: 8, name: a}
    - softmax: {inputs: [n]}
    - dense: {units: 8, name: b}
    - concat: {inputs: [a, b]}
    - reshape: [4, 2, 2]
    - conv2d: {filters: 3, kernel: 2}
    - flatten
    - sigmoid
    - dense: {units: 3}" &&
	inputs flat 8 "r.standard_normal((8, 20))" &&
	check flat 8
'

test_expect_success 'text classifier: int64 token ids, embedding with positions, attention (rotary, causal, pad_id)' '
	model text "[12]" "  layers:
    - embedding: {vocab: 50, dim: 16, positions: 12, name: e}
    - layernorm
    - attention: {heads: 2, causal: false, rotary: true, pad_id: 0, name: att}
    - add: {inputs: [e, att]}
    - attention: {heads: 4, causal: true, pad_id: 0}
    - dense: {units: 8}
    - gelu: {approximate: tanh}
    - reshape: [12, 8, 1]
    - globalavgpool
    - dropout: {rate: 0.1}
    - dense: {units: 4}" &&
	inputs text 6 "r.integers(1, 50, (6, 12)); x[1, :3] = 0; x[2, 5] = 0; x[3] = 0" &&
	check text 6 --ids &&
	jq -e ".inputType == \"int64\"" text.json
'

test_expect_success 'the GPT example (4 blocks, tied head): logits [batch, 128, 257] from int64 ids' '
	cp "$TEST_ROOT/examples/gpt/dlk.yaml" gpt.yaml &&
	inputs gpt 2 "r.integers(0, 257, (2, 128))" &&
	check gpt 2 --ids &&
	grep_q "shape \[2, 128, 257\]" check.out &&
	"$PY" -c "
import onnx
m = onnx.load(\"gpt.onnx\")
assert not [i for i in m.graph.initializer if i.name.startswith(\"layers.34.\")], \"the tied head has no weight of its own\"
"
'
test_done
