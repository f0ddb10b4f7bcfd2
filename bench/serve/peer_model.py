"""A dlk bundle's network in numpy, for the servers dlk serve is compared with (Triton through
nvidia-pytriton, MLServer): the same weights (weights.safetensors), the same architecture and input
scaling (model.json), computed with numpy's own BLAS. `python3 peer_model.py BUNDLE LOGITS.f32 N`
checks it against logits that tests/tools/forward wrote for the first N test images."""
import io
import json
import struct
import sys
import tarfile

import numpy as np


class BundleModel:
    def __init__(self, path):
        with tarfile.open(path) as t:
            meta = json.load(t.extractfile("model.json"))
            raw = t.extractfile("weights.safetensors").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        data = raw[8 + n:]
        tensors = {}
        for name, t in header.items():
            if name == "__metadata__":
                continue
            b, e = t["data_offsets"]
            tensors[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(t["shape"])
        arch = meta["architecture"]
        self.name = meta["name"]
        self.input = arch["input"]
        self.classes = arch["n_classes"]
        sc = meta.get("input_scaling", {"scale": 1.0, "mean": 0.0, "std": 1.0})
        self.scale, self.mean, self.std = (np.float32(sc["scale"]), np.float32(sc["mean"]), np.float32(sc["std"]))
        self.layers = []
        for i, layer in enumerate(arch["layers"]):
            kind = layer["kind"]
            w, b = tensors.get(f"layers.{i}.weight"), tensors.get(f"layers.{i}.bias")
            if kind == "dense":
                self.layers.append(("dense", np.ascontiguousarray(w.T), b))
            elif kind == "conv2d":
                self.layers.append(("conv2d", w, b, layer.get("stride", 1), layer.get("padding", 0)))
            elif kind == "maxpool":
                self.layers.append(("maxpool", layer.get("size", 2), layer.get("stride", layer.get("size", 2))))
            elif kind in ("relu", "tanh", "sigmoid", "flatten"):
                self.layers.append((kind,))
            elif kind == "dropout":
                pass  # inference: identity
            else:
                raise ValueError(f"layer kind {kind} is not implemented here")

    def forward(self, x):
        """raw inputs (any numeric dtype), [N, C, H, W] or [N, C*H*W] -> logits [N, classes]"""
        n = x.shape[0]
        x = (x.astype(np.float32).reshape(n, *self.input) * self.scale - self.mean) / self.std
        for layer in self.layers:
            kind = layer[0]
            if kind == "dense":
                x = x.reshape(n, -1) @ layer[1] + layer[2]
            elif kind == "conv2d":
                w, b, stride, pad = layer[1:]
                f, c, k, _ = w.shape
                if pad:
                    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
                win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
                oh, ow = win.shape[2], win.shape[3]
                cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * k * k)
                x = (cols @ w.reshape(f, -1).T + b).reshape(n, oh, ow, f).transpose(0, 3, 1, 2)
            elif kind == "maxpool":
                size, stride = layer[1:]
                win = np.lib.stride_tricks.sliding_window_view(x, (size, size), axis=(2, 3))[:, :, ::stride, ::stride]
                x = win.max(axis=(4, 5))
            elif kind == "relu":
                x = np.maximum(x, 0)
            elif kind == "tanh":
                x = np.tanh(x)
            elif kind == "sigmoid":
                x = 1 / (1 + np.exp(-x))
        return np.ascontiguousarray(x.reshape(n, -1), dtype=np.float32)


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


if __name__ == "__main__":
    import gzip
    bundle, logits, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    m = BundleModel(bundle)
    d = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
    x = np.frombuffer(d, dtype=np.uint8, offset=16)[:784 * n].reshape(n, 1, 28, 28)
    want = np.fromfile(logits, dtype=np.float32).reshape(n, -1)
    got = m.forward(x)
    if not np.allclose(got, want, rtol=1e-3, atol=1e-4):
        sys.exit(f"peer model differs from dlk: max |diff| {np.abs(got - want).max()}")
    print(f"{m.name}: the numpy peer model matches dlk's forward pass on {n} images (max |diff| {np.abs(got - want).max():.2e})")
