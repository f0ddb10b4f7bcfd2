#!/bin/sh
# meanpool (a sequence's mean over its positions, the padding left out by pad_id) in the bundle's
# two outside forms: PyTorch given the bundle's weights.safetensors (nn.Embedding, a masked mean
# as sentence encoders write it, nn.Linear, loaded by name and shape, strict) computes dlk's
# logits, and `dlk export --onnx` run by ONNX Runtime (the registry's wheel) reproduces them, each
# within 1e-5 + 1e-5|ref|. Random weights (tests/tools/onnx_case, PyTorch's initialisation from a
# seed), no training: the maths is what is checked. Inputs: int64 token ids with padding at the
# end, in the middle, none, and a sample all padding (0s, as dlk gives); and a float sequence
# without pad_id (dense per position, then the plain mean).
. "$(dirname "$0")/../lib.sh"
PY=$TEST_ROOT/.deps/frameworks/bin/python
CHECK=$TEST_ROOT/tests/export/onnx_kinds.py
CASE=$TEST_ROOT/${BUILD:-build}/tests/tools/onnx_case
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks: torch, onnx, onnxruntime)"
[ -x "$CASE" ] || test_missing "tests/tools/onnx_case (make test builds it)"

cat >text.yaml <<'EOT'
name: text
data: {format: csv, train: {source: train.csv}}
model:
  input: [10]
  layers:
    - embedding: {vocab: 30, dim: 16}
    - meanpool: {pad_id: 0}
    - dense: {units: 5}
EOT
cat >seq.yaml <<'EOT'
name: seq
data: {format: csv, train: {source: train.csv}}
model:
  input: [1, 7, 6]
  layers:
    - dense: {units: 12}
    - gelu
    - meanpool
    - dense: {units: 4}
EOT
mv text.yaml seq.yaml "$TEST_TMP/"
"$PY" -c "
import numpy as np
r = np.random.default_rng(3)
x = r.integers(1, 30, (6, 10)); x[0, 6:] = 0; x[1, 2:5] = 0; x[3] = 0; x[4, 0] = 0
x.astype(np.float32).tofile('$TEST_TMP/text.in')
r.uniform(-2, 2, (5, 1, 7, 6)).astype(np.float32).tofile('$TEST_TMP/seq.in')" ||
	test_missing "numpy in the frameworks venv"

test_expect_success 'dlk builds both models and runs them (random weights)' '
	cd "$TEST_TMP" &&
	"$CASE" text.yaml 5 text.dlk text.in 6 text.out >/dev/null &&
	"$CASE" seq.yaml 6 seq.dlk seq.in 5 seq.out >/dev/null &&
	tar -xOf text.dlk model.json | jq -e ".architecture.layers[1] | .kind == \"meanpool\" and .pad_id == 0"
'

test_expect_success 'PyTorch on the bundles'"'"' safetensors computes the same logits' '
	cd "$TEST_TMP" &&
	for m in text seq; do tar -xOf $m.dlk weights.safetensors >$m.safetensors || return 1; done &&
	"$PY" - <<PYEOF
import numpy as np, torch
from safetensors.torch import load_file
nn = torch.nn
def masked_mean(e, keep):  # mean pooling as sentence encoders write it; a row all padding gives 0
    keep = keep.float().unsqueeze(-1)
    return (e * keep).sum(1) / keep.sum(1).clamp(min=1)
class Text(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Embedding(30, 16), nn.Identity(), nn.Linear(16, 5)])
    def forward(self, ids):
        return self.layers[2](masked_mean(self.layers[0](ids), ids != 0))
class Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(6, 12), nn.GELU(), nn.Identity(), nn.Linear(12, 4)])
    def forward(self, x):
        return self.layers[3](self.layers[1](self.layers[0](x)).mean(1))
for name, m, x in (("text", Text(), torch.from_numpy(np.fromfile("text.in", np.float32).reshape(6, 10)).long()),
                   ("seq", Seq(), torch.from_numpy(np.fromfile("seq.in", np.float32).reshape(5, 7, 6)))):
    m.load_state_dict(load_file(name + ".safetensors"), strict=True)
    with torch.no_grad():
        ref = m(x).numpy()
    got = np.fromfile(name + ".out", np.float32).reshape(ref.shape)
    err = np.abs(got - ref)
    print(name, "max |dlk - torch|:", err.max())
    assert np.all(err <= 1e-5 + 1e-5 * np.abs(ref)), err.max()
PYEOF
'

test_expect_success 'dlk export --onnx: ONNX Runtime reproduces dlk (int64 ids masked; a float sequence)' '
	cd "$TEST_TMP" &&
	dlk export text.dlk --onnx text.onnx --input-form preprocessed -o json >text.json &&
	"$PY" "$CHECK" text.onnx text.in 6 text.out --ids --tol 1e-5 >check.out && cat check.out &&
	grep_q "^agree 6/6 " check.out &&
	dlk export seq.dlk --onnx seq.onnx --input-form preprocessed -o json >seq.json &&
	"$PY" "$CHECK" seq.onnx seq.in 5 seq.out --tol 1e-5 >check.out && cat check.out &&
	grep_q "^agree 5/5 " check.out
'
test_done
