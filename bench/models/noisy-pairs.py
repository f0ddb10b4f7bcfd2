# Writes Fashion-MNIST (Debian's dataset-fashion-mnist, or the four idx files from
# github.com/zalandoresearch/fashion-mnist) as paired folders for bench/models/run.sh, so that dlk
# and PyTorch train the denoiser of `dlk init --example denoise` on the same noisy files (the
# example itself has dlk draw its noise, data.images.noise):
# pairs/SPLIT/noisy/KEY.png, the image with Gaussian noise (sigma 51 of 255, clipped to 0..255,
# drawn from SEED), and pairs/SPLIT/clean/KEY.png, the image itself. Needs Pillow.
# Prints, per split, the PSNR of the noisy inputs against the clean images (dB, range 1, the mean
# over images, as dlk reports it): the figure a denoiser must beat.
# Usage: python3 noisy-pairs.py [FASHION_MNIST_DIR [N_TRAIN [N_TEST [OUT [SEED]]]]]
# (defaults: /usr/share/datasets/fashion-mnist, 20000, 2000, pairs, 1)
import gzip, math, os, random, sys

try:
    from PIL import Image
except ImportError:
    sys.exit("error: Pillow is needed to write PNG files: apt install python3-pil (or pip install pillow)")

a = sys.argv[1:]
fm = a[0] if len(a) > 0 else "/usr/share/datasets/fashion-mnist"
counts = {"train": int(a[1]) if len(a) > 1 else 20000, "test": int(a[2]) if len(a) > 2 else 2000}
out = a[3] if len(a) > 3 else "pairs"
seed = int(a[4]) if len(a) > 4 else 1

for split, prefix in (("train", "train"), ("test", "t10k")):
    path = os.path.join(fm, prefix + "-images-idx3-ubyte.gz")
    if not os.path.exists(path):
        sys.exit(f"error: {path} not found: apt install dataset-fashion-mnist, or give the folder "
                 "holding the Fashion-MNIST idx files")
    n = counts[split]
    with gzip.open(path) as f:
        head = f.read(16)
        have = int.from_bytes(head[4:8], "big")
        if n > have:
            sys.exit(f"error: {path} holds {have} images, fewer than the {n} asked for")
        pixels = f.read(784 * n)
    rng = random.Random(seed * 2 + (split == "test"))
    for d in ("noisy", "clean"):
        os.makedirs(os.path.join(out, split, d), exist_ok=True)
    total = 0.0
    for i in range(n):
        clean = pixels[784 * i:784 * (i + 1)]
        noisy = bytes(min(255, max(0, round(v + rng.gauss(0, 51)))) for v in clean)
        mse = sum((x - y) ** 2 for x, y in zip(noisy, clean)) / (255.0 * 255.0 * 784)
        total += min(100.0, 10 * math.log10(1 / mse)) if mse > 0 else 100.0
        Image.frombytes("L", (28, 28), noisy).save(os.path.join(out, split, "noisy", f"{i:06d}.png"))
        Image.frombytes("L", (28, 28), clean).save(os.path.join(out, split, "clean", f"{i:06d}.png"))
    print(f"{split}: {n} pairs in {out}/{split}, noisy input PSNR {total / n:.2f} dB")
