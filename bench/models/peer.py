"""The PyTorch peer of bench/models/run.sh: the model of a dlk bundle's model.json, layer by
layer, trained in PyTorch on the CPU on the same data with the example's optimizer and schedule.

  python peer.py KIND MODEL_JSON DATA [--weights W.safetensors] [--epochs 1] [--threads 2]
                 [--seed 1] [--channels-last] [--compile] [--warmup-steps 3]

KIND and DATA (what bench/models/run.sh writes; dlk reads the same files):
  resnet   a folder with train-images, train-labels, test-images, test-labels (IDX, pixels / 255);
           SGD lr 0.1, momentum 0.9, Nesterov, weight decay 5e-4 on the weights (not biases),
           cosine over the run with a 50-step linear warm-up (examples/resnet/dlk.yaml), batch 128
  text     a folder with train.ids, train.labels, test.ids, test.labels (int32, from
           dlk_text_ids: dlk's own BPE ids of each passage, model.input's length a row); Adam lr 0.003, batch 32
           (examples/text/dlk.yaml)
  denoise  pairs/ as examples/denoise/noisy-pairs.py writes it: {train,test}/{noisy,clean}/*.png,
           input noisy / 255, target clean / 255; MSE; Adam lr 0.003, cosine with a 20-step warm-up,
           batch 64 (examples/denoise/dlk.yaml)

The module is built from model.json's architecture (each layer's kind and settings, the graph's
inputs), PyTorch's default initialisation, one nn.ModuleList `layers` indexed as dlk's layers:
--weights W only loads a dlk bundle's weights.safetensors into it with strict=True and exits (the
check that the two models are the same, name by name and shape by shape). The schedule is dlk's formula
(lib/nn/optim.c): lr(s) = min_lr + (lr - min_lr)(1 + cos(pi s / S)) / 2, times (s + 1) / W for
s < W. The training order is a permutation of the split drawn from the seed each epoch (dlk draws
its own); the last batch of an epoch is the short remainder, as dlk's.

Prints one JSON line: steps, samples/s over the steps after the first --warmup-steps, the process
CPU seconds of the training loop per step (all threads), the test metric (accuracy, or PSNR in dB
as dlk computes it: the mean over images of 10 log10(1 / MSE), at most 100), the configuration."""
import argparse
import gzip
import json
import math
import os
import sys
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Graph(nn.Module):
    """model.json's architecture: layer i reads inputs[i] (indices, -1 the model's input) or the
    layer before it."""

    def __init__(self, arch):
        super().__init__()
        self.arch = arch["layers"]
        inp = tuple(arch["input"])
        shapes, mods = [], []
        for i, l in enumerate(self.arch):
            ins = l.get("inputs")
            a = (inp if ins[0] < 0 else shapes[ins[0]]) if ins else (shapes[-1] if shapes else inp)
            k, m = l["kind"], nn.Identity()
            if k == "conv2d":
                m = nn.Conv2d(a[0], l["filters"], l["kernel"], stride=l["stride"], padding=l["padding"],
                              groups=l.get("groups", 1))
                s = (l["filters"], (a[1] + 2 * l["padding"] - l["kernel"]) // l["stride"] + 1,
                     (a[2] + 2 * l["padding"] - l["kernel"]) // l["stride"] + 1)
            elif k == "convtranspose2d":
                m = nn.ConvTranspose2d(a[0], l["filters"], l["kernel"], stride=l["stride"], padding=l["padding"],
                                       output_padding=l.get("output_padding", 0))
                s = tuple([l["filters"]] + [(a[j] - 1) * l["stride"] - 2 * l["padding"] + l["kernel"] +
                                            l.get("output_padding", 0) for j in (1, 2)])
            elif k == "batchnorm":
                m = nn.BatchNorm2d(a[0], eps=l["eps"], momentum=l["momentum"])
                s = a
            elif k == "dense":
                m = nn.Linear(int(np.prod(a)), l["units"])
                s = (l["units"],)
            elif k == "embedding":
                if l.get("positions"):
                    sys.exit("peer.py: position embeddings are not written here")
                m = nn.Embedding(l["vocab"], l["dim"])
                s = (a[-1], l["dim"])
            elif k == "reshape":
                s = tuple(l["shape"])
            elif k == "meanpool":
                s = (a[-1],)
            elif k in ("flatten",):
                s = (int(np.prod(a)),)
            elif k == "globalavgpool":
                s = (a[0],)
            elif k == "maxpool":
                s = (a[0], (a[1] - l["size"]) // l["stride"] + 1, (a[2] - l["size"]) // l["stride"] + 1)
            elif k == "concat":
                b = inp if ins[1] < 0 else shapes[ins[1]]
                s = (a[0] + b[0],) + tuple(a[1:])
            elif k in ("relu", "add"):
                s = a
            else:
                sys.exit(f"peer.py: layer {i}: no module for kind {k}")
            mods.append(m)
            shapes.append(s)
        self.layers = nn.ModuleList(mods)

    def forward(self, x):
        outs = []
        for i, l in enumerate(self.arch):
            ins = l.get("inputs")
            a = (x if ins[0] < 0 else outs[ins[0]]) if ins else (outs[-1] if outs else x)
            k, m = l["kind"], self.layers[i]
            if k in ("conv2d", "convtranspose2d", "batchnorm", "embedding"):
                y = m(a)
            elif k == "dense":
                y = m(a.flatten(1))
            elif k == "reshape":
                y = a.reshape(len(a), *l["shape"])
            elif k == "meanpool":
                # docs/layers.md: the positions whose id in the model's input is pad_id left out
                if l.get("pad_id", -1) >= 0:
                    msk = (x != l["pad_id"]).to(a.dtype).unsqueeze(-1)
                    y = (a * msk).sum(1) / msk.sum(1).clamp(min=1)
                else:
                    y = a.mean(1)
            elif k == "flatten":
                y = a.flatten(1)
            elif k == "relu":
                y = F.relu(a)
            elif k == "maxpool":
                y = F.max_pool2d(a, l["size"], l["stride"])
            elif k == "globalavgpool":
                y = a.mean(dim=(2, 3))
            elif k == "add":
                y = a + (x if ins[1] < 0 else outs[ins[1]])
            elif k == "concat":
                y = torch.cat((a, x if ins[1] < 0 else outs[ins[1]]), dim=1)
            outs.append(y)
        return outs[-1]


def idx(path):
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        d = f.read()
    nd = d[3]
    dims = [int.from_bytes(d[4 + 4 * j:8 + 4 * j], "big") for j in range(nd)]
    return np.frombuffer(d, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def pngs(folder):
    from PIL import Image
    names = sorted(os.listdir(folder))
    return np.stack([np.asarray(Image.open(os.path.join(folder, n)).convert("L")) for n in names]), names


def load(kind, d, length):
    """(x_train, y_train, x_test, y_test) as tensors; length: a text's ids"""
    if kind == "resnet":
        f = lambda s: torch.from_numpy(idx(os.path.join(d, s)).astype(np.float32) / 255.0).unsqueeze(1)  # noqa: E731
        g = lambda s: torch.from_numpy(idx(os.path.join(d, s)).astype(np.int64))  # noqa: E731
        return f("train-images"), g("train-labels"), f("test-images"), g("test-labels")
    if kind == "text":
        f = lambda s: torch.from_numpy(np.fromfile(os.path.join(d, s + ".ids"), dtype=np.int32).astype(np.int64).reshape(-1, length))  # noqa: E731
        g = lambda s: torch.from_numpy(np.fromfile(os.path.join(d, s + ".labels"), dtype=np.int32).astype(np.int64))  # noqa: E731
        return f("train"), g("train"), f("test"), g("test")
    out = []
    for split in ("train", "test"):
        noisy, a = pngs(os.path.join(d, split, "noisy"))
        clean, b = pngs(os.path.join(d, split, "clean"))
        assert a == b, "noisy and clean files differ"
        out += [torch.from_numpy(v.astype(np.float32) / 255.0).unsqueeze(1) for v in (noisy, clean)]
    return tuple(out)


SETTINGS = {  # the examples' training sections
    "resnet": dict(batch=128, opt="sgd", lr=0.1, momentum=0.9, nesterov=True, wd=5e-4, sched="cosine", warm=50),
    "text": dict(batch=32, opt="adam", lr=0.003, sched="constant", warm=0),
    "denoise": dict(batch=64, opt="adam", lr=0.003, sched="cosine", warm=20),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=sorted(SETTINGS))
    ap.add_argument("model_json")
    ap.add_argument("data")
    ap.add_argument("--weights")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--bf16", action="store_true", help="torch.autocast('cpu', torch.bfloat16) around forward and loss")
    ap.add_argument("--warmup-steps", type=int, default=3)
    a = ap.parse_args()
    assert not torch.cuda.is_available(), "a CUDA device is visible: this bench is for the CPU"
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
    torch.manual_seed(a.seed)
    c = SETTINGS[a.kind]

    arch = json.load(open(a.model_json))["architecture"]
    model = Graph(arch)
    if a.weights:
        from safetensors.torch import load_file
        model.load_state_dict(load_file(a.weights), strict=True)
        n = sum(p.numel() for p in model.parameters())
        print(json.dumps({"kind": a.kind, "loaded": a.weights, "parameters": n, "layers": len(model.layers)}))
        return 0
    xtr, ytr, xte, yte = load(a.kind, a.data, arch["input"][-1])
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        xtr, xte = xtr.contiguous(memory_format=fmt), xte.contiguous(memory_format=fmt)

    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    if c["opt"] == "sgd":
        opt = torch.optim.SGD([{"params": decay, "weight_decay": c["wd"]}, {"params": rest, "weight_decay": 0.0}],
                              lr=c["lr"], momentum=c["momentum"], nesterov=c["nesterov"], foreach=True)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=c["lr"], betas=(0.9, 0.999), eps=1e-8, foreach=True)
    loss_fn = F.cross_entropy if a.kind != "denoise" else F.mse_loss

    def step_fn(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = loss_fn(model(x).float(), y)
        loss.backward()
        return loss

    fn = torch.compile(step_fn) if a.compile else step_fn
    b = c["batch"]
    spe = math.ceil(len(xtr) / b)
    total = spe * a.epochs
    warm_steps = min(a.warmup_steps, total - 1)
    gen = torch.Generator().manual_seed(a.seed)
    model.train()
    s = 0
    t0 = c0 = None
    timed = 0
    for _ in range(a.epochs):
        perm = torch.randperm(len(xtr), generator=gen)
        for i in range(spe):
            if s == warm_steps:
                t0, c0 = time.perf_counter(), time.process_time()
            lr = c["lr"]
            if c["sched"] == "cosine":
                lr = c["lr"] * 0.5 * (1 + math.cos(math.pi * min(s, total) / total))
            if s < c["warm"]:
                lr *= (s + 1) / c["warm"]
            for g in opt.param_groups:
                g["lr"] = lr
            sel = perm[i * b:(i + 1) * b]
            opt.zero_grad(set_to_none=True)
            fn(xtr[sel], ytr[sel])
            opt.step()
            if t0 is not None:
                timed += len(sel)
            s += 1
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0

    model.eval()
    with torch.inference_mode():
        preds = torch.cat([model(xte[i:i + 500]) for i in range(0, len(xte), 500)])
    if a.kind == "denoise":
        mse = ((preds.double() - yte.double()) ** 2).flatten(1).mean(1)
        q = torch.where(mse > 0, (10 * torch.log10(1 / mse)).clamp(max=100), torch.full_like(mse, 100.0)).mean().item()
        metric = "psnr"
    else:
        q = (preds.argmax(1) == yte).double().mean().item()
        metric = "accuracy"
    print(json.dumps({"kind": a.kind, "steps": total, "timed_steps": total - warm_steps, "samplesPerSecond": timed / dt,
                      "cpuMsPerStep": 1000 * cpu / (total - warm_steps), "metric": metric, "quality": q,
                      "channels_last": a.channels_last, "compile": a.compile, "bf16": a.bf16, "threads": torch.get_num_threads(),
                      "torch": torch.__version__, "train": len(xtr), "test": len(xte)}))


if __name__ == "__main__":
    sys.exit(main())
