"""What a user would write instead of `dlk serve --stream`: a Python consumer with Confluent's
Kafka client (librdkafka underneath) and ONNX Runtime, scoring a dlk bundle's MLP exported to
ONNX, exactly once like dlk (transactional producer, offsets sent in the transaction), records
gathered up to MAX_RECORDS or COMMIT_MS and run in forward passes of MAX_BATCH rows, the same
output record as dlk's. Records hold raw UINT8 pixels, scaled as the bundle's training scaled them
(model.json's input_scaling), as dlk does. Stops when TOTAL records were scored.

usage: pyscorer.py BUNDLE BROKERS IN OUT GROUP TOTAL MAX_BATCH [MAX_RECORDS COMMIT_MS THREADS]"""
import json
import os
import sys
import tarfile

import numpy as np
import onnx
import onnxruntime as ort
from confluent_kafka import Consumer, Producer, TopicPartition
from onnx import TensorProto, helper, numpy_helper


def load_bundle(path):
    with tarfile.open(path) as t:
        meta = json.load(t.extractfile("model.json"))
        raw = t.extractfile("weights.safetensors").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    w = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        w[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(h["shape"])
    return meta, w


def to_onnx(meta, w):
    arch = meta["architecture"]
    nodes, inits, cur = [], [], "x"
    size = int(np.prod(arch["input"]))
    for i, layer in enumerate(arch["layers"]):
        k = layer["kind"]
        if k == "flatten":
            continue
        if k == "dense":
            inits += [numpy_helper.from_array(w["layers.%d.weight" % i], "w%d" % i),
                      numpy_helper.from_array(w["layers.%d.bias" % i], "b%d" % i)]
            nodes.append(helper.make_node("Gemm", [cur, "w%d" % i, "b%d" % i], ["y%d" % i], transB=1))
        elif k == "relu":
            nodes.append(helper.make_node("Relu", [cur], ["y%d" % i]))
        else:
            sys.exit("pyscorer: layer kind %s is not exported here (the bench uses the MLP)" % k)
        cur = "y%d" % i
    g = helper.make_graph(nodes, "dlk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, size])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [None, arch["n_classes"]])], inits)
    # ir_version 9 (ONNX 1.15), which every onnxruntime of the last years reads
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString(), size


def main():
    bundle, brokers, topic_in, topic_out, group, total, max_batch = sys.argv[1:8]
    total, max_batch = int(total), int(max_batch)
    max_records = int(sys.argv[8]) if len(sys.argv) > 8 else 2000
    commit_s = (int(sys.argv[9]) if len(sys.argv) > 9 else 100) / 1000
    threads = int(sys.argv[10]) if len(sys.argv) > 10 else 1
    meta, w = load_bundle(bundle)
    model, size = to_onnx(meta, w)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    classes = meta.get("classes")
    sc = meta.get("input_scaling", {"scale": 1.0, "mean": 0.0, "std": 1.0})
    scale, mean, std = np.float32(sc["scale"]), np.float32(sc["mean"]), np.float32(sc["std"])
    digest = "sha256:" + meta["weights"]["sha256"] if isinstance(meta.get("weights"), dict) else ""
    c = Consumer({"bootstrap.servers": brokers, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    p = Producer({"bootstrap.servers": brokers, "transactional.id": group + "-py", "linger.ms": 5})
    p.init_transactions()
    # say when partitions arrive (bench/stream starts its timed producer only then)
    c.subscribe([topic_in], on_assign=lambda consumer, parts: print("assigned", len(parts), flush=True))
    done, cpu0, n0 = 0, None, 0
    while done < total:
        msgs = c.consume(num_messages=max_records, timeout=commit_s)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        raw = np.frombuffer(b"".join(m.value() for m in msgs), dtype=np.uint8).reshape(-1, size)
        x = (raw.astype(np.float32) * scale - mean) / std
        logits = np.concatenate([sess.run(None, {"x": x[i:i + max_batch]})[0]
                                 for i in range(0, len(x), max_batch)])
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = z / z.sum(axis=1, keepdims=True)
        best = probs.argmax(axis=1)
        p.begin_transaction()
        for m, k, pr in zip(msgs, best, probs):
            out = {"class": int(k)}
            if classes:
                out["label"] = classes[k]
            out.update({"score": float(pr[k]), "scores": [float(v) for v in pr], "model": digest,
                        "input": {"topic": m.topic(), "partition": m.partition(), "offset": m.offset(),
                                  "key": m.key().decode() if m.key() is not None else None}})
            while True:
                try:
                    p.produce(topic_out, key=m.key(), value=json.dumps(out, separators=(",", ":")))
                    break
                except BufferError:
                    p.poll(0.05)
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata())
        p.commit_transaction()
        done += len(msgs)
        if cpu0 is None:
            # CPU from the first committed round to the last (bench/stream measures dlk the same way)
            cpu0, n0 = sum(os.times()[:2]), done
    if cpu0 is not None and done > n0:
        print("cpu_ms_per_1000 %.1f" % ((sum(os.times()[:2]) - cpu0) * 1e6 / (done - n0)), flush=True)
    c.close()


if __name__ == "__main__":
    main()
