"""Sample tensors for every datatype, shared by unit and component tests."""

from __future__ import annotations

import ml_dtypes
import numpy as np

#: datatype -> (JSON data, the numpy array it must decode to), shape (2, 3).
SAMPLES: dict[str, tuple[list, np.ndarray]] = {}


def _add(datatype: str, values: list, dtype: object) -> None:
    SAMPLES[datatype] = (values, np.array(values, dtype=dtype).reshape(2, 3))


_add("BOOL", [True, False, True, True, False, False], np.bool_)
_add("UINT8", [0, 1, 2, 128, 254, 255], np.uint8)
_add("UINT16", [0, 1, 2, 300, 65534, 65535], np.uint16)
_add("UINT32", [0, 1, 2, 70000, 2**32 - 2, 2**32 - 1], np.uint32)
_add("UINT64", [0, 1, 2, 2**40, 2**64 - 2, 2**64 - 1], np.uint64)
_add("INT8", [-128, -1, 0, 1, 100, 127], np.int8)
_add("INT16", [-32768, -1, 0, 1, 1000, 32767], np.int16)
_add("INT32", [-(2**31), -1, 0, 1, 100000, 2**31 - 1], np.int32)
_add("INT64", [-(2**63), -1, 0, 1, 2**40, 2**63 - 1], np.int64)
_add("FP16", [0.0, -1.5, 0.25, 1024.0, 65504.0, -0.0009765625], np.float16)
_add("FP32", [0.0, -1.5, 3.25, 1e-30, 3.4e38, 0.1], np.float32)
_add("FP64", [0.0, -1.5, 3.25, 1e-300, 1.7e308, 0.1], np.float64)
_add("BF16", [0.0, -1.5, 3.25, 256.0, 1.0, -2.0], ml_dtypes.bfloat16)
SAMPLES["BYTES"] = (
    ["", "ascii", "naïve café", "日本語", "emoji 🚀", "tab\tnewline\n"],
    np.array(["", "ascii", "naïve café", "日本語", "emoji 🚀", "tab\tnewline\n"], dtype=object).reshape(2, 3),
)

#: The 13 datatypes of the protocol's table (BF16 is the later addition).
TABLE_DATATYPES = [d for d in SAMPLES if d != "BF16"]


def as_bytes_array(array: np.ndarray) -> np.ndarray:
    """BYTES values as the bytes a binary round trip yields."""
    out = np.empty(array.shape, dtype=object)
    out.ravel()[:] = [s.encode() if isinstance(s, str) else s for s in array.ravel()]
    return out


#: Calls to Triton's stateful extensions, refused with a reason over both transports.
STATEFUL_CALLS = [
    # (tritonclient call, its arguments, a phrase of our answer), the same names in tritonclient.http and .grpc
    ("load_model", ("simple",), "cannot be loaded or unloaded on request"),
    ("unload_model", ("simple",), "cannot be loaded or unloaded on request"),
    ("get_system_shared_memory_status", (), "system shared memory is not supported"),
    ("register_system_shared_memory", ("region", "/oip-test", 16), "send tensors in the request"),
    ("unregister_system_shared_memory", (), "system shared memory is not supported"),
    ("get_cuda_shared_memory_status", (), "CUDA shared memory is not supported"),
    ("unregister_cuda_shared_memory", (), "CUDA shared memory is not supported"),
    ("get_trace_settings", (), "trace extension is not served"),
    ("update_trace_settings", ("simple", {"trace_level": ["TIMESTAMPS"]}), "trace extension is not served"),
    ("get_log_settings", (), "log settings are fixed at start-up"),
    ("update_log_settings", ({"log_verbose_level": 1},), "log settings are fixed at start-up"),
]


#: Three flowers for the demo ``iris`` model (setosa, virginica, versicolor).
IRIS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]], dtype=np.float32)


def iris_outputs(inputs: np.ndarray = IRIS) -> dict[str, np.ndarray]:
    """onnxruntime's own answer of the demo ``iris`` model for ``inputs``: the oracle clients are checked against."""
    import onnxruntime as ort

    from handler.config.settings import DEMO_REPOSITORY

    session = ort.InferenceSession(str(DEMO_REPOSITORY / "iris" / "1" / "model.onnx"))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {"input": inputs}), strict=True))
