#!/bin/sh
# conv2d with groups (grouped and depthwise), avgpool (with padding, counted as PyTorch's default
# count_include_pad), convtranspose2d (stride 2, output_padding 1) and reshape (with -1; a layer
# norm over the rows it makes) train from dlk.yaml, and the
# bundle's weights.safetensors loads by name and shape (strict) into the equivalent torch module
# of nn.Conv2d(groups=g), nn.AvgPool2d and nn.ConvTranspose2d (tests/nn/torch_module.py), whose
# logits on the test split equal dlk's in-process forward within 1e-4 + 1e-4 |torch|.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
FORWARD=$TEST_ROOT/${BUILD:-build}/tests/tools/forward
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"
[ -x "$FORWARD" ] || test_missing "tests/tools/forward (make test-unit builds it)"

P=$TEST_TMP/ck
mkdir -p "$P"
awk 'BEGIN { srand(23); for (i = 0; i < 256; i++) { c = int(rand() * 3); s = ""; for (j = 0; j < 36; j++) s = s sprintf("%.3f,", rand() + 1.5 * (int(j / 12) == c)); print s c } }' >"$P/train.csv"
head -n 48 "$P/train.csv" >"$P/test.csv"
cat >"$P/dlk.yaml" <<'EOT'
name: ck
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [1, 6, 6]
  layers:
    - conv2d: {filters: 4, padding: 1}
    - relu
    - conv2d: {filters: 4, padding: 1, groups: 4}     # depthwise
    - conv2d: {filters: 6, kernel: 1, groups: 2}      # grouped
    - tanh
    - avgpool: {size: 3, stride: 2, padding: 1}       # 6x6 -> 3x3
    - convtranspose2d: {filters: 3, kernel: 3, stride: 2, padding: 1, output_padding: 1}  # 3x3 -> 6x6
    - relu
    - reshape: [3, -1]                                 # [3, 36]: a row per channel
    - layernorm                                        # over each row's 36 values
    - reshape: {shape: [3, 6, 6]}
    - avgpool                                          # 2x2, stride 2: 6x6 -> 3x3
    - flatten
    - dense: {units: 3}
training: {epochs: 6, batch_size: 32, threads: 1, seed: 5, optimizer: {name: adam, lr: 0.01}}
EOT

test_expect_success 'grouped, depthwise and transposed convolutions and avgpool train from dlk.yaml' '
	(cd "$P" && dlk train --local -q -f dlk.yaml) >out 2>&1 && cat out &&
	acc=$(sed -n "s/.*test accuracy: \([0-9.]*\)%.*/\1/p" out) &&
	awk -v a="$acc" "BEGIN { exit !(a >= 90) }" && test -f "$P/ck.dlk"
'

test_expect_success 'their safetensors load by name into nn.Conv2d(groups), nn.AvgPool2d, nn.ConvTranspose2d: the same logits' '
	(cd "$P" && "$FORWARD" ck.dlk dlk.yaml 0 48 16 "$OLDPWD/dlk.f32") >/dev/null &&
	tar -xf "$P/ck.dlk" model.json weights.safetensors &&
	"$PY" "$TEST_ROOT/tests/nn/torch_module.py" model.json weights.safetensors "$P/test.csv" torch.f32 &&
	"$PY" - <<PYEOF
import numpy as np
got = np.fromfile("dlk.f32", dtype=np.float32)
ref = np.fromfile("torch.f32", dtype=np.float32)
assert got.shape == ref.shape == (48 * 3,), (got.shape, ref.shape)
err = np.abs(got - ref).max()
print("max |dlk - torch|:", err)
assert np.all(np.abs(got - ref) <= 1e-4 + 1e-4 * np.abs(ref)), err
PYEOF
'

test_expect_success 'a reshape that does not fit is refused naming the layer and its line' '
	sed "s/reshape: \[3, -1\]/reshape: [5, -1]/" "$P/dlk.yaml" >bad.yaml &&
	test_must_fail dlk train --dry-run -f bad.yaml 2>err && cat err &&
	grep_q "bad.yaml:17:7: model.layers\[8\]: reshape cannot make its 3x6x6 input (108 values) into the shape it names" err
'

test_expect_success 'a grouped conv2d exports to ONNX (Conv group) and ONNX Runtime gives dlk'"'"'s logits' '
	mkdir g && cd g && cp "$P/train.csv" "$P/test.csv" . &&
	sed -e "/^  layers:/,/^training/{/^    -/d}" -e "s/^  layers:/  layers:\n    - conv2d: {filters: 4, padding: 1}\n    - conv2d: {filters: 6, groups: 2}\n    - conv2d: {filters: 6, kernel: 1, groups: 6}\n    - flatten\n    - dense: {units: 3}/" \
		-e "s/^name: ck/name: gk/" "$P/dlk.yaml" >dlk.yaml && cat dlk.yaml &&
	dlk train --local -q -f dlk.yaml >/dev/null &&
	"$FORWARD" gk.dlk dlk.yaml 0 48 16 dlk.f32 >/dev/null &&
	dlk export gk.dlk --onnx gk.onnx &&
	"$PY" - <<PYEOF
import numpy as np, onnx, onnxruntime as ort
m = onnx.load("gk.onnx")
onnx.checker.check_model(m, full_check=True)
assert [a.i for n in m.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group"] == [2, 6]
rows = np.loadtxt("test.csv", delimiter=",", dtype=np.float32)
s = ort.InferenceSession("gk.onnx", providers=["CPUExecutionProvider"])
x = rows[:, :-1].reshape(-1, 1, 6, 6)
ref = s.run(["logits"], {"input": x})[0]
got = np.fromfile("dlk.f32", dtype=np.float32).reshape(48, 3)
err = np.abs(got - ref).max()
print("max |dlk - onnxruntime|:", err)
assert np.all(np.abs(got - ref) <= 1e-4 + 1e-4 * np.abs(ref)), err
PYEOF
'

test_done
