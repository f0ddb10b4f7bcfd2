"""Triton Inference Server (its real server, started by nvidia-pytriton) serving a dlk bundle
exported as ONNX: the model function runs the ONNX graph in ONNX Runtime (peer_onnx.py), one
InferenceSession per Triton model instance, behind Triton's dynamic batcher. (Triton's own
onnxruntime backend is not in the registry's packages: bench/README.md, "Serving".)

    triton_server.py MODEL.onnx NAME PORT [--instances N] [--threads N] [--no-spin] [--max-batch N] [--delay-us N]

HTTP on PORT (KServe V2, binary tensors), gRPC on PORT+1, metrics on PORT+2."""
import argparse
import os
import sys

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_onnx import OnnxModel, describe  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("name")
    p.add_argument("port", type=int)
    p.add_argument("--instances", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-spin", action="store_true", help="ONNX Runtime's intra-op threads do not spin")
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--delay-us", type=int, default=0)
    a = p.parse_args()
    models = [OnnxModel(a.model, a.threads, not a.no_spin) for _ in range(a.instances)]

    def instance(model):
        @batch
        def infer(input):
            return model.forward(input)
        return infer

    cfg = TritonConfig(http_port=a.port, grpc_port=a.port + 1, metrics_port=a.port + 2, http_address="127.0.0.1",
                       grpc_address="127.0.0.1")
    m = models[0]
    with Triton(config=cfg) as t:
        t.bind(model_name=a.name, infer_func=[instance(x) for x in models],
               inputs=[Tensor(name="input", dtype=np.uint8, shape=tuple(m.input))],
               outputs=[Tensor(name="probabilities", dtype=np.float32, shape=(m.classes,)),
                        Tensor(name="logits", dtype=np.float32, shape=(m.classes,))],
               config=ModelConfig(max_batch_size=a.max_batch,
                                  batcher=DynamicBatcher(max_queue_delay_microseconds=a.delay_us)),
               strict=True)
        print(f"triton: serving {a.name} on 127.0.0.1:{a.port}: {describe()}, {a.instances} instances x "
              f"{a.threads} intra-op threads{' (no spinning)' if a.no_spin else ''}, dynamic batcher max batch {a.max_batch}, delay {a.delay_us} us", flush=True)
        t.serve()


if __name__ == "__main__":
    main()
