"""What a user would write instead of `dlk predict`: a Python batch-scoring loop with PyTorch on
the same weights. The module is built from the bundle's model.json (tests/nn/torch_module.py) and
the bundle's weights.safetensors loaded into it by name (strict); the IDX images are scaled as
training scaled them (model.json's input_scaling), scored in batches of BATCH rows under
torch.inference_mode() on THREADS threads, and the predictions written as dlk predict writes them
(index,label,class,p_<class>...; %.9g). Prints one JSON line: load/score/write seconds, samples,
correct.

usage: torch_score.py BUNDLE IMAGES.gz LABELS.gz THREADS BATCH OUT.csv"""
import gzip
import io
import json
import os
import sys
import tarfile
import time

T0 = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load as st_load  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "nn"))
from torch_module import Graph  # noqa: E402


def idx(path):
    raw = gzip.open(path).read()
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def main():
    bundle, images, labels, threads, batch, out = sys.argv[1:7]
    threads, batch = int(threads), int(batch)
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
    with tarfile.open(bundle) as t:
        meta = json.load(t.extractfile("model.json"))
        weights = t.extractfile("weights.safetensors").read()
    arch = meta["architecture"]
    m = Graph(arch)
    m.load_state_dict(st_load(weights), strict=True)
    m.eval()
    sc = meta.get("input_scaling", {"scale": 1 / 255, "mean": 0.0, "std": 1.0})
    x8 = idx(images)
    y = idx(labels).astype(np.int64)
    c, h, w = arch["input"]
    x = torch.from_numpy(x8.reshape(len(x8), c, h, w).astype(np.float32))
    x = (x * np.float32(sc["scale"]) - np.float32(sc["mean"])) / np.float32(sc["std"])
    t1 = time.perf_counter()
    probs = []
    with torch.inference_mode():
        for s in range(0, len(x), batch):
            probs.append(torch.softmax(m(x[s:s + batch]), dim=1))
    p = torch.cat(probs).numpy()
    cls = p.argmax(axis=1)
    t2 = time.perf_counter()
    names = meta.get("classes")
    k = p.shape[1]
    buf = io.StringIO()
    buf.write("index,label,class," + ",".join(f"p_{names[i] if names else i}" for i in range(k)) + "\n")
    body = np.column_stack([np.arange(len(p)), y, cls])
    for i in range(len(p)):
        lab = names[body[i, 1]] if names else str(body[i, 1])
        cl = names[body[i, 2]] if names else str(body[i, 2])
        buf.write(f"{i},{lab},{cl}," + ",".join("%.9g" % v for v in p[i]) + "\n")
    with open(out, "w") as f:
        f.write(buf.getvalue())
    t3 = time.perf_counter()
    print(json.dumps({"load_s": t1 - T0, "score_s": t2 - t1, "write_s": t3 - t2, "samples": len(p),
                      "correct": int((cls == y).sum()), "threads": threads, "batch": batch}))


main()
