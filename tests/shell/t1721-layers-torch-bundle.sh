#!/bin/sh
# A project with the transformer layer kinds (embedding, layernorm, gelu) trains from dlk.yaml,
# and its bundle's weights.safetensors loads by name and shape (load_state_dict, strict) into
# the equivalent PyTorch module: nn.Sequential of nn.Embedding, nn.LayerNorm, nn.GELU, nn.Flatten
# and nn.Linear as its `layers`. PyTorch's logits on the test split equal dlk's in-process forward
# pass (tests/tools/forward) within 1e-4 + 1e-4|torch|.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
FORWARD=$TEST_ROOT/${BUILD:-build}/tests/tools/forward
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"
[ -x "$FORWARD" ] || test_missing "tests/tools/forward (make test-unit builds it)"

# six token ids in 0..9 per row; the class: whether id 3 is among them
P=$TEST_TMP/tokens
mkdir -p "$P"
awk 'BEGIN { srand(5); for (i = 0; i < 600; i++) { s = ""; c = 0; for (j = 0; j < 6; j++) { v = int(rand() * 10); if (v == 3) c = 1; s = s v "," } print s c } }' >"$P/train.csv"
head -n 100 "$P/train.csv" >"$P/test.csv"
cat >"$P/dlk.yaml" <<'EOT'
name: tokens
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [6]
  layers:
    - embedding: {vocab: 10, dim: 8}
    - layernorm
    - gelu: {approximate: tanh}
    - flatten
    - dense: {units: 2}
training: {epochs: 30, batch_size: 32, threads: 1}
EOT

test_expect_success 'a model of embedding, layernorm and gelu trains from dlk.yaml and learns the rule' '
	(cd "$P" && dlk train --local -q -f dlk.yaml) >out 2>&1 &&
	grep_q "test accuracy: 100.00%" out &&
	test -f "$P/tokens.dlk"
'

test_expect_success 'its safetensors load into nn.Embedding/nn.LayerNorm/nn.GELU/nn.Linear by name and give the same logits' '
	(cd "$P" && "$FORWARD" tokens.dlk dlk.yaml 0 100 32 "$OLDPWD/dlk.f32") >/dev/null &&
	tar -xf "$P/tokens.dlk" weights.safetensors &&
	"$PY" - <<PYEOF
import numpy as np, torch
from safetensors.torch import load_file
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.LayerNorm(8, eps=1e-5),
                                          torch.nn.GELU(approximate="tanh"), torch.nn.Flatten(), torch.nn.Linear(48, 2))
    def forward(self, ids): return self.layers(ids)
m = M()
m.load_state_dict(load_file("weights.safetensors"), strict=True)
rows = np.loadtxt("$P/test.csv", delimiter=",", dtype=np.int64)
with torch.no_grad(): ref = m(torch.tensor(rows[:, :6])).numpy()
got = np.fromfile("dlk.f32", dtype=np.float32).reshape(100, 2)
err = np.abs(got - ref).max()
print("max |dlk - torch|:", err)
assert np.all(np.abs(got - ref) <= 1e-4 + 1e-4 * np.abs(ref)), err
assert (ref.argmax(1) == rows[:, 6]).mean() == 1.0
PYEOF
'

test_done
