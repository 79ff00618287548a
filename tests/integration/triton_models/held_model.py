"""A Triton Python-backend model that answers its input (``y = x``) once the test lets it: each execution writes
a file ``started-N`` into the directory its ``hold_directory`` parameter names, then waits until a file
``release`` exists there. The test orders its requests by those files, never by time."""
# tool venv: pytriton (tritonserver's Python-backend stub runs it)

import itertools
import json
import os
import sys
import time

# As onnx_model.py: the packages of tritonserver's venv (numpy) first; the stub ignores PYTHONPATH.
sys.path[:0] = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path and path not in sys.path]

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.directory = config["parameters"]["hold_directory"]["string_value"]
        self.executions = itertools.count(1)

    def execute(self, requests):
        started = os.path.join(self.directory, f"started-{next(self.executions)}")
        with open(started, "w"):
            pass
        while not os.path.exists(os.path.join(self.directory, "release")):
            time.sleep(0.01)  # the model's own wait on the file; the test never sleeps
        responses = []
        for request in requests:
            x = np.array(pb_utils.get_input_tensor_by_name(request, "x").as_numpy(), np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]))
        return responses
