"""MLServer serving a dlk bundle's weights through the numpy peer model: an MLServer custom
runtime (MLModel). The bundle path is the model setting parameters.uri; bench/serve/run.sh writes
the model-settings.json (adaptive batching) and settings.json (parallel workers)."""
import os
import sys

from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_model import BundleModel, softmax  # noqa: E402


class DlkBundle(MLModel):
    async def load(self) -> bool:
        self.model = BundleModel(self.settings.parameters.uri)
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = NumpyCodec.decode_input(payload.inputs[0])
        logits = self.model.forward(x)
        return InferenceResponse(
            model_name=self.name,
            id=payload.id,
            outputs=[NumpyCodec.encode_output("probabilities", softmax(logits)),
                     NumpyCodec.encode_output("logits", logits)],
        )
