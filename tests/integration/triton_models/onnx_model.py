"""A Triton Python-backend model that runs the ONNX file beside it with onnxruntime (the wheel's tritonserver
has no onnxruntime backend of its own). Its ``parameters`` may ask for a delay, to play a slow model."""
# tool venv: pytriton (tritonserver's Python-backend stub runs it with that venv on its path)

import json
import os
import sys
import time

# The backend stub embeds Python in isolated mode: it ignores PYTHONPATH and sees the base interpreter's
# site-packages. The packages this model needs (numpy<2 with onnxruntime, as nvidia-pytriton wants) are in the
# tritonserver's own venv, which the test passes in PYTHONPATH: put it first.
sys.path[:0] = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path and path not in sys.path]

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402


def _onnx(array):
    """Triton hands BYTES over as bytes objects; ONNX string tensors want str."""
    if array.dtype == object:
        return np.vectorize(lambda item: item.decode() if isinstance(item, bytes) else item, otypes=[object])(array)
    return array


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        delay = config.get("parameters", {}).get("delay_seconds", {}).get("string_value", "0")
        self.delay = float(delay)
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]

    def execute(self, requests):
        responses = []
        for request in requests:
            if self.delay:
                time.sleep(self.delay)
            feeds = {name: _onnx(pb_utils.get_input_tensor_by_name(request, name).as_numpy()) for name in self.inputs}
            results = self.session.run(self.outputs, feeds)
            tensors = [pb_utils.Tensor(name, value) for name, value in zip(self.outputs, results, strict=True)]
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
