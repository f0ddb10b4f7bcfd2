"""Checks a `dlk export --onnx` file with the real onnx checker and ONNX Runtime against dlk's own
forward pass (tests/tools/forward's logits of the same test images).

  onnx_check.py MODEL.onnx --images IDX.gz --labels IDX.gz --n N --logits OUT.f32
                [--form raw|preprocessed] [--scale S --mean M --std D] [--weights-sha256 HEX]

Prints one line: "agree N/N max_abs_diff X correct C". Exits 1 when a check fails."""
import argparse
import gzip
import sys

import numpy as np
import onnx
import onnxruntime as ort

# dlk's forward pass (OpenBLAS) and ONNX Runtime's (MLAS) sum in different orders: float32
# logits agree to about 1e-6 relative; this bound leaves room without hiding a wrong graph
# (a missing scaling or a transposed weight moves logits by whole units)
RTOL, ATOL = 1e-4, 1e-4

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--images", required=True)
ap.add_argument("--labels", required=True)
ap.add_argument("--n", type=int, required=True)
ap.add_argument("--logits", required=True)
ap.add_argument("--form", default="raw")
ap.add_argument("--scale", type=np.float32, default=np.float32(1 / 255))
ap.add_argument("--mean", type=np.float32, default=np.float32(0))
ap.add_argument("--std", type=np.float32, default=np.float32(1))
ap.add_argument("--weights-sha256")
a = ap.parse_args()

m = onnx.load(a.model)
onnx.checker.check_model(m, full_check=True)
meta = {p.key: p.value for p in m.metadata_props}
assert m.opset_import[0].version == 17, m.opset_import
assert meta.get("dlk.input_form") == a.form, meta
assert meta.get("dlk.version"), meta
if a.weights_sha256:
    assert meta.get("dlk.bundle.weights_sha256") == a.weights_sha256, meta

sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
ins = sess.get_inputs()
assert [i.name for i in ins] == ["input"], ins
assert [o.name for o in sess.get_outputs()] == ["probabilities", "logits"], sess.get_outputs()
shape = ins[0].shape  # ["batch", C, H, W] or ["batch", F]

raw = np.frombuffer(gzip.open(a.images).read(), dtype=np.uint8, offset=16)[: a.n * 784]
labels = np.frombuffer(gzip.open(a.labels).read(), dtype=np.uint8, offset=8)[: a.n]
x = raw.astype(np.float32).reshape([a.n] + [int(d) for d in shape[1:]])
if a.form == "preprocessed":
    x = (x * a.scale - a.mean) / a.std  # float32 throughout, as dlk scales

probs, logits = [], []
for s in range(0, a.n, 1000):
    p, l = sess.run(None, {"input": x[s : s + 1000]})
    probs.append(p)
    logits.append(l)
probs, logits = np.concatenate(probs), np.concatenate(logits)
want = np.fromfile(a.logits, dtype=np.float32).reshape(logits.shape)

diff = float(np.max(np.abs(logits - want)))
agree = int(np.sum(np.argmax(logits, 1) == np.argmax(want, 1)))
correct = int(np.sum(np.argmax(logits, 1) == labels))
print(f"agree {agree}/{a.n} max_abs_diff {diff:.3g} correct {correct}")
e = np.exp(want - want.max(1, keepdims=True))
ok = np.allclose(logits, want, rtol=RTOL, atol=ATOL) and np.allclose(probs, e / e.sum(1, keepdims=True),
                                                                         rtol=RTOL, atol=ATOL)
sys.exit(0 if ok else 1)
