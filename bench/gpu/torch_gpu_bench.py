"""PyTorch on the same GPU, the peer of bench/gpu/run.sh. Prints one JSON line like dlk_gpu_bench.
  torch_gpu_bench.py train mlp|cnn EPOCHS [LIMIT]   Fashion-MNIST, batch 128, Adam 1e-3
  torch_gpu_bench.py anatomy mlp|cnn BATCH           one step (forward, backward, Adam), timed alone
  torch_gpu_bench.py allreduce                       NCCL all-reduce bus bandwidth over every GPU
PyTorch's best configuration for this comparison (printed in "config"): the data preloaded on the
GPU, cuDNN's autotuner on, FP32 with TF32 off (dlk computes in strict FP32), the loss read back
every step as dlk does."""
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

DIR = "/usr/share/datasets/fashion-mnist"
CONFIG = "cudnn.benchmark=True, allow_tf32=False, data on the GPU, loss.item() every step"


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


def model(kind):
    if kind == "mlp":
        m = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    else:
        m = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    return m.cuda()


def train(kind, epochs, limit):
    x, y = load("train", limit)
    xt, yt = load("test")
    m = model(kind)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
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
                      "test_accuracy": round(correct / len(yt), 4), "torch": torch.__version__, "config": CONFIG}))


def anatomy(kind, batch):
    m = model(kind)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    lossf = nn.CrossEntropyLoss()
    x = torch.rand(batch, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    for i in range(220):
        if i == 20:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        loss.item()
    torch.cuda.synchronize()
    ms = 1e3 * (time.perf_counter() - t0) / 200
    print(json.dumps({"impl": "pytorch", "model": kind, "device": torch.cuda.get_device_name(), "batch": batch,
                      "step_ms": round(ms, 4), "samples_per_sec": round(1e3 * batch / ms, 1),
                      "torch": torch.__version__, "config": CONFIG}))


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
    setup()
    if sys.argv[1] == "train":
        train(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    elif sys.argv[1] == "anatomy":
        anatomy(sys.argv[2], int(sys.argv[3]))
    else:
        allreduce()
