#!/bin/sh
# A ResNet-style project written with model.blocks, repeat and batchnorm trains from dlk.yaml; its
# bundle's weights.safetensors (weights, biases and batch norm's running_mean, running_var and
# num_batches_tracked, by PyTorch's names) loads with load_state_dict(strict=True) into the
# equivalent torch module (tests/nn/torch_module.py: nn.Conv2d, nn.BatchNorm2d, nn.Linear in a
# ModuleList `layers`), whose eval-mode logits on the test split equal dlk's in-process forward
# (tests/tools/forward, evaluation mode as serving and dlk predict) within 1e-4 + 1e-4 |torch|.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
FORWARD=$TEST_ROOT/${BUILD:-build}/tests/tools/forward
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"
[ -x "$FORWARD" ] || test_missing "tests/tools/forward (make test-unit builds it)"

# 6x6 images of one of 3 classes: a brighter row band (0-1, 2-3, 4-5) over noise, offset 5
P=$TEST_TMP/rb
mkdir -p "$P"
awk 'BEGIN { srand(17); for (i = 0; i < 384; i++) { c = int(rand() * 3); s = ""; for (j = 0; j < 36; j++) s = s sprintf("%.3f,", 5 + rand() + 1.5 * (int(j / 12) == c)); print s c } }' >"$P/train.csv"
head -n 64 "$P/train.csv" >"$P/test.csv"
cat >"$P/dlk.yaml" <<'EOT'
name: rb
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [1, 6, 6]
  blocks:
    basic:
      - conv2d: {filters: $filters, padding: 1}
      - batchnorm
      - relu
      - conv2d: {filters: $filters, padding: 1}
      - batchnorm: {name: bn2}
      - add: {inputs: [input, bn2]}
      - relu
    down:
      - conv2d: {filters: $filters, stride: 2, padding: 1}
      - batchnorm
      - relu
      - conv2d: {filters: $filters, padding: 1}
      - batchnorm: {name: bn2}
      - conv2d: {filters: $filters, kernel: 1, stride: 2, inputs: [input]}
      - batchnorm: {name: skip}
      - add: {inputs: [bn2, skip]}
      - relu
  layers:
    - conv2d: {filters: 4, padding: 1}
    - batchnorm
    - relu
    - {block: basic, repeat: 2, filters: 4}
    - {block: down, filters: 8}
    - globalavgpool
    - dense: {units: 3}
training: {epochs: 3, batch_size: 32, threads: 1, seed: 3, optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}
EOT

test_expect_success 'a ResNet with blocks and batch norm trains from dlk.yaml past 70% (chance: 33%)' '
	(cd "$P" && dlk train --local -q -f dlk.yaml) >out 2>&1 && cat out &&
	acc=$(sed -n "s/.*test accuracy: \([0-9.]*\)%.*/\1/p" out) &&
	awk -v a="$acc" "BEGIN { exit !(a >= 70) }" && test -f "$P/rb.dlk"
'

test_expect_success 'its safetensors load by name into the torch module and give the same eval-mode logits' '
	(cd "$P" && "$FORWARD" rb.dlk dlk.yaml 0 64 16 "$OLDPWD/dlk.f32") >/dev/null &&
	tar -xf "$P/rb.dlk" model.json weights.safetensors &&
	"$PY" "$TEST_ROOT/tests/nn/torch_module.py" model.json weights.safetensors "$P/test.csv" torch.f32 >bn.out &&
	cat bn.out &&
	grep_q "layers.1: num_batches_tracked 36," bn.out &&
	"$PY" - <<PYEOF
import numpy as np
got = np.fromfile("dlk.f32", dtype=np.float32)
ref = np.fromfile("torch.f32", dtype=np.float32)
assert got.shape == ref.shape == (64 * 3,), (got.shape, ref.shape)
err = np.abs(got - ref).max()
print("max |dlk - torch|:", err)
assert np.all(np.abs(got - ref) <= 1e-4 + 1e-4 * np.abs(ref)), err
PYEOF
'

test_done
