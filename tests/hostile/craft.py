#!/usr/bin/env python3
"""Crafts hostile model bundles from a good one, and talks raw HTTP where curl will not: the
drill of tests/shell/t1460-hostile.sh. Standard library only.

    craft.py set IN OUT KEY.PATH JSON        a field of model.json (dots descend into objects)
    craft.py rename IN OUT OLD NEW           a tensor of weights.safetensors renamed
    craft.py scale IN OUT FACTOR             every weight (not bias) tensor multiplied
    craft.py arch IN OUT ARCH_JSON           another architecture, with small weights of its shapes
    craft.py http PORT CASE                  a raw request; prints the status line, or 'closed'

The weights' sha256 and size in model.json follow every change to them."""
import hashlib
import io
import json
import socket
import struct
import sys
import tarfile


def read_bundle(path):
    with tarfile.open(path) as t:
        meta = json.loads(t.extractfile("model.json").read())
        wts = t.extractfile("weights.safetensors").read()
    return meta, wts


def write_bundle(path, meta, wts):
    meta["weights"]["sha256"] = hashlib.sha256(wts).hexdigest()
    meta["weights"]["bytes"] = len(wts)
    js = json.dumps(meta, ensure_ascii=False).encode("utf-8", "surrogateescape")
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in (("model.json", js), ("weights.safetensors", wts)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def split_st(wts):
    hl = struct.unpack("<Q", wts[:8])[0]
    return json.loads(wts[8:8 + hl]), wts[8 + hl:]


def join_st(header, data):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def shapes(arch):
    """[(name, shape)] of the parameters, as lib/train/bundle.c names them"""
    c, h, w = arch["input"]
    out = []
    for i, l in enumerate(arch["layers"]):
        k = l["kind"]
        if k == "dense":
            n = c * h * w
            out += [("layers.%d.weight" % i, [l["units"], n]), ("layers.%d.bias" % i, [l["units"]])]
            c, h, w = 1, 1, l["units"]
        elif k == "conv2d":
            kk, p, s = l.get("kernel", 3), l.get("padding", 0), l.get("stride", 1)
            out += [("layers.%d.weight" % i, [l["filters"], c, kk, kk]), ("layers.%d.bias" % i, [l["filters"]])]
            c, h, w = l["filters"], (h + 2 * p - kk) // s + 1, (w + 2 * p - kk) // s + 1
        elif k == "maxpool":
            sz = l.get("size", 2)
            st = l.get("stride", sz)
            h, w = (h - sz) // st + 1, (w - sz) // st + 1
        elif k == "flatten":
            c, h, w = 1, 1, c * h * w
    return out


def http_case(port, case):
    body = b'{"inputs":[]}'
    reqs = {
        "two-lengths": b"POST /v2/models/blobs/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n"
                       b"Content-Length: 40\r\n\r\n" + body,
        "te-and-length": b"POST /v2/models/blobs/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                         b"Content-Length: 13\r\n\r\nd\r\n" + body + b"\r\n0\r\n\r\n",
        "same-lengths": b"POST /v2/models/blobs/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n"
                        b"Content-Length: 13\r\n\r\n" + body,
        "metrics-two-lengths": b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n",
    }
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(reqs[case])
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    if not data:
        print("closed")
        return
    head, body = data.split(b"\r\n\r\n", 1)
    head = head.decode("latin-1")
    lines = head.split("\r\n")
    n = 0
    for line in lines[1:]:
        if line.lower().startswith("content-length:"):
            n = int(line.split(":", 1)[1])
    try:
        while len(body) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    print(lines[0])
    for line in lines[1:]:
        print(line.lower())
    print(body.decode("utf-8", "replace"))


def main():
    cmd = sys.argv[1]
    if cmd == "http":
        http_case(sys.argv[2], sys.argv[3])
        return
    meta, wts = read_bundle(sys.argv[2])
    out = sys.argv[3]
    if cmd == "set":
        o = meta
        keys = sys.argv[4].split(".")
        for k in keys[:-1]:
            o = o.setdefault(k, {})
        o[keys[-1]] = json.loads(sys.argv[5])
    elif cmd == "rename":
        header, data = split_st(wts)
        header[sys.argv[5]] = header.pop(sys.argv[4])
        wts = join_st(header, data)
    elif cmd == "scale":
        header, data = split_st(wts)
        data = bytearray(data)
        for name, t in header.items():
            if name.endswith(".weight"):
                a, b = t["data_offsets"]
                n = (b - a) // 4
                vals = struct.unpack("<%df" % n, data[a:b])
                data[a:b] = struct.pack("<%df" % n, *[v * float(sys.argv[4]) for v in vals])
        wts = join_st(header, bytes(data))
    elif cmd == "arch":
        arch = json.loads(sys.argv[4])
        meta["architecture"].update(arch)
        header, data, n_params = {}, b"", 0
        for name, shape in shapes(meta["architecture"]):
            n = 1
            for d in shape:
                n *= d
            header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + 4 * n]}
            data += struct.pack("<%df" % n, *([0.01] * n))
            n_params += n
        meta["architecture"]["parameters"] = n_params
        wts = join_st(header, data)
    write_bundle(out, meta, wts)


main()
