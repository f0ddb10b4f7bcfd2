"""Triton Inference Server (the tritonserver that nvidia-pytriton bundles) started directly on a
model repository whose model is a Triton Python-backend model (model.py, TritonPythonModel) running
the dlk bundle exported as ONNX in ONNX Runtime: Triton's own dynamic batcher hands the backend
a list of requests, which it runs as one batch. Unlike pytriton's model function, no proxy
process sits between Triton's Python backend and the model (pytriton forwards every batch to the
user's process over ZeroMQ and shared memory).

    triton_backend.py MODEL.onnx NAME PORT DIR [--instances N] [--threads N] [--max-batch N] [--delay-us N]

writes the model repository and a copy of the server (with the backend stub for this Python) under
DIR and runs tritonserver in the foreground (exec). HTTP on PORT, gRPC on PORT+1, metrics on PORT+2."""
import argparse
import os
import shutil
import sys

import pytriton
import onnxruntime  # noqa: F401  (the backend's model needs it: fail here, not in the server's log)

MODEL_PY = '''import json
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, {here!r})
from peer_onnx import OnnxModel  # noqa: E402


class TritonPythonModel:
    def initialize(self, args):
        self.model = OnnxModel({onnx!r}, {threads})

    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "input").as_numpy() for r in requests]
        out = self.model.forward(np.concatenate(xs) if len(xs) > 1 else xs[0])
        answers, at = [], 0
        for x in xs:
            n = x.shape[0]
            answers.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor(k, np.ascontiguousarray(v[at:at + n])) for k, v in out.items()]))
            at += n
        return answers
'''

CONFIG = '''backend: "python"
max_batch_size: {max_batch}
dynamic_batching {{ max_queue_delay_microseconds: {delay} }}
instance_group [{{ count: {instances}, kind: KIND_CPU }}]
input [{{ name: "input", data_type: TYPE_UINT8, dims: [ {dims} ] }}]
output [{{ name: "probabilities", data_type: TYPE_FP32, dims: [ {classes} ] }},
        {{ name: "logits", data_type: TYPE_FP32, dims: [ {classes} ] }}]
'''


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("name")
    p.add_argument("port", type=int)
    p.add_argument("dir")
    p.add_argument("--instances", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--delay-us", type=int, default=0)
    a = p.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    from peer_onnx import OnnxModel
    m = OnnxModel(a.model, 1)

    pkg = os.path.dirname(pytriton.__file__)
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    d = os.path.abspath(a.dir)
    shutil.rmtree(d, ignore_errors=True)
    server = os.path.join(d, "tritonserver")
    shutil.copytree(os.path.join(pkg, "tritonserver"), server, ignore=shutil.ignore_patterns("python_backend_stubs"))
    shutil.copy(os.path.join(pkg, "tritonserver", "python_backend_stubs", ver, "triton_python_backend_stub"),
                os.path.join(server, "backends", "python"))
    repo = os.path.join(d, "models")
    os.makedirs(os.path.join(repo, a.name, "1"))
    with open(os.path.join(repo, a.name, "1", "model.py"), "w") as f:
        f.write(MODEL_PY.format(here=here, onnx=os.path.abspath(a.model), threads=a.threads))
    with open(os.path.join(repo, a.name, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(max_batch=a.max_batch, delay=a.delay_us, instances=a.instances,
                              dims=", ".join(str(x) for x in m.input), classes=m.classes))
    env = dict(os.environ)
    libs = os.path.join(os.path.dirname(pkg), "nvidia_pytriton.libs")
    env["LD_LIBRARY_PATH"] = libs + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    # the backend stub embeds this Python: it finds the venv's packages (numpy, onnxruntime) by PATH
    env["PATH"] = os.path.dirname(sys.executable) + ":" + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(x for x in sys.path if x.endswith("site-packages"))
    print(f"triton: {a.name} on 127.0.0.1:{a.port}: Python backend model over ONNX Runtime, {a.instances} instances x "
          f"{a.threads} intra-op threads, dynamic batcher max batch {a.max_batch}, delay {a.delay_us} us", flush=True)
    binary = os.path.join(server, "bin", "tritonserver")
    os.execve(binary, [binary, "--model-repository", repo, "--backend-directory", os.path.join(server, "backends"),
                       "--cache-directory", os.path.join(server, "caches"),
                       "--http-address", "127.0.0.1", "--http-port", str(a.port),
                       "--grpc-address", "127.0.0.1", "--grpc-port", str(a.port + 1),
                       "--metrics-port", str(a.port + 2), "--log-info", "false"], env)


if __name__ == "__main__":
    main()
