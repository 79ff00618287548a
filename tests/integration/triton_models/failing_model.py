"""A Triton Python-backend model that answers every request with the error it names: its BYTES input ``CODE`` holds
a ``TritonError`` code (``NOT_FOUND``, ``UNAVAILABLE``, ...), which Triton turns into its HTTP status and gRPC code."""
# tool venv: pytriton (tritonserver's Python-backend stub runs it with that venv on its path)

import os
import sys

sys.path[:0] = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path and path not in sys.path]

import triton_python_backend_utils as pb_utils  # noqa: E402


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            (code,) = [item.decode() for item in pb_utils.get_input_tensor_by_name(request, "CODE").as_numpy().ravel()]
            error = pb_utils.TritonError(f"failed as asked: {code}", getattr(pb_utils.TritonError, code))
            responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
