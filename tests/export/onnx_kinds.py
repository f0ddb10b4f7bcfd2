"""Checks a `dlk export --onnx` file of a model of any kind against dlk's own forward pass of the
same inputs (tests/tools/onnx_case), with the real onnx checker and ONNX Runtime.

  onnx_kinds.py MODEL.onnx IN.f32 N OUT.f32 [--ids] [--output NAME] [--tol T]

IN.f32 holds N samples of the network's input (token ids as floats with --ids, which the model
takes as int64), OUT.f32 dlk's outputs. Prints "agree N/N max_abs_diff X" and exits 1 when the
model fails the checker or an output differs by more than T (absolute) + T (relative)."""
import argparse
import sys

import numpy as np
import onnx
import onnxruntime as ort

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("inputs")
ap.add_argument("n", type=int)
ap.add_argument("outputs")
ap.add_argument("--ids", action="store_true")
ap.add_argument("--output", default="logits")
ap.add_argument("--tol", type=float, default=1e-4)
a = ap.parse_args()

m = onnx.load(a.model)
onnx.checker.check_model(m, full_check=True)
assert m.opset_import[0].version == 17, m.opset_import
s = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
inp = s.get_inputs()[0]
shape = [a.n] + list(inp.shape[1:])
x = np.fromfile(a.inputs, dtype=np.float32).reshape(shape)
if a.ids:
    assert inp.type == "tensor(int64)", inp.type
    x = x.astype(np.int64)
else:
    assert inp.type == "tensor(float)", inp.type
names = [o.name for o in s.get_outputs()]
res = dict(zip(names, s.run(None, {inp.name: x})))
y = res[a.output]
want = np.fromfile(a.outputs, dtype=np.float32).reshape(y.shape)
if "probabilities" in res and a.output == "logits":
    p = res["probabilities"]
    assert np.allclose(p.sum(axis=-1), 1, atol=1e-4), "probabilities sum to 1"
diff = np.abs(y - want)
ok = diff <= a.tol + a.tol * np.abs(want)
rows = ok.reshape(a.n, -1).all(axis=1)
print(f"agree {int(rows.sum())}/{a.n} max_abs_diff {diff.max():.3g} shape {list(y.shape)}")
sys.exit(0 if rows.all() and np.isfinite(y).all() else 1)
