#!/usr/bin/env python3
"""dlk serve answered by clients nobody here wrote: the real tritonclient[http] (its default binary
tensors, and JSON), KServe's Python SDK REST client (V2 and V1), each compared with dlk's own
in-process forward pass (tests/tools/forward) on the same Fashion-MNIST test images.

    clients.py CASE --url HOST:PORT --model NAME --images IDX.gz --labels IDX.gz
               --logits FORWARD.f32 --n N [--classes a,b,...] [--expect-correct K]

Exits 0 when the case holds, 1 with a message when it does not."""
import argparse
import asyncio
import gzip
import json
import struct
import sys

import numpy as np

RTOL, ATOL = 1e-4, 1e-5  # a batch of a different height rounds differently in OpenBLAS


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_idx(path, n):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)
    return arr[:n]


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def same(name, got, want):
    got = np.asarray(got, dtype=np.float32).reshape(want.shape)
    if not np.allclose(got, want, rtol=RTOL, atol=ATOL):
        i = np.unravel_index(np.argmax(np.abs(got - want)), want.shape)
        fail(f"{name}: differs from the in-process forward pass at {i}: {got[i]} vs {want[i]}")
    if not (got.argmax(axis=1) == want.argmax(axis=1)).all():
        fail(f"{name}: a predicted class differs from the in-process forward pass")


def triton_binary(a, images, want):
    import tritonclient.http as th
    c = th.InferenceServerClient(url=a.url)
    for rows in (1, 7, len(images)):
        x = images[:rows].reshape(rows, 1, 28, 28)
        inp = th.InferInput("input", list(x.shape), "UINT8")
        inp.set_data_from_numpy(x)  # binary by default
        r = c.infer(a.model, [inp], request_id=f"bin-{rows}")  # no outputs given: all, binary
        if r.get_response().get("id") != f"bin-{rows}":
            fail("the request id was not echoed")
        same(f"logits of {rows} rows", r.as_numpy("logits"), want[:rows])
        same(f"probabilities of {rows} rows", r.as_numpy("probabilities"), softmax(want[:rows]))
    # raw pixel values as FP32 and the flat [N, 784] shape give the same answer
    x = images.reshape(len(images), 784).astype(np.float32)
    inp = th.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    out = th.InferRequestedOutput("logits", binary_data=True)
    r = c.infer(a.model, [inp], outputs=[out])
    same("logits from FP32 [N,784]", r.as_numpy("logits"), want)
    if r.as_numpy("probabilities") is not None:
        fail("an output that was not requested was answered")


def triton_json(a, images, want):
    import tritonclient.http as th
    c = th.InferenceServerClient(url=a.url)
    x = images.reshape(len(images), 1, 28, 28)
    inp = th.InferInput("input", list(x.shape), "UINT8")
    inp.set_data_from_numpy(x, binary_data=False)
    outs = [th.InferRequestedOutput("probabilities", binary_data=False),
            th.InferRequestedOutput("logits", binary_data=False)]
    r = c.infer(a.model, [inp], outputs=outs)
    resp = r.get_response()
    if any("parameters" in o for o in resp["outputs"]):
        fail("JSON outputs were asked for, binary ones came back")
    same("logits (JSON)", r.as_numpy("logits"), want)
    same("probabilities (JSON)", r.as_numpy("probabilities"), softmax(want))


def triton_classification(a, images, want):
    import tritonclient.http as th
    c = th.InferenceServerClient(url=a.url)
    classes = a.classes.split(",") if a.classes else None
    for binary in (True, False):
        x = images.reshape(len(images), 1, 28, 28)
        inp = th.InferInput("input", list(x.shape), "UINT8")
        inp.set_data_from_numpy(x, binary_data=binary)
        out = th.InferRequestedOutput("probabilities", binary_data=binary, class_count=3)
        r = c.infer(a.model, [inp], outputs=[out])
        got = r.as_numpy("probabilities")
        if got.shape != (len(images), 3):
            fail(f"classification shape {got.shape}, wanted {(len(images), 3)}")
        probs = softmax(want)
        for i in range(len(images)):
            top = np.argsort(-probs[i], kind="stable")[:3]
            for j in range(3):
                s = got[i][j].decode() if isinstance(got[i][j], bytes) else str(got[i][j])
                parts = s.split(":", 2)
                if int(parts[1]) != top[j] or abs(float(parts[0]) - probs[i][top[j]]) > 1e-5:
                    fail(f"row {i} class {j}: '{s}', wanted index {top[j]} with {probs[i][top[j]]:.6f}")
                if classes and (len(parts) < 3 or parts[2] != classes[top[j]]):
                    fail(f"row {i}: '{s}' lacks the label '{classes[top[j]]}'")


def triton_meta(a, images, want):
    import tritonclient.http as th
    c = th.InferenceServerClient(url=a.url)
    if not (c.is_server_live() and c.is_server_ready() and c.is_model_ready(a.model)):
        fail("live, ready and model ready should all be true")
    if c.is_model_ready("no-such-model"):
        fail("an unknown model is ready")
    meta = c.get_server_metadata()
    for ext in ("binary_tensor_data", "classification"):
        if ext not in meta["extensions"]:
            fail(f"extension {ext} is not advertised: {meta}")
    m = c.get_model_metadata(a.model)
    if m["inputs"][0]["name"] != "input" or m["inputs"][0]["shape"] != [-1, 1, 28, 28]:
        fail(f"model metadata: {m}")
    if [o["name"] for o in m["outputs"]] != ["probabilities", "logits"] or m["outputs"][0]["shape"] != [-1, want.shape[1]]:
        fail(f"model metadata outputs: {m['outputs']}")
    try:
        c.get_model_metadata("no-such-model")
        fail("metadata of an unknown model")
    except th.InferenceServerException as e:
        if e.status() != "404" or "no-such-model" not in e.message():
            fail(f"unknown model: {e.status()} {e.message()}")
    # a request the model cannot take comes back as the client's exception with the server's words
    inp = th.InferInput("input", [1, 28, 29], "UINT8")
    inp.set_data_from_numpy(np.zeros((1, 28, 29), dtype=np.uint8))
    try:
        c.infer(a.model, [inp])
        fail("a wrong shape was accepted")
    except th.InferenceServerException as e:
        if e.status() != "400" or "[-1,1,28,28]" not in e.message():
            fail(f"wrong shape: {e.status()} {e.message()}")


def kserve_v2(a, images, want):
    from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig

    async def run():
        client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=60))
        base = "http://" + a.url
        try:
            if not (await client.is_server_live(base) and await client.is_server_ready(base)
                    and await client.is_model_ready(base, a.model)):
                fail("KServe client: live, ready or model ready is false")
            x = images.reshape(len(images), 1, 28, 28).astype(np.float32)
            inp = InferInput(name="input", shape=list(x.shape), datatype="FP32")
            inp.set_data_from_numpy(x, binary_data=False)
            req = InferRequest(model_name=a.model, infer_inputs=[inp], request_id="kserve-1")
            res = await client.infer(base, req, model_name=a.model)
            if res.id != "kserve-1":
                fail(f"KServe client: id {res.id!r}")
            outs = {o.name: o.as_numpy() for o in res.outputs}
            same("KServe V2 logits", outs["logits"], want)
            same("KServe V2 probabilities", outs["probabilities"], softmax(want))
            # binary input through the SDK
            inp = InferInput(name="input", shape=list(x.shape), datatype="FP32")
            inp.set_data_from_numpy(x, binary_data=True)
            res = await client.infer(base, InferRequest(model_name=a.model, infer_inputs=[inp]), model_name=a.model)
            same("KServe V2 logits (binary input)", {o.name: o.as_numpy() for o in res.outputs}["logits"], want)
        finally:
            await client.close()

    asyncio.run(run())


def kserve_v1(a, images, want):
    from kserve import InferenceRESTClient, RESTConfig

    async def run():
        client = InferenceRESTClient(RESTConfig(protocol="v1", retries=0, timeout=60))
        base = "http://" + a.url
        try:
            if not await client.is_model_ready(base, a.model):
                fail("KServe V1: the model is not ready")
            rows = images.reshape(len(images), 1, 28, 28).tolist()
            res = await client.infer(base, {"instances": rows}, model_name=a.model)
            same("KServe V1 predictions", [p["logits"] for p in res["predictions"]], want)
            res = await client.infer(base, {"inputs": {"input": images.reshape(len(images), 784).tolist()}},
                                     model_name=a.model)
            same("KServe V1 columnar outputs", res["outputs"]["logits"], want)
        finally:
            await client.close()

    asyncio.run(run())


def accuracy(a, images, want):
    """every test image through the server, binary UINT8 in concurrent requests of 50 rows"""
    import tritonclient.http as th
    labels = read_idx(a.labels, len(images))
    c = th.InferenceServerClient(url=a.url, concurrency=8)
    pending = []
    for s in range(0, len(images), 50):
        x = images[s:s + 50].reshape(-1, 1, 28, 28)
        inp = th.InferInput("input", list(x.shape), "UINT8")
        inp.set_data_from_numpy(x)
        pending.append(c.async_infer(a.model, [inp], outputs=[th.InferRequestedOutput("logits")]))
    logits = np.concatenate([p.get_result().as_numpy("logits") for p in pending])
    same("logits of every test image", logits, want)
    correct = int((logits.argmax(axis=1) == labels).sum())
    print(f"{correct} of {len(images)} correct through the server")
    if a.expect_correct is not None and correct != a.expect_correct:
        fail(f"{correct} correct, but the bundle records {a.expect_correct}")


def counters(a):
    import urllib.request
    text = urllib.request.urlopen(f"http://{a.url}/metrics").read().decode()
    got = {}
    for line in text.splitlines():
        for name in ("dlk_inference_count_total", "dlk_inference_exec_count_total"):
            if line.startswith(f'{name}{{model="{a.model}"}} '):
                got[name] = int(line.split()[-1])
    return got["dlk_inference_count_total"], got["dlk_inference_exec_count_total"]


def batching(a, images, want):
    """one-row requests from 16 clients at once share forward passes"""
    import threading
    import tritonclient.http as th
    rows0, passes0 = counters(a)
    # 16 threads, each with its own client (one connection), released together: tritonclient's
    # async_infer runs on gevent, which may send a request only after the previous one returned
    start = threading.Barrier(16)
    errors = []

    def client(k):
        c = th.InferenceServerClient(url=a.url)
        try:
            start.wait()
            for i in range(k, 256, 16):
                j = i % len(images)
                inp = th.InferInput("input", [1, 1, 28, 28], "UINT8")
                inp.set_data_from_numpy(images[j].reshape(1, 1, 28, 28))
                same(f"row {j} of a shared pass", c.infer(a.model, [inp]).as_numpy("logits"), want[j:j + 1])
        except BaseException as e:  # noqa: BLE001 (reported below, on the main thread)
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    rows, passes = counters(a)
    rows, passes = rows - rows0, passes - passes0
    print(f"256 one-row requests ran in {passes} forward passes (average batch {rows / passes:.1f})")
    if rows != 256 or passes >= rows:
        fail(f"no batching: {rows} rows in {passes} passes")


def triton_contract(a, images, want):
    """The input contract through tritonclient: the metadata says the input takes raw pixels;
    x / 255 as FP32 (what a Triton user sends) is refused with a 400 naming the contract, then
    accepted when the request declares parameters={"input_form": "preprocessed"}, and scores the
    bundle's accuracy over every image (--expect-correct)."""
    import tritonclient.http as th
    c = th.InferenceServerClient(url=a.url)
    p = c.get_model_metadata(a.model)["inputs"][0].get("parameters", {})
    if p.get("input_form") != "raw" or p.get("raw_range") != [0, 255] or "preprocessed" not in p.get("input_forms", []):
        fail(f"the model metadata does not state the input contract: {p}")
    labels = read_idx(a.labels, a.n)
    x = images.reshape(len(images), 1, 28, 28).astype(np.float32) / np.float32(255)
    for binary in (True, False):
        inp = th.InferInput("input", [64, 1, 28, 28], "FP32")
        inp.set_data_from_numpy(x[:64], binary_data=binary)
        try:
            c.infer(a.model, [inp])
            fail(f"x/255 sent as FP32 ({'binary' if binary else 'JSON'}) to a raw-pixel input was answered")
        except th.InferenceServerException as e:
            if e.status() != "400" or "raw pixels 0..255" not in e.message() or "input_form" not in e.message():
                fail(f"x/255 refused, but not for the contract: {e.status()} {e.message()}")
    correct, logits = 0, []
    for s in range(0, len(x), 500):
        inp = th.InferInput("input", list(x[s:s + 500].shape), "FP32")
        inp.set_data_from_numpy(x[s:s + 500])
        r = c.infer(a.model, [inp], outputs=[th.InferRequestedOutput("logits")],
                    parameters={"input_form": "preprocessed"})
        got = r.as_numpy("logits")
        logits.append(got)
        correct += int((got.argmax(axis=1) == labels[s:s + 500]).sum())
    # x/255 in float32 and the server's (x * (1/255)) differ in the last bit of a few pixels:
    # the logits agree within the clients' tolerance, the classes exactly
    same("logits of x/255 declared preprocessed", np.concatenate(logits), want)
    print(f"x/255 declared preprocessed: {correct}/{len(x)} correct")
    if a.expect_correct is not None and correct != a.expect_correct:
        fail(f"x/255 declared preprocessed scored {correct}, the bundle recorded {a.expect_correct}")


CASES = {f.__name__.replace("_", "-"): f for f in
         (triton_binary, triton_json, triton_classification, triton_meta, kserve_v2, kserve_v1, accuracy, batching,
          triton_contract)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--labels")
    p.add_argument("--logits", required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--classes")
    p.add_argument("--expect-correct", type=int)
    a = p.parse_args()
    images = read_idx(a.images, a.n)
    want = np.fromfile(a.logits, dtype=np.float32).reshape(a.n, -1)
    CASES[a.case](a, images, want)


if __name__ == "__main__":
    main()
