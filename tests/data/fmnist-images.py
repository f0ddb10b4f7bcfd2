# Writes the first N images of a Fashion-MNIST split (Debian's dataset-fashion-mnist) as an image
# folder, one folder per class (0-tshirt, 1-trouser, ...: sorted, they are the labels' order), each
# image a file written by Pillow, an encoder independent of dlk. With --tar, a WebDataset-style
# shard instead: KEY.png (or .jpg) + KEY.cls per sample. With --rgb, RGB images whose channels
# differ: red the pixel x, green 255 - x, blue x // 2 (for per-channel normalisation).
# Usage: python fmnist-images.py {train|test} N png|jpg OUT [--tar] [--rgb]
import gzip, io, os, sys, tarfile
from PIL import Image

FM = "/usr/share/datasets/fashion-mnist"
NAMES = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]
split, n, fmt, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
as_tar = "--tar" in sys.argv[5:]
rgb = "--rgb" in sys.argv[5:]
pre = "train" if split == "train" else "t10k"
with gzip.open(f"{FM}/{pre}-images-idx3-ubyte.gz") as f:
    f.read(16)
    pixels = f.read(784 * n)
with gzip.open(f"{FM}/{pre}-labels-idx1-ubyte.gz") as f:
    f.read(8)
    labels = f.read(n)
tar = tarfile.open(out, "w") if as_tar else None
for i in range(n):
    im = Image.frombytes("L", (28, 28), pixels[784 * i:784 * (i + 1)])
    if rgb:
        im = Image.merge("RGB", (im, im.point(lambda v: 255 - v), im.point(lambda v: v // 2)))
    b = io.BytesIO()
    im.save(b, format="PNG" if fmt == "png" else "JPEG", quality=95)
    data = b.getvalue()
    if tar:
        for name, payload in ((f"{i:06d}.{fmt}", data), (f"{i:06d}.cls", str(labels[i]).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    else:
        d = os.path.join(out, f"{labels[i]}-{NAMES[labels[i]]}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"{i:06d}.{fmt}"), "wb") as f:
            f.write(data)
if tar:
    tar.close()
