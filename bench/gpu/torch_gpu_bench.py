"""PyTorch on the same GPU, the peer of bench/gpu/run.sh and of the GPU kit. Prints one JSON line
like dlk_gpu_bench.
  torch_gpu_bench.py train mlp|cnn EPOCHS [LIMIT] [--mode eager]   Fashion-MNIST, batch 128, Adam 1e-3
  torch_gpu_bench.py anatomy mlp|cnn BATCH [--mode M]               one step (forward, backward, Adam)
  torch_gpu_bench.py allreduce                                      NCCL all-reduce bus bandwidth
PyTorch's best configuration for this comparison, printed in "config": the data preloaded on the
GPU, cuDNN's autotuner on, FP32 with TF32 off (dlk computes in strict FP32, so TF32 would compare
another precision), the CNN in channels_last, Adam's fused kernel, the loss read back every step
as dlk does. The anatomy's --mode picks how the step runs: eager; graphs, the whole step (forward,
backward, Adam) captured once in a CUDA graph and replayed; compile, torch.compile with CUDA graphs
(mode reduce-overhead; the first steps compile, their time is reported apart). The GPU kit tries
compile, then graphs, then eager, each under a time limit, and keeps the first that runs.
Fashion-MNIST is read from DLK_FMNIST_DIR, else Debian's folder."""
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

DIR = os.environ.get("DLK_FMNIST_DIR") or "/usr/share/datasets/fashion-mnist"
CONFIG = "cudnn.benchmark=True, TF32 off (allow_tf32=False), data on the GPU, channels_last (CNN), Adam fused, loss.item() every step"


def setup():
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(42)


def load(split, limit=0):
    with gzip.open(f"{DIR}/{split}-images-idx3-ubyte.gz") as f:
        img = np.frombuffer(f.read(), dtype=np.uint8, offset=16)
    with gzip.open(f"{DIR}/{split}-labels-idx1-ubyte.gz") as f:
        lab = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    n = len(lab) if not limit else min(limit, len(lab))
    x = torch.from_numpy(img[: n * 784].reshape(n, 1, 28, 28).astype(np.float32) / 255.0)
    y = torch.from_numpy(lab[:n].astype(np.int64))
    return x.cuda(), y.cuda()


def fmt(kind):
    """the memory format of the model's input and weights: channels_last for the CNN"""
    return torch.channels_last if kind == "cnn" else torch.contiguous_format


def model(kind):
    if kind == "mlp":
        m = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    else:
        m = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    return m.cuda().to(memory_format=fmt(kind))


def train(kind, epochs, limit):
    x, y = load("train", limit)
    xt, yt = load("test")
    x, xt = x.contiguous(memory_format=fmt(kind)), xt.contiguous(memory_format=fmt(kind))
    m = model(kind)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=True)
    lossf = nn.CrossEntropyLoss()
    n, batch, samples, spent = len(y), 128, 0, 0.0
    for _ in range(epochs):
        perm = torch.randperm(n, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for s in range(0, n, batch):
            idx = perm[s:s + batch]
            opt.zero_grad(set_to_none=True)
            loss = lossf(m(x[idx]), y[idx])
            loss.backward()
            opt.step()
            loss.item()
            samples += len(idx)
        torch.cuda.synchronize()
        spent += time.perf_counter() - t0
    m.eval()
    with torch.no_grad():
        correct = sum((m(xt[i:i + 1000]).argmax(1) == yt[i:i + 1000]).sum().item() for i in range(0, len(yt), 1000))
    sps = samples / spent
    print(json.dumps({"impl": "pytorch", "model": kind, "device": torch.cuda.get_device_name(), "epochs": epochs,
                      "samples_per_sec": round(sps, 1), "step_ms": round(1e3 * batch / sps, 4),
                      "test_accuracy": round(correct / len(yt), 4), "torch": torch.__version__,
                      "config": CONFIG + ", eager"}))


def anatomy(kind, batch, mode):
    m = model(kind)
    lossf = nn.CrossEntropyLoss()
    x = torch.rand(batch, 1, 28, 28, device="cuda").contiguous(memory_format=fmt(kind))
    y = torch.randint(0, 10, (batch,), device="cuda")
    t_start = time.perf_counter()
    if mode == "graphs":
        # PyTorch's whole-network capture: warm up on a side stream, capture one step, replay it
        opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=True, capturable=True)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                lossf(m(x), y).backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            static_loss = lossf(m(x), y)
            static_loss.backward()
            opt.step()

        def step():
            g.replay()
            return static_loss
    else:
        opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=True)
        f = torch.compile(m, mode="reduce-overhead") if mode == "compile" else m

        def step():
            opt.zero_grad(set_to_none=True)
            loss = lossf(f(x), y)
            loss.backward()
            opt.step()
            return loss
    for i in range(220):
        if i == 20:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            warm = t0 - t_start
        step().item()
    torch.cuda.synchronize()
    ms = 1e3 * (time.perf_counter() - t0) / 200
    print(json.dumps({"impl": "pytorch", "model": kind, "device": torch.cuda.get_device_name(), "batch": batch,
                      "step_ms": round(ms, 4), "samples_per_sec": round(1e3 * batch / ms, 1), "mode": mode,
                      "warmup_s": round(warm, 2), "torch": torch.__version__,
                      "config": CONFIG + ", " + {"eager": "eager", "graphs": "the whole step in one CUDA graph",
                                                 "compile": "torch.compile(mode='reduce-overhead'): CUDA graphs"}[mode]}))


def allreduce_rank(rank, world, port, out):
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    rows = []
    for mib in (1, 4, 16, 64, 256):
        n = mib * 1024 * 1024 // 4
        buf = torch.ones(n, device="cuda")
        for _ in range(5):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        iters = 100 if mib < 64 else 20
        for _ in range(iters):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / iters
        algbw = n * 4 / t / 1e9
        rows.append({"bytes": n * 4, "time_us": round(1e6 * t, 1), "algbw_gbs": round(algbw, 2),
                     "busbw_gbs": round(algbw * 2 * (world - 1) / world, 2)})
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"impl": "pytorch", "world": world, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "rows": rows}, f)
    dist.destroy_process_group()


def allreduce():
    import socket
    import torch.multiprocessing as mp
    world = torch.cuda.device_count()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    out = f"/tmp/torch_allreduce.{os.getpid()}.json"
    mp.spawn(allreduce_rank, args=(world, port, out), nprocs=world)
    with open(out) as f:
        print(f.read())
    os.unlink(out)


if __name__ == "__main__":
    args = sys.argv[1:]
    mode = "eager"
    if "--mode" in args:
        i = args.index("--mode")
        mode = args[i + 1]
        del args[i:i + 2]
    if mode not in ("eager", "graphs", "compile"):
        sys.exit("torch_gpu_bench.py: --mode %r: expected eager, graphs or compile" % mode)
    setup()
    if args[0] == "train":
        if mode != "eager":
            sys.exit("torch_gpu_bench.py: train runs eager only (its last batch is smaller)")
        train(args[1], int(args[2]), int(args[3]) if len(args) > 3 else 0)
    elif args[0] == "anatomy":
        anatomy(args[1], int(args[2]), mode)
    else:
        allreduce()
