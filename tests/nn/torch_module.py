"""A PyTorch module equivalent to a dlk bundle's graph, built from its model.json: `layers` is an
nn.ModuleList with one module per layer (nn.Identity where dlk's kind has no parameters), so the
bundle's weights.safetensors loads into it by name and shape with load_state_dict(strict=True).
forward() follows the graph's inputs as model.json records them (-1: the model's input).
  python torch_module.py model.json weights.safetensors test.csv out.f32
writes the logits (float32) of the CSV's rows (the features, then the label; no header, scaled
as data.scale 1 reads them), run in eval mode, and prints each batch norm's count."""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file


class Graph(nn.Module):
    def __init__(self, arch):
        super().__init__()
        self.arch = arch
        inp = arch["input"]
        shapes, mods = [], []
        cur = tuple(inp) if arch.get("input_rank", 3) == 3 else (inp[2],)
        for l in arch["layers"]:
            ins = l.get("inputs")
            a = (cur if not ins else (tuple(inp) if ins[0] < 0 else shapes[ins[0]]))
            if not ins and shapes:
                a = shapes[-1]
            k = l["kind"]
            if k == "conv2d":
                m = nn.Conv2d(a[0], l["filters"], l["kernel"], stride=l["stride"], padding=l["padding"],
                              groups=l.get("groups", 1))
                h = (a[1] + 2 * l["padding"] - l["kernel"]) // l["stride"] + 1
                w = (a[2] + 2 * l["padding"] - l["kernel"]) // l["stride"] + 1
                s = (l["filters"], h, w)
            elif k == "convtranspose2d":
                m = nn.ConvTranspose2d(a[0], l["filters"], l["kernel"], stride=l["stride"], padding=l["padding"],
                                       output_padding=l["output_padding"])
                h = (a[1] - 1) * l["stride"] - 2 * l["padding"] + l["kernel"] + l["output_padding"]
                w = (a[2] - 1) * l["stride"] - 2 * l["padding"] + l["kernel"] + l["output_padding"]
                s = (l["filters"], h, w)
            elif k == "avgpool":
                m = nn.AvgPool2d(l["size"], l["stride"], l["padding"])  # count_include_pad=True
                h = (a[1] + 2 * l["padding"] - l["size"]) // l["stride"] + 1
                w = (a[2] + 2 * l["padding"] - l["size"]) // l["stride"] + 1
                s = (a[0], h, w)
            elif k == "batchnorm":
                flat = len(a) == 1 or (a[0] == 1 and a[1] == 1)
                m = (nn.BatchNorm1d(a[-1], eps=l["eps"], momentum=l["momentum"]) if flat else
                     nn.BatchNorm2d(a[0], eps=l["eps"], momentum=l["momentum"]))
                s = a
            elif k == "reshape":
                t = list(l["shape"])
                if -1 in t:
                    t[t.index(-1)] = int(np.prod(a)) // int(-np.prod(t))
                m, s = nn.Identity(), tuple(t)
            elif k == "layernorm":
                m, s = nn.LayerNorm(a[-1], eps=l["eps"]), a
            elif k == "dense":
                n = int(np.prod(a))
                m = nn.Linear(n, l["units"])
                s = (l["units"],)
            elif k == "globalavgpool":
                m, s = nn.Identity(), (a[0],)
            elif k == "flatten":
                m, s = nn.Identity(), (int(np.prod(a)),)
            elif k == "maxpool":
                m = nn.Identity()
                s = (a[0], (a[1] - l["size"]) // l["stride"] + 1, (a[2] - l["size"]) // l["stride"] + 1)
            elif k in ("relu", "tanh", "sigmoid", "add", "dropout"):
                m, s = nn.Identity(), a
            else:
                sys.exit(f"torch_module.py: no module for kind {k}")
            mods.append(m)
            shapes.append(s)
        self.layers = nn.ModuleList(mods)

    def forward(self, x):
        outs = []
        for i, l in enumerate(self.arch["layers"]):
            ins = l.get("inputs")
            a = (x if ins[0] < 0 else outs[ins[0]]) if ins else (outs[-1] if outs else x)
            k, m = l["kind"], self.layers[i]
            if k in ("conv2d", "batchnorm", "convtranspose2d", "avgpool"):
                if k == "batchnorm" and isinstance(m, nn.BatchNorm1d):
                    a = a.reshape(len(a), -1)
                y = m(a)
            elif k == "dense":
                y = m(a.reshape(len(a), -1))
            elif k == "reshape":
                y = a.reshape(len(a), *l["shape"])
            elif k == "layernorm":
                y = m(a)
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
                y = a + (x if ins[1] < 0 else outs[ins[1]])
            elif k == "globalavgpool":
                y = a.mean(dim=(2, 3))
            outs.append(y)
        return outs[-1]


def main():
    arch = json.load(open(sys.argv[1]))["architecture"]
    m = Graph(arch)
    m.load_state_dict(load_file(sys.argv[2]), strict=True)
    m.eval()
    rows = np.loadtxt(sys.argv[3], delimiter=",", dtype=np.float32)
    c, h, w = arch["input"]
    x = torch.from_numpy(rows[:, :-1].copy()).reshape(len(rows), c, h, w)
    with torch.no_grad():
        y = m(x)
    y.numpy().astype(np.float32).tofile(sys.argv[4])
    for i, l in enumerate(arch["layers"]):
        if l["kind"] == "batchnorm":
            print(f"layers.{i}: num_batches_tracked {m.layers[i].num_batches_tracked.item()}, "
                  f"running_var[0] {m.layers[i].running_var[0].item():.4f}")


if __name__ == "__main__":
    main()
