"""The prepare stage: the first N samples of each split of raw Fashion-MNIST (IDX files, gzipped),
written as IDX files again. Reads $DLK_INPUT_RAW, writes into $DLK_OUTPUT; the counts come from
the stage's params ($DLK_PARAM_TRAIN_SAMPLES, $DLK_PARAM_TEST_SAMPLES)."""
import gzip
import os
import struct
import sys

src, dst = os.environ["DLK_INPUT_RAW"], os.environ["DLK_OUTPUT"]
want = {"train": int(os.environ.get("DLK_PARAM_TRAIN_SAMPLES", "6000")),
        "t10k": int(os.environ.get("DLK_PARAM_TEST_SAMPLES", "2000"))}


def head(name, n):
    # only the first n samples are decompressed
    with gzip.open(os.path.join(src, name), "rb") as f:
        magic, count = struct.unpack(">II", f.read(8))
        dims = (magic & 0xFF) - 1
        shape_bytes = f.read(4 * dims)
        item = 1
        for d in struct.unpack(">" + "I" * dims, shape_bytes):
            item *= d
        n = min(n, count)
        body = f.read(n * item)
    # mtime=0: the same input gives the same bytes, so the same dataset id
    with gzip.GzipFile(os.path.join(dst, name), "wb", compresslevel=1, mtime=0) as f:
        f.write(struct.pack(">II", magic, n) + shape_bytes + body)
    return n


for split, n in want.items():
    for kind in ("images-idx3-ubyte.gz", "labels-idx1-ubyte.gz"):
        name = f"{split}-{kind}"
        if not os.path.exists(os.path.join(src, name)):
            sys.exit(f"prepare: the raw dataset has no {name}")
        got = head(name, n)
    print(f"prepare: {split}: {got} samples")
