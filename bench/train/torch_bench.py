"""PyTorch CPU reference for bench/train/run.sh: the same MLP / CNN, batch 128, Adam 1e-3,
PyTorch's default init, the same data (Fashion-MNIST, scaled to [0, 1]), a fixed thread count.
Prints one JSON line like dlk_bench. Usage: torch_bench.py mlp|cnn|blas EPOCHS THREADS [LIMIT]
or: torch_bench.py check mlp|cnn BUNDLE.dlk  (loads a dlk bundle's weights.safetensors into the
same PyTorch model, without the safetensors package, and prints its test accuracy)"""
import gzip
import json
import os
import resource
import sys
import tarfile
import time

import numpy as np
import torch
import torch.nn as nn

DIR = "/usr/share/datasets/fashion-mnist"


def blas_info():
    cfg = torch.__config__.show()
    blas = [l.strip() for l in cfg.splitlines() if "BLAS" in l or "LAPACK" in l or "MKL" in l or "mkldnn" in l.lower()]
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if "blas" in p or "lapack" in p or "mkl" in p:
                    libs.add(p)
    except OSError:
        pass
    return {"config": blas, "loaded": sorted(libs)}


def load(split, limit=0):
    with gzip.open(f"{DIR}/{split}-images-idx3-ubyte.gz") as f:
        img = np.frombuffer(f.read(), dtype=np.uint8, offset=16)
    with gzip.open(f"{DIR}/{split}-labels-idx1-ubyte.gz") as f:
        lab = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    n = len(lab) if not limit else min(limit, len(lab))
    x = torch.from_numpy(img[: n * 784].reshape(n, 1, 28, 28).astype(np.float32) / 255.0)
    y = torch.from_numpy(lab[:n].astype(np.int64))
    return x, y


def model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def check_bundle(kind, path):
    with tarfile.open(path) as tar:
        meta = json.load(tar.extractfile("model.json"))
        raw = tar.extractfile("weights.safetensors").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    state = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", t
        a, b = t["data_offsets"]
        state[name.replace("layers.", "", 1)] = torch.from_numpy(
            np.frombuffer(data[a:b], dtype="<f4").copy().reshape(t["shape"]))
    m = model(kind)
    m.load_state_dict(state, strict=True)  # names and shapes must be exactly PyTorch's
    m.eval()
    xte, yte = load("t10k")
    with torch.no_grad():
        acc = (m(xte).argmax(1) == yte).float().mean().item()
    print(json.dumps({"impl": "pytorch-loaded-dlk-bundle", "model": kind, "test_accuracy": round(acc, 4),
                      "dlk_recorded_accuracy": round(meta["metrics"]["test_accuracy"], 4)}))


def main():
    if sys.argv[1] == "check":
        torch.set_num_threads(2)
        check_bundle(sys.argv[2], sys.argv[3])
        return
    kind, epochs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    torch.set_num_threads(threads)
    if kind == "blas":
        print(json.dumps(blas_info()))
        return
    seed = int(os.environ.get("BENCH_SEED", "42"))  # the same variable seeds dlk_bench
    torch.manual_seed(seed)
    xtr, ytr = load("train", limit)
    xte, yte = load("t10k")
    m = model(kind)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    lossf = nn.CrossEntropyLoss()
    n = len(ytr)
    train_time = 0.0
    samples = 0
    all_steps = 0
    t_start = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        m.train()
        perm = torch.randperm(n, generator=g)
        total = 0.0
        steps = 0
        for s in range(0, n, 128):
            t0 = time.perf_counter()
            idx = perm[s:s + 128]
            xb, yb = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            loss = lossf(m(xb), yb)
            loss.backward()
            opt.step()
            lv = loss.item()
            train_time += time.perf_counter() - t0
            samples += len(idx)
            total += lv
            steps += 1
            all_steps += 1
    m.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, len(yte), 256):
            correct += (m(xte[s:s + 256]).argmax(1) == yte[s:s + 256]).sum().item()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "model": kind, "epochs": epochs,
                      "threads": threads, "samples_per_sec": round(samples / train_time, 1),
                      "step_ms": round(train_time / all_steps * 1e3 if all_steps else 0, 4),
                      "test_accuracy": round(correct / len(yte), 4), "train_loss": round(total / max(steps, 1), 4),
                      "seconds": round(time.perf_counter() - t_start, 2), "peak_rss_mb": round(rss, 1)}))


if __name__ == "__main__":
    main()
