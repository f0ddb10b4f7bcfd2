#!/usr/bin/env python3
"""A text model served by dlk, through the real tritonclient[http]: the metadata says the input is
BYTES text; every passage of a JSON Lines file ({"text": ..., "label": ...}) is sent as a BYTES
tensor (binary, tritonclient's default, and one batch as JSON) and classified by the server's own
tokenizer (classification output: "score:index:label"); texts declared preprocessed are refused.
The same passages sent to TF Serving's REST predict as strings ("instances", and one batch as
"inputs" columns) get the same classes; its metadata says DT_STRING.

    text_client.py --url HOST:PORT --model NAME --jsonl TEST.jsonl --seq LEN [--expect-correct K]

Prints "N/M correct"; exits 1 with a message when a check fails."""
import argparse
import json
import sys
import urllib.error
import urllib.request

import numpy as np
import tritonclient.http as th


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def classify(c, model, texts, binary):
    inp = th.InferInput("input", [len(texts), 1], "BYTES")
    inp.set_data_from_numpy(np.array([[t.encode()] for t in texts], dtype=np.object_), binary_data=binary)
    out = th.InferRequestedOutput("probabilities", binary_data=binary, class_count=1)
    r = c.infer(model, [inp], outputs=[out])
    # binary answers are bytes, JSON ones str
    return [(v[0].decode() if isinstance(v[0], bytes) else v[0]).split(":", 2)[1:] for v in r.as_numpy("probabilities")]


def tfs(url, model, body):
    """POST body to TF Serving's predict: (status, answer)"""
    req = urllib.request.Request(f"http://{url}/v1/models/{model}:predict", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def argmax(v):
    return max(range(len(v)), key=lambda i: v[i])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--jsonl", required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--expect-correct", type=int)
    a = p.parse_args()
    rows = [json.loads(line) for line in open(a.jsonl, encoding="utf-8")]
    c = th.InferenceServerClient(url=a.url)
    m = c.get_model_metadata(a.model)["inputs"][0]
    prm = m.get("parameters", {})
    if m["datatype"] != "BYTES" or m["shape"] != [-1, 1] or prm.get("raw") != "text" or \
            prm.get("sequence_length") != a.seq or prm.get("tokenizer") not in ("bpe", "byte"):
        fail(f"the metadata does not say the input is BYTES text: {m}")
    texts, labels = [r["text"] for r in rows], [r["label"] for r in rows]
    got = []
    for s in range(0, len(texts), 128):
        got += classify(c, a.model, texts[s:s + 128], True)
    if classify(c, a.model, texts[:50], False) != got[:50]:
        fail("the same texts sent as JSON were classified otherwise than as binary BYTES")
    inp = th.InferInput("input", [1, 1], "BYTES")
    inp.set_data_from_numpy(np.array([[b"a text"]], dtype=np.object_))
    try:
        c.infer(a.model, [inp], parameters={"input_form": "preprocessed"})
        fail("texts declared preprocessed were answered")
    except th.InferenceServerException as e:
        if e.status() != "400" or "raw form" not in e.message():
            fail(f"texts declared preprocessed refused, but not for that: {e.status()} {e.message()}")
    # TF Serving's REST API: rows of strings, then one batch as columns
    for s in range(0, len(texts), 128):
        st, ans = tfs(a.url, a.model, {"instances": texts[s:s + 128]})
        if st != 200:
            fail(f"TF Serving's predict refused texts: {st} {ans}")
        idx = [str(argmax(p["probabilities"])) for p in ans["predictions"]]
        if idx != [g[0] for g in got[s:s + 128]]:
            fail(f"TF Serving's predict classified texts {s}.. otherwise than the V2 route")
    st, ans = tfs(a.url, a.model, {"inputs": {"input": texts[:50]}})
    if st != 200 or [str(argmax(p)) for p in ans["outputs"]["probabilities"]] != [g[0] for g in got[:50]]:
        fail(f"TF Serving's columns of texts were classified otherwise: {st}")
    st, ans = tfs(a.url, a.model, {"instances": ["a text", 3]})
    if st != 400 or "mixes texts with numbers" not in ans.get("error", ""):
        fail(f"a row of texts and numbers was not refused with a 400 naming it: {st} {ans}")
    with urllib.request.urlopen(f"http://{a.url}/v1/models/{a.model}/metadata") as r:
        md = json.loads(r.read())
    sd = md["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]["input"]
    if sd["dtype"] != "DT_STRING" or md["metadata"]["dlk_input_contract"].get("raw") != "text":
        fail(f"TF Serving's metadata does not say the input is text: {md}")
    got = [g[1] for g in got]
    correct = sum(g == w for g, w in zip(got, labels))
    print(f"{correct}/{len(texts)} correct")
    if a.expect_correct is not None and correct != a.expect_correct:
        fail(f"the server classified {correct} correctly, the bundle recorded {a.expect_correct}")


if __name__ == "__main__":
    main()
