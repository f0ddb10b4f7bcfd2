# Writes the first N images of a Fashion-MNIST split (Debian's dataset-fashion-mnist) as paired
# folders for image-to-image: OUT/noisy/KEY.png (the image with Gaussian noise, sigma 0.2 of the
# range, clipped) and OUT/clean/KEY.png (the image), both written by Pillow, an encoder
# independent of dlk. Prints the PSNR (dB, range 1, the mean over images, as dlk reports it) of the
# noisy images against the clean ones: what a denoiser must beat.
# Usage: python fmnist-pairs.py {train|test} N OUT [SEED]
import gzip, math, os, random, sys
from PIL import Image

FM = "/usr/share/datasets/fashion-mnist"
split, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
pre = "train" if split == "train" else "t10k"
with gzip.open(f"{FM}/{pre}-images-idx3-ubyte.gz") as f:
    f.read(16)
    pixels = f.read(784 * n)
for d in ("noisy", "clean"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
total = 0.0
for i in range(n):
    clean = pixels[784 * i:784 * (i + 1)]
    noisy = bytes(min(255, max(0, round(v + rng.gauss(0, 51)))) for v in clean)
    mse = sum((a - b) ** 2 for a, b in zip(noisy, clean)) / (255.0 * 255.0 * 784)
    total += min(100.0, 10 * math.log10(1 / mse)) if mse > 0 else 100.0
    Image.frombytes("L", (28, 28), noisy).save(os.path.join(out, "noisy", f"{i:06d}.png"))
    Image.frombytes("L", (28, 28), clean).save(os.path.join(out, "clean", f"{i:06d}.png"))
print("%.3f" % (total / n))
