"""PyTorch's forward of a dlk model bundle's graph: reads model.json and weights.safetensors
(by name and shape, as torch.load of the bundle's tensors would) and prints the logits of the
rows given as a JSON list on stdin, one JSON list per row."""
import json
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def main():
    model = json.load(open(sys.argv[1]))
    arch = model["architecture"]
    w = load_file(sys.argv[2])
    c, h, wd = arch["input"] if len(arch["input"]) == 3 else (1, 1, arch["input"][0])
    rows = torch.tensor(json.load(sys.stdin), dtype=torch.float32)
    x = rows.reshape(len(rows), c, h, wd) if len(arch["input"]) == 3 else rows
    outs = []
    for i, l in enumerate(arch["layers"]):
        ins = l.get("inputs")
        a = (x if ins[0] < 0 else outs[ins[0]]) if ins else (outs[-1] if outs else x)
        b = None
        if ins and len(ins) == 2:
            b = x if ins[1] < 0 else outs[ins[1]]
        k = l["kind"]
        W, B = w.get(f"layers.{i}.weight"), w.get(f"layers.{i}.bias")
        if k == "conv2d":
            y = F.conv2d(a, W, B, stride=l["stride"], padding=l["padding"])
        elif k == "dense":
            y = F.linear(a.reshape(len(a), -1), W, B)
        elif k == "relu":
            y = F.relu(a)
        elif k == "tanh":
            y = torch.tanh(a)
        elif k == "sigmoid":
            y = torch.sigmoid(a)
        elif k == "maxpool":
            y = F.max_pool2d(a, l["size"], l["stride"])
        elif k == "flatten":
            y = a.reshape(len(a), -1)
        elif k == "dropout":
            y = a
        elif k == "add":
            y = a + b
        elif k == "concat":
            y = torch.cat([a, b], dim=1)
        elif k == "globalavgpool":
            y = a.mean(dim=(2, 3))
        else:
            sys.exit(f"unknown kind {k}")
        outs.append(y)
    for row in outs[-1].tolist():
        print(json.dumps(row))


main()
