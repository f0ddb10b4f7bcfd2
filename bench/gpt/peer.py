"""The PyTorch peer of bench/gpt/run.sh: examples/gpt/dlk.yaml's GPT in PyTorch on the CPU.

Byte tokens (id = 1 + byte, 257 ids), the same split as dlk (the last f of the tokens, cut at
n - floor(n f)), the same packing (sequences of T inputs and T next-token targets, consecutive
sequences sharing one token, a short tail dropped), shuffled by the seed; GPT-2's initialisation
as nanoGPT's (every nn.Linear and nn.Embedding weight N(0, 0.02^2), biases 0, each block's two
residual projections N(0, (0.02 / sqrt(2 L))^2), layer norms 1 and 0); wte and wpe, 4 pre-norm blocks of 4-head causal attention
(F.scaled_dot_product_attention(is_causal=True)) and a 512-wide GELU (tanh) MLP, a final layer
norm, the head tied to wte; AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.1 on the
matrices and tables, not on biases and norms), dlk's schedule (cosine to 1e-4 over the run times
the warm-up factor min(1, (step + 1) / 100)), gradient clipping at 1.

  python peer.py TEXT [--compile] [--bf16] [--threads 2] [--warmup-steps 3] [--seed 1]

prints one JSON line: steps, tokens/s over the steps after the first --warmup-steps (where
torch.compile compiles), the validation loss after the run, the configuration."""
import argparse
import contextlib
import json
import math
import os
import sys
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

V, D, T, H, L, FF = 257, 128, 128, 4, 4, 512


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, FF)
        self.out = nn.Linear(FF, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        # GPT-2's initialisation, as nanoGPT's _init_weights (dlk's model.init: gpt2)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for blk in self.blocks:  # each residual branch's last projection
            nn.init.normal_(blk.proj.weight, std=0.02 / math.sqrt(2 * L))
            nn.init.normal_(blk.out.weight, std=0.02 / math.sqrt(2 * L))

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the tied head
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def pack(ids):
    n = (len(ids) - 1) // T
    x = torch.stack([ids[i * T:i * T + T] for i in range(n)]) if n else torch.empty(0, T, dtype=torch.long)
    y = torch.stack([ids[i * T + 1:i * T + T + 1] for i in range(n)]) if n else x
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("text")
    ap.add_argument("--validation", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--bf16", action="store_true", help="autocast the model to bfloat16 (PyTorch's CPU mixed precision)")
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    assert not torch.cuda.is_available(), "a CUDA device is visible: this bench is for the CPU"
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
    torch.manual_seed(a.seed)

    data = open(a.text, "rb").read()
    ids = torch.tensor(list(data), dtype=torch.long) + 1
    n = len(ids)
    cut = n - int(n * a.validation)
    xtr, ytr = pack(ids[:cut])
    xva, yva = pack(ids[cut:])
    steps = math.ceil(len(xtr) / a.batch)
    a.warmup_steps = min(a.warmup_steps, steps - 1)

    model = GPT()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.999), eps=1e-8, foreach=True)
    lr, min_lr, warm = 1e-3, 1e-4, 100

    # training.precision: bf16's counterpart: torch.autocast runs the linear layers (and attention)
    # in bfloat16 on the CPU, with fp32 parameters, gradients and AdamW state
    cast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.bf16 else contextlib.nullcontext

    def step_fn(x, y):
        with cast():
            loss = model(x, y)
        loss.backward()
        return loss

    fn = torch.compile(step_fn) if a.compile else step_fn
    perm = torch.randperm(len(xtr))
    t0 = None
    for s in range(steps):
        if s == a.warmup_steps:
            t0 = time.perf_counter()
            timed_tokens = 0
        sel = perm[s * a.batch:(s + 1) * a.batch]
        for g in opt.param_groups:
            g["lr"] = (min_lr + (lr - min_lr) * (1 + math.cos(math.pi * s / steps)) / 2) * min(1.0, (s + 1) / warm)
        opt.zero_grad(set_to_none=True)
        fn(xtr[sel], ytr[sel])
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if t0 is not None:
            timed_tokens += len(sel) * T
    dt = time.perf_counter() - t0
    with torch.inference_mode(), cast():
        tot = 0.0
        for i in range(0, len(xva), a.batch):
            tot += model(xva[i:i + a.batch], yva[i:i + a.batch]).item() * len(xva[i:i + a.batch])
        val = tot / len(xva)
    print(json.dumps({"steps": steps, "timed_steps": steps - a.warmup_steps, "tokensPerSecond": timed_tokens / dt,
                      "valLoss": val, "compile": a.compile, "bf16": a.bf16, "threads": torch.get_num_threads(),
                      "torch": torch.__version__, "train_seqs": len(xtr), "val_seqs": len(xva),
                      "preload": os.environ.get("LD_PRELOAD", "")}))


if __name__ == "__main__":
    sys.exit(main())
