"""An ONNX model for MLServer 1.7 (which ships no ONNX runtime): one onnxruntime session, NumpyCodec in and out.

bench/bench_serve_start.py copies this file beside ``model-settings.json`` (MLServer puts a model's folder on
``sys.path``) and runs it in the ``mlserver`` tool venv, never in the product's environment.
"""

# tool venv: mlserver

from __future__ import annotations

import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class OnnxModel(MLModel):
    async def load(self) -> bool:
        uri = self.settings.parameters.uri if self.settings.parameters else None
        self.session = ort.InferenceSession(uri or "model.onnx", providers=["CPUExecutionProvider"])
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {request_input.name: NumpyCodec.decode_input(request_input) for request_input in payload.inputs}
        names = [output.name for output in self.session.get_outputs()]
        arrays = self.session.run(names, feeds)
        outputs = [NumpyCodec.encode_output(name, array) for name, array in zip(names, arrays, strict=True)]
        return InferenceResponse(model_name=self.name, outputs=outputs)
