"""MLServer serving a dlk bundle exported as ONNX: a custom runtime (MLModel) running the graph in
ONNX Runtime (peer_onnx.py). The model setting parameters.uri is the .onnx file and
parameters.extra.threads ONNX Runtime's intra-op threads (extra.spin: whether they spin); bench/serve/run.py writes the
model-settings.json (adaptive batching) and settings.json (parallel workers)."""
import os
import sys

from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_onnx import OnnxModel  # noqa: E402


class DlkOnnx(MLModel):
    async def load(self) -> bool:
        extra = self.settings.parameters.extra or {}
        self.model = OnnxModel(self.settings.parameters.uri, int(extra.get("threads", 1)),
                                bool(extra.get("spin", True)))
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        out = self.model.forward(NumpyCodec.decode_input(payload.inputs[0]))
        return InferenceResponse(
            model_name=self.name,
            id=payload.id,
            outputs=[NumpyCodec.encode_output(k, v) for k, v in out.items()],
        )
