# Writes the image fixtures of tests/unit/test_data_image.c with Pillow (an encoder and decoder
# independent of dlk's): each NAME.png/NAME.jpg beside NAME.L.u8 and NAME.RGB.u8, the pixels Pillow
# decodes for convert("L") and convert("RGB"), row-major, channels interleaved.
# Run: .deps/frameworks/bin/python tests/data/images/make.py tests/data/images
import gzip, os, random, sys
from PIL import Image

out = sys.argv[1]
rnd = random.Random(27)

def fmnist_first():
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
        f.read(16)
        return Image.frombytes("L", (28, 28), f.read(784))

def noise(mode, w, h):
    n = {"L": 1, "RGB": 3, "RGBA": 4, "LA": 2}[mode]
    return Image.frombytes(mode, (w, h), bytes(rnd.randrange(256) for _ in range(w * h * n)))

imgs = {
    "fmnist_gray.png": (fmnist_first(), {}),
    "fmnist_gray.jpg": (fmnist_first(), {"quality": 90}),
    "noise_rgb.png": (noise("RGB", 7, 5), {}),
    "noise_rgba.png": (noise("RGBA", 6, 4), {}),
    "noise_la.png": (noise("LA", 3, 9), {}),
    "noise_pal.png": (noise("RGB", 8, 8).quantize(16), {}),
    "noise_rgb.jpg": (noise("RGB", 17, 11), {"quality": 85}),
    "noise_rgb_420.jpg": (noise("RGB", 16, 16), {"quality": 75, "subsampling": 2}),
}
for name, (im, kw) in imgs.items():
    path = os.path.join(out, name)
    im.save(path, **kw)
    back = Image.open(path)
    back.load()
    stem = os.path.join(out, name.replace(".", "_"))
    with open(stem + ".L.u8", "wb") as f:
        f.write(back.convert("L").tobytes())
    with open(stem + ".RGB.u8", "wb") as f:
        f.write(back.convert("RGB").tobytes())
# a 16-bit gray PNG: Pillow reads it as mode I;16 / I; convert("L") clips, so the expected
# 8-bit value is written by hand: libpng's scaling of v16 to round(v16 / 257)
vals = [0, 257, 65535, 32768, 1000, 40000]
im16 = Image.new("I;16", (3, 2))
im16.putdata(vals)
im16.save(os.path.join(out, "gray16.png"))
with open(os.path.join(out, "gray16_png.L.u8"), "wb") as f:
    f.write(bytes(round(v / 257) for v in vals))
