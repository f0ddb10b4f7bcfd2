"""Triton Inference Server (its real server, started by nvidia-pytriton) serving a dlk bundle's
weights through the numpy peer model, with Triton's dynamic batcher.

    triton_server.py BUNDLE PORT [--instances N] [--max-batch N] [--delay-us N]

HTTP on PORT (KServe V2, binary tensors), gRPC on PORT+1, metrics on PORT+2."""
import argparse
import os
import sys

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_model import BundleModel, softmax  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bundle")
    p.add_argument("port", type=int)
    p.add_argument("--instances", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--delay-us", type=int, default=0)
    a = p.parse_args()
    model = BundleModel(a.bundle)

    @batch
    def infer(input):
        logits = model.forward(input)
        return {"probabilities": softmax(logits), "logits": logits}

    cfg = TritonConfig(http_port=a.port, grpc_port=a.port + 1, metrics_port=a.port + 2, http_address="127.0.0.1",
                       grpc_address="127.0.0.1")
    with Triton(config=cfg) as t:
        t.bind(model_name=model.name, infer_func=[infer] * a.instances,
               inputs=[Tensor(name="input", dtype=np.uint8, shape=tuple(model.input))],
               outputs=[Tensor(name="probabilities", dtype=np.float32, shape=(model.classes,)),
                        Tensor(name="logits", dtype=np.float32, shape=(model.classes,))],
               config=ModelConfig(max_batch_size=a.max_batch,
                                  batcher=DynamicBatcher(max_queue_delay_microseconds=a.delay_us)),
               strict=True)
        print(f"triton: serving {model.name} on 127.0.0.1:{a.port} ({a.instances} instances, max batch {a.max_batch}, "
              f"delay {a.delay_us} us)", flush=True)
        t.serve()


if __name__ == "__main__":
    main()
