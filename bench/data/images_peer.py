# The peer of bench/data/images.sh: PyTorch trains the same CNN on the same image folder the way
# its users do, a Dataset that opens each file with Pillow every time a sample is drawn (as
# torchvision's ImageFolder does), the same augmentation (a horizontal flip with probability 1/2,
# a random 28 x 28 crop of the image padded by 2 with zeros), batches of 128 assembled by a
# DataLoader with `--workers` worker processes (0: in the training process) a batch or two ahead,
# Adam (lr 1e-3, PyTorch's fused implementation) on 2 threads. dlk's `-o json samplesPerSecond`
# counts every training step; so does this one (loading included, workers started once). Prints
# one JSON line: samples/s, wall seconds of the training loop, test accuracy, the configuration.
# Usage: python images_peer.py TRAIN_DIR TEST_DIR EPOCHS [--workers N] [--threads 2] [--seed 7]
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from PIL import Image


def listing(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith("."))
    files = []
    for label, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c))):
            if f.lower().endswith((".png", ".jpg", ".jpeg")) and not f.startswith("."):
                files.append((os.path.join(root, c, f), label))
    return files


class Folder(torch.utils.data.Dataset):
    def __init__(self, root, augment, seed):
        self.files = listing(root)
        self.augment = augment
        self.seed = seed

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path, label = self.files[i]
        with Image.open(path) as im:
            a = np.array(im.convert("L"), dtype=np.uint8)
        if a.shape != (28, 28):
            a = np.asarray(Image.fromarray(a).resize((28, 28), Image.BILINEAR), dtype=np.uint8)
        if self.augment:
            # torch's generator: seeded per worker by the DataLoader, as torchvision's transforms are
            if torch.rand(()) < 0.5:
                a = a[:, ::-1]
            p = np.zeros((32, 32), dtype=np.uint8)
            p[2:30, 2:30] = a
            y0, x0 = torch.randint(0, 5, (2,)).tolist()
            a = p[y0:y0 + 28, x0:x0 + 28]
        x = torch.from_numpy(np.ascontiguousarray(a)).to(torch.float32).div_(255.0).unsqueeze(0)
        return x, label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("epochs", type=int)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
    torch.manual_seed(a.seed)
    kw = {"num_workers": a.workers}
    if a.workers:
        kw.update(persistent_workers=True, prefetch_factor=2)
    train = torch.utils.data.DataLoader(Folder(a.train, True, a.seed), batch_size=128, shuffle=True, drop_last=False, **kw)
    test = torch.utils.data.DataLoader(Folder(a.test, False, a.seed), batch_size=500, shuffle=False, **kw)
    m = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=True)
    lossf = nn.CrossEntropyLoss()
    n = 0
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        m.train()
        for xb, yb in train:
            opt.zero_grad(set_to_none=True)
            lossf(m(xb), yb).backward()
            opt.step()
            n += len(yb)
    dt = time.perf_counter() - t0
    m.eval()
    right = total = 0
    with torch.inference_mode():
        for xb, yb in test:
            right += (m(xb).argmax(1) == yb).sum().item()
            total += len(yb)
    print(json.dumps({"samplesPerSecond": n / dt, "trainSeconds": dt, "accuracy": right / total, "workers": a.workers,
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
