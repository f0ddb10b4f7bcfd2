"""The model the peers of bench/serve run: the dlk bundle exported as ONNX (`dlk export BUNDLE --onnx
MODEL.onnx`, input FLOAT [N, C, H, W] raw pixels, outputs probabilities and logits) in an ONNX
Runtime InferenceSession set up as ONNX Runtime's performance guide advises for CPU serving: all
graph optimisations, sequential execution, inter-op threads 1 and intra-op threads the cores the
server instance may use (THREADS), so that instances x threads = cores. With more than one
intra-op thread the pool's spinning can be turned off (SPIN false): the guide's advice where the
cores are shared, as wrk and other work share them here (the MLP in Triton at 64 connections, one
4-second check of each, not alternated: one instance of 2 spinning threads answered 220
requests/s, of 1 thread 2,330).

`python3 peer_onnx.py MODEL.onnx LOGITS.f32 N` checks the session against the logits that
dlk's own forward pass (build/tests/tools/forward) wrote for the first N test images: the same
class for every image and every logit within 1e-4."""
import sys

import numpy as np
import onnxruntime as ort


def session(path, threads, spin=True):
    o = ort.SessionOptions()
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    if not spin:
        o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, sess_options=o, providers=["CPUExecutionProvider"])


class OnnxModel:
    def __init__(self, path, threads, spin=True):
        self.sess = session(path, threads, spin)
        i = self.sess.get_inputs()[0]
        self.input_name = i.name
        self.input = [int(d) for d in i.shape[1:]]
        self.classes = int(self.sess.get_outputs()[0].shape[1])
        self.outputs = [o.name for o in self.sess.get_outputs()]

    def forward(self, x):
        """raw inputs (any numeric dtype, UINT8 pixels as sent) -> {output name: FLOAT [N, classes]}"""
        x = np.asarray(x, dtype=np.float32).reshape(x.shape[0], *self.input)
        return dict(zip(self.outputs, self.sess.run(self.outputs, {self.input_name: x})))


def describe():
    return f"ONNX Runtime {ort.__version__} (CPUExecutionProvider, ORT_ENABLE_ALL, sequential, inter-op 1)"


if __name__ == "__main__":
    import gzip
    model, logits, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    m = OnnxModel(model, 1)
    d = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
    x = np.frombuffer(d, dtype=np.uint8, offset=16)[:784 * n].reshape(n, 1, 28, 28)
    want = np.fromfile(logits, dtype=np.float32).reshape(n, -1)
    got = m.forward(x)["logits"]
    diff = float(np.abs(got - want).max())
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4) or (got.argmax(1) != want.argmax(1)).any():
        sys.exit(f"{model}: ONNX Runtime differs from dlk's forward pass: max |diff| {diff:.2e}, "
                 f"{int((got.argmax(1) != want.argmax(1)).sum())} of {n} classes differ")
    print(f"{model}: ONNX Runtime matches dlk's forward pass on {n} images (max |diff| {diff:.2e}, same class for all)")
