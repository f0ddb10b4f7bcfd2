#!/usr/bin/env python3
"""An RGB image model trained with per-channel normalisation, served by dlk: its metadata lists each
channel's mean and std; every image of a test folder (one sub-folder per class, sorted = the class
order) is sent as raw pixels (UINT8, planar C x H x W) to the V2 route and its classes counted; TF
Serving's rows give the same classes; the same images normalised by the client with the metadata's
values and declared preprocessed give the same classes; undeclared, they are refused with a 400 that
names the per-channel contract.

    channel_client.py --url HOST:PORT --model NAME --folder TEST --mean M,M,M --std S,S,S [--expect-correct K]

Prints "N/M correct"; exits 1 with a message when a check fails."""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

import numpy as np
from PIL import Image


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def v2_classes(a, x, datatype, params=None):
    body = {"inputs": [{"name": "input", "shape": list(x.shape), "datatype": datatype, "data": x.ravel().tolist()}],
            "outputs": [{"name": "probabilities"}]}
    if params:
        body["parameters"] = params
    st, ans = post(f"http://{a.url}/v2/models/{a.model}/infer", body)
    if st != 200:
        return st, ans
    p = np.array(ans["outputs"][0]["data"]).reshape(x.shape[0], -1)
    return st, list(p.argmax(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--folder", required=True)
    p.add_argument("--mean", required=True)
    p.add_argument("--std", required=True)
    p.add_argument("--expect-correct", type=int)
    a = p.parse_args()
    mean = np.array([float(v) for v in a.mean.split(",")], dtype=np.float32)
    std = np.array([float(v) for v in a.std.split(",")], dtype=np.float32)

    with urllib.request.urlopen(f"http://{a.url}/v2/models/{a.model}") as r:
        prm = json.loads(r.read())["inputs"][0]["parameters"]
    if not np.allclose(prm.get("channel_mean", []), mean, atol=1e-6) or \
            not np.allclose(prm.get("channel_std", []), std, atol=1e-6) or prm.get("raw_range") != [0, 255]:
        fail(f"the metadata does not list the per-channel mean and std: {prm}")

    xs, ys = [], []
    for k, d in enumerate(sorted(os.listdir(a.folder))):
        for f in sorted(os.listdir(os.path.join(a.folder, d))):
            im = np.asarray(Image.open(os.path.join(a.folder, d, f)).convert("RGB"), dtype=np.uint8)
            xs.append(im.transpose(2, 0, 1))  # H x W x C -> C x H x W, as dlk's input
            ys.append(k)
    x = np.stack(xs)
    got = []
    for s in range(0, len(x), 100):
        st, cls = v2_classes(a, x[s:s + 100], "UINT8")
        if st != 200:
            fail(f"raw pixels refused: {st} {cls}")
        got += cls

    st, ans = post(f"http://{a.url}/v1/models/{a.model}:predict", {"instances": x[:20].tolist()})
    if st != 200 or [int(np.argmax(q["probabilities"])) for q in ans["predictions"]] != got[:20]:
        fail(f"TF Serving's rows of raw pixels were classified otherwise: {st}")

    # what a PyTorch user sends: ToTensor() then Normalize(mean, std), in float32
    norm = ((x[:100].astype(np.float32) / np.float32(255)) - mean[None, :, None, None]) / std[None, :, None, None]
    st, cls = v2_classes(a, norm.astype(np.float32), "FP32", {"input_form": "preprocessed"})
    if st != 200 or cls != got[:100]:
        fail(f"normalised images declared preprocessed were classified otherwise: {st}")
    st, ans = v2_classes(a, norm.astype(np.float32), "FP32")
    if st != 400 or "mean[c]) / std[c]" not in ans.get("error", ""):
        fail(f"normalised images sent undeclared were not refused naming the per-channel contract: {st} {ans}")

    correct = sum(int(g == y) for g, y in zip(got, ys))
    print(f"{correct}/{len(x)} correct")
    if a.expect_correct is not None and correct != a.expect_correct:
        fail(f"the server classified {correct} correctly, the bundle recorded {a.expect_correct}")


if __name__ == "__main__":
    main()
