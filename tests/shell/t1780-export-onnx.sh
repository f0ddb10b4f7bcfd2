#!/bin/sh
# dlk export --onnx: the exported model passes the real onnx checker (full_check) and ONNX Runtime
# (the registry's wheel, .deps/frameworks) reproduces dlk's own forward pass (tests/tools/forward,
# which t1010 shows equal to what `dlk serve` answers) on all 10,000 Fashion-MNIST test images:
# every logit within 1e-4 (absolute and relative; measured differences are below 1e-5), the same
# class for every image, and the bundle's recorded test accuracy. Models: the MLP and CNN
# examples, and two small models that use every layer kind (strided padded convolution, tanh,
# sigmoid, an overlapping max-pool, dropout, a flat input) with a mean/std input scaling.
. "$(dirname "$0")/../lib.sh"
PY=$TEST_ROOT/.deps/frameworks/bin/python
CHECK=$TEST_ROOT/tests/export/onnx_check.py
FORWARD=$TEST_ROOT/${BUILD:-build}/tests/tools/forward
D=/usr/share/datasets/fashion-mnist
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks: onnx, onnxruntime)"
[ -x "$FORWARD" ] || test_missing "tests/tools/forward (make test builds it)"
[ -f "$D/t10k-images-idx3-ubyte.gz" ] || test_missing "the Fashion-MNIST dataset"

# the small models train on the 10,000 test images (one epoch in seconds): what is compared here
# is ONNX Runtime against dlk on the same weights, not how well the models generalise
T10K="--set data.train.images=file://$D/t10k-images-idx3-ubyte.gz --set data.train.labels=file://$D/t10k-labels-idx1-ubyte.gz"

kinds_project() {
	mkdir -p "$1" && cat >"$1/dlk.yaml" <<EOT
name: $2
data:
  format: idx
  train:
    images: file://$D/t10k-images-idx3-ubyte.gz
    labels: file://$D/t10k-labels-idx1-ubyte.gz
  test:
    images: file://$D/t10k-images-idx3-ubyte.gz
    labels: file://$D/t10k-labels-idx1-ubyte.gz
  mean: 0.2860
  std: 0.3530
model:
  input: $3
  layers:
$4
training: {epochs: 1, batch_size: 64, optimizer: {name: adam, lr: 0.002}, seed: 7}
EOT
}

train() {
	(cd "$1" && shift && "$DLK" train --local -q "$@" >train.out 2>&1) ||
		{ echo "Bail out! training failed"; cat "$1/train.out"; exit 1; }
}

"$DLK" init --example mlp "$TEST_TMP/mlp" >/dev/null && train "$TEST_TMP/mlp" --set training.epochs=1 $T10K
"$DLK" init --example cnn "$TEST_TMP/cnn" >/dev/null && train "$TEST_TMP/cnn" --set training.epochs=1 $T10K
kinds_project "$TEST_TMP/kimg" kimg "[1, 28, 28]" "    - conv2d: {filters: 4, kernel: 5, stride: 2, padding: 1}
    - tanh
    - maxpool: {size: 3, stride: 1}
    - conv2d: {filters: 6, kernel: 3}
    - sigmoid
    - flatten
    - dropout: {rate: 0.3}
    - dense: {units: 10}" && train "$TEST_TMP/kimg"
kinds_project "$TEST_TMP/kflat" kflat "[784]" "    - dense: {units: 32}
    - tanh
    - dropout: {rate: 0.2}
    - dense: {units: 16}
    - sigmoid
    - dense: {units: 10}" && train "$TEST_TMP/kflat"

# check NAME FORM [--scale S --mean M --std D]: export, then ONNX Runtime against dlk's pass
check() {
	P=$TEST_TMP/$1 form=$2
	shift 2
	B=$(ls "$P"/*.dlk) &&
	SHA=$("$DLK" lineage "$B" -o json | jq -r .weightsSha256) &&
	CORRECT=$(tar -xOf "$B" model.json | jq -r '(.metrics.test_accuracy * .metrics.test_samples + 0.5) | floor') &&
	{ [ -f "$P/logits.f32" ] || "$FORWARD" "$B" "$P/dlk.yaml" 0 10000 256 "$P/logits.f32" >/dev/null; } &&
	"$DLK" export "$B" --onnx "$P/$form.onnx" --input-form "$form" >export.out &&
	grep_q "^wrote .*$form.onnx: ONNX opset 17" export.out &&
	"$PY" "$CHECK" "$P/$form.onnx" --images "$D/t10k-images-idx3-ubyte.gz" --labels "$D/t10k-labels-idx1-ubyte.gz" \
		--n 10000 --logits "$P/logits.f32" --form "$form" --weights-sha256 "$SHA" "$@" >check.out &&
	cat check.out &&
	grep_q "^agree 10000/10000 .* correct $CORRECT\$" check.out
}

test_expect_success 'MLP, raw pixels in: ONNX Runtime reproduces dlk on 10,000 images' 'check mlp raw'
test_expect_success 'MLP, preprocessed input (x/255): the same logits' 'check mlp preprocessed'
test_expect_success 'CNN, raw pixels in: ONNX Runtime reproduces dlk on 10,000 images' 'check cnn raw'
test_expect_success 'CNN, preprocessed input' 'check cnn preprocessed'
test_expect_success 'every layer kind, strided padded conv, mean/std scaling in the graph' 'check kimg raw'
test_expect_success 'every layer kind, preprocessed with mean/std by the client' '
	check kimg preprocessed --scale 0.003921568859368563 --mean 0.2860 --std 0.3530
'
test_expect_success 'a flat-input model ([batch, 784]) with tanh, sigmoid and dropout' 'check kflat raw'

test_expect_success 'the metadata records the bundle, the contract and the classes; -o json says what was written' '
	B=$TEST_TMP/mlp/mlp.dlk &&
	"$DLK" export "$B" --onnx m.onnx -o json >out.json &&
	jq -e ".opset == 17 and .inputForm == \"raw\" and .bytes > 900000" out.json &&
	"$PY" -c "
import json, onnx
m = onnx.load(\"m.onnx\")
p = {e.key: e.value for e in m.metadata_props}
assert p[\"dlk.bundle.name\"] == \"mlp\", p
assert json.loads(p[\"dlk.classes\"])[9] == \"Ankle boot\", p
assert abs(float(p[\"dlk.input.scale\"]) - 1 / 255) < 1e-9, p
assert [i.name for i in m.graph.initializer][3:5] == [\"layers.1.weight\", \"layers.1.bias\"], m.graph.initializer
"
'
test_expect_success 'the CNN with its weights as ONNX external data (FILE.data beside FILE): the same answers' '
	P=$TEST_TMP/cnn && B=$(ls "$P"/*.dlk) && mkdir ext &&
	SHA=$("$DLK" lineage "$B" -o json | jq -r .weightsSha256) &&
	CORRECT=$(tar -xOf "$B" model.json | jq -r "(.metrics.test_accuracy * .metrics.test_samples + 0.5) | floor") &&
	"$DLK" export "$B" --onnx ext/cnn.onnx --external-data -o json >out.json &&
	jq -e ".externalData == \"ext/cnn.onnx.data\" and .bytes < 20000 and .externalDataBytes > 800000" out.json &&
	"$PY" "$CHECK" ext/cnn.onnx --images "$D/t10k-images-idx3-ubyte.gz" --labels "$D/t10k-labels-idx1-ubyte.gz" \
		--n 10000 --logits "$P/logits.f32" --form raw --weights-sha256 "$SHA" >check.out &&
	grep_q "^agree 10000/10000 .* correct $CORRECT\$" check.out &&
	"$PY" -c "
import onnx
m = onnx.load(\"ext/cnn.onnx\", load_external_data=False)
ext = [t.name for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
assert ext == [\"layers.0.weight\", \"layers.3.weight\", \"layers.7.weight\", \"layers.9.weight\"] and all(not t.raw_data for t in m.graph.initializer if t.name in ext), ext
" &&
	"$DLK" export "$B" --onnx ext/cnn2.onnx >out &&
	grep_q "^wrote ext/cnn2.onnx: ONNX opset 17, [0-9]* bytes, input" out && test ! -e ext/cnn2.onnx.data
'
test_expect_failure_code 'no format named: a usage error with the command to run' 2 '
	"$DLK" export "$TEST_TMP/mlp/mlp.dlk" 2>err; rc=$?; grep_q "dlk export .* --onnx MODEL.onnx" err; exit $rc
'
test_expect_failure_code 'a damaged bundle: refused, no file written' 3 '
	head -c 5000 "$TEST_TMP/mlp/mlp.dlk" >cut.dlk &&
	"$DLK" export cut.dlk --onnx out.onnx 2>err; rc=$?; cat err; test ! -e out.onnx && grep_q "cut.dlk" err; exit $rc
'
test_expect_success 'an output in a missing directory: an error naming it, nothing written' '
	test_must_fail "$DLK" export "$TEST_TMP/mlp/mlp.dlk" --onnx nodir/out.onnx 2>err && grep_q "nodir" err
'
test_done
