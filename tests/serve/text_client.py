#!/usr/bin/env python3
"""A text model served by dlk, through the real tritonclient[http]: the metadata says the input is
BYTES text; every passage of a JSON Lines file ({"text": ..., "label": ...}) is sent as a BYTES
tensor (binary, tritonclient's default, and one batch as JSON) and classified by the server's own
tokenizer (classification output: "score:index:label"); texts declared preprocessed are refused.

    text_client.py --url HOST:PORT --model NAME --jsonl TEST.jsonl --seq LEN [--expect-correct K]

Prints "N/M correct"; exits 1 with a message when a check fails."""
import argparse
import json
import sys

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
    return [(v[0].decode() if isinstance(v[0], bytes) else v[0]).split(":", 2)[2] for v in r.as_numpy("probabilities")]


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
    correct = sum(g == w for g, w in zip(got, labels))
    print(f"{correct}/{len(texts)} correct")
    if a.expect_correct is not None and correct != a.expect_correct:
        fail(f"the server classified {correct} correctly, the bundle recorded {a.expect_correct}")


if __name__ == "__main__":
    main()
