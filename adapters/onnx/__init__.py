"""In-process ONNX models on CPU with onnxruntime.

onnxruntime (1.32 on Linux) starts a telemetry uploader when it is imported: a thread, a device id and an SQLite
store under ``~/.cache/Microsoft``, and uploads to Microsoft, unless ``ORT_DISABLE_TELEMETRY`` is set first. A
model server on Lambda, in a VPC or on an edge box must not phone home, write under ``$HOME`` or carry a thread
nobody asked for (it also makes a process unsafe to fork), so it is off unless the deployment sets
``ORT_DISABLE_TELEMETRY=0``. It is set here because this package is imported before ``backend`` imports
onnxruntime.
"""

import os

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
