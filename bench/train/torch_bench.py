"""The PyTorch peer of bench/train/run.sh: the same MLP / CNN as dlk_bench, batch 128, Adam 1e-3,
PyTorch's default init, the same data (Fashion-MNIST scaled to [0, 1]), a fixed thread count, on
the CPU. Runs under any PyTorch from 1.13 on (Debian's, or the registry's 2.x in .deps/).

  torch_bench.py info THREADS              what this PyTorch is: version, BLAS, threading, devices;
                                           "refuse" says why it must not be compared (JSON)
  torch_bench.py tune mlp|cnn THREADS [CANDIDATES]
                                           times each in-process configuration (JSON list, or
                                           all that this PyTorch supports) alternately, 3 rounds
                                           of 40 (MLP) or 10 (CNN) steps after a warm-up, prints the medians (JSON)
  torch_bench.py mlp|cnn EPOCHS THREADS [LIMIT]
                                           trains and prints one JSON line like dlk_bench's;
                                           $TORCH_BENCH_CONFIG (JSON) picks the configuration
  torch_bench.py check mlp|cnn BUNDLE.dlk  loads a dlk bundle's weights.safetensors into the same
                                           model (without the safetensors package) and prints its
                                           test accuracy

A configuration: {"adam": "for-loop"|"foreach"|"fused", "compile": bool, "channels_last": bool,
"bf16": bool}. None of them changes what is trained: the same model, loss, optimizer and data
order ("bf16", PyTorch's CPU mixed precision, torch.autocast to bfloat16, changes the arithmetic:
the products' operands and the activations between the layers it covers are rounded to bf16). Every one
computes subnormal floats as zero (torch.set_flush_denormal(True)), as dlk's CPU engine does, so
the two do the same arithmetic and neither pays the subnormal penalty that Adam's decaying
moments bring on Intel CPUs.
Timing counts the optimizer steps only, as dlk_bench does, and leaves out the first WARMUP steps
and the first step at each new batch size (torch.compile compiles there); dlk's timing leaves
out nothing, so the rule can only favour PyTorch."""
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
WARMUP = 20


def version():
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def info(threads):
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
    cfg = torch.__config__.show()
    par = torch.__config__.parallel_info()
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if any(s in p for s in ("blas", "lapack", "mkl", "dnnl", "gomp", "iomp", "blis")):
                libs.add(p)
    blas = "mkl" if "BLAS_INFO=mkl" in cfg else ("openblas" if "openblas" in cfg.lower() else "other")
    lines = [l.strip() for l in cfg.splitlines() if l.strip().startswith("- ") and "Build settings" not in l]
    backend = [l.split(":", 1)[1].strip() for l in par.splitlines() if "parallel backend" in l]
    refuse = ""
    if any("/blas/libblas.so" in p for p in libs):
        refuse = "PyTorch is on Debian's reference BLAS (libblas.so.3 alternative), not an optimised one"
    elif any("openblas-pthread" in p for p in libs) and backend and backend[0] == "OpenMP":
        # OpenBLAS' own pthread pool and PyTorch's OpenMP pool each want every core: on 2 cores
        # this peer ran 7x slower than on the OpenMP build of the same OpenBLAS
        refuse = ("PyTorch's OpenMP pool is running over the pthread build of OpenBLAS (the two thread "
                  "pools fight); load the OpenMP build (libopenblas0-openmp) with LD_LIBRARY_PATH")
    elif torch.cuda.is_available():
        refuse = "a CUDA device is visible: this benchmark compares CPU training (set CUDA_VISIBLE_DEVICES=)"
    return {"torch": torch.__version__, "blas": blas, "build": lines,
            "parallel_backend": backend[0] if backend else "unknown", "threads": torch.get_num_threads(),
            "cuda_available": torch.cuda.is_available(), "loaded": sorted(libs), "refuse": refuse,
            "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
                                                  "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "LD_LIBRARY_PATH", "LD_PRELOAD",
                                                  "CUDA_VISIBLE_DEVICES")
                    if k in os.environ}}


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


def candidates(kind):
    """The in-process configurations this PyTorch supports for this model."""
    adams = ["for-loop", "foreach"] + (["fused"] if version() >= (2, 4) else [])
    best_adam = adams[-1]
    # the optimizer is a large share of the MLP's step and a small one of the CNN's
    out = [{"adam": a, "compile": False, "channels_last": False} for a in (adams if kind == "mlp" else [best_adam])]
    if kind == "cnn":
        out.append({"adam": best_adam, "compile": False, "channels_last": True})
    if version() >= (2, 1):
        out.append({"adam": best_adam, "compile": True, "channels_last": False})
        if kind == "cnn":
            out.append({"adam": best_adam, "compile": True, "channels_last": True})
    if os.environ.get("BENCH_PRECISION") == "bf16":
        # bench/train/run.sh's PRECISION=bf16: the same again under CPU mixed precision
        out += [dict(c, bf16=True) for c in out if c["adam"] == best_adam]
    return out


class Trainer:
    """One model, its optimizer and its step, built for one configuration."""

    def __init__(self, kind, cfg):
        self.cfg = cfg
        self.m = model(kind)
        self.cl = bool(cfg.get("channels_last")) and kind == "cnn"
        if self.cl:
            self.m = self.m.to(memory_format=torch.channels_last)
        kw = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
        self.opt = torch.optim.Adam(self.m.parameters(), lr=1e-3, **kw[cfg.get("adam", "for-loop")])
        lossf = nn.CrossEntropyLoss()
        m = self.m

        bf16 = bool(cfg.get("bf16"))

        def fwd_bwd(xb, yb):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = lossf(m(xb).float(), yb)
            loss.backward()
            return loss
        self.fwd_bwd = torch.compile(fwd_bwd) if cfg.get("compile") else fwd_bwd

    def step(self, xb, yb):
        if self.cl:
            xb = xb.contiguous(memory_format=torch.channels_last)
        self.opt.zero_grad(set_to_none=True)
        loss = self.fwd_bwd(xb, yb)
        self.opt.step()
        return loss.item()


def tune(kind, threads, cands):
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
    torch.manual_seed(1)
    x, y = load("train", 128 * 100)
    trainers = [Trainer(kind, c) for c in cands]
    times = [[] for _ in cands]
    steps = 40 if kind == "mlp" else 10
    for t in trainers:  # warm-up (and compilation) outside the timing
        for s in range(steps // 2):
            t.step(x[s * 128:(s + 1) * 128], y[s * 128:(s + 1) * 128])
    for _ in range(3):
        for i, t in enumerate(trainers):
            t0 = time.perf_counter()
            for s in range(steps):
                j = (s % 100) * 128
                t.step(x[j:j + 128], y[j:j + 128])
            times[i].append((time.perf_counter() - t0) / steps * 1e3)
    print(json.dumps([{"config": c, "step_ms": sorted(ts)[1], "samples": ts} for c, ts in zip(cands, times)]))


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


def train(kind, epochs, threads, limit):
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
    cfg = json.loads(os.environ.get("TORCH_BENCH_CONFIG") or '{"adam": "for-loop"}')
    seed = int(os.environ.get("BENCH_SEED", "42"))  # the same variable seeds dlk_bench
    torch.manual_seed(seed)
    xtr, ytr = load("train", limit)
    xte, yte = load("t10k")
    t = Trainer(kind, cfg)
    n = len(ytr)
    warmup = min(WARMUP, epochs * ((n + 127) // 128) // 4)  # a smoke run (LIMIT) has few steps
    train_time = 0.0
    samples = timed = all_steps = 0
    t_start = time.perf_counter()
    cpu0 = time.process_time()
    g = torch.Generator().manual_seed(seed)
    seen = set()
    total = 0.0
    steps = 0
    for _ in range(epochs):
        t.m.train()
        perm = torch.randperm(n, generator=g)
        total = 0.0
        steps = 0
        for s in range(0, n, 128):
            t0 = time.perf_counter()
            idx = perm[s:s + 128]
            lv = t.step(xtr[idx], ytr[idx])
            dt = time.perf_counter() - t0
            if all_steps >= warmup and (len(idx) in seen or not warmup):
                train_time += dt
                samples += len(idx)
                timed += 1
            seen.add(len(idx))
            total += lv
            steps += 1
            all_steps += 1
    cpu = time.process_time() - cpu0  # all training steps, warm-up included, as dlk_bench counts
    t.m.eval()
    correct = 0
    with torch.inference_mode():
        for s in range(0, len(yte), 256):
            xb = xte[s:s + 256]
            if t.cl:
                xb = xb.contiguous(memory_format=torch.channels_last)
            correct += (t.m(xb).argmax(1) == yte[s:s + 256]).sum().item()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "config": cfg, "model": kind,
                      "epochs": epochs, "threads": threads, "seed": seed,
                      "samples_per_sec": round(samples / train_time, 1) if train_time else 0,
                      "step_ms": round(train_time / timed * 1e3, 4) if timed else 0,
                      "cpu_ms_per_step": round(cpu / max(all_steps, 1) * 1e3, 4),
                      "test_accuracy": round(correct / len(yte), 4), "train_loss": round(total / max(steps, 1), 4),
                      "seconds": round(time.perf_counter() - t_start, 2), "peak_rss_mb": round(rss, 1)}))


def main():
    a = sys.argv
    if a[1] == "info":
        print(json.dumps(info(int(a[2]))))
    elif a[1] == "check":
        torch.set_num_threads(2)
        torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
        check_bundle(a[2], a[3])
    elif a[1] == "tune":
        tune(a[2], int(a[3]), json.loads(a[4]) if len(a) > 4 else candidates(a[2]))
    else:
        train(a[1], int(a[2]), int(a[3]), int(a[4]) if len(a) > 4 and a[4] else 0)


if __name__ == "__main__":
    main()
