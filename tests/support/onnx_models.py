"""Small ONNX models for tests, built with onnx.helper."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

OPSET = [helper.make_opsetid("", 17)]

#: V2 datatype -> ONNX element type (every type of the protocol's table).
ONNX_TYPES: dict[str, int] = {
    "BOOL": TensorProto.BOOL,
    "UINT8": TensorProto.UINT8,
    "UINT16": TensorProto.UINT16,
    "UINT32": TensorProto.UINT32,
    "UINT64": TensorProto.UINT64,
    "INT8": TensorProto.INT8,
    "INT16": TensorProto.INT16,
    "INT32": TensorProto.INT32,
    "INT64": TensorProto.INT64,
    "FP16": TensorProto.FLOAT16,
    "FP32": TensorProto.FLOAT,
    "FP64": TensorProto.DOUBLE,
    "BYTES": TensorProto.STRING,
}


def _model(nodes: list, inputs: list, outputs: list, initializers: list | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializers or [])
    return helper.make_model(graph, opset_imports=OPSET, ir_version=8)


def identity(datatype: str, shape: list[int | str] | None = None) -> onnx.ModelProto:
    """``OUTPUT0 = INPUT0`` for one datatype; default shape [-1, -1] (any 2-D)."""
    dims = shape if shape is not None else ["a", "b"]
    kind = ONNX_TYPES[datatype]
    return _model(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
        [helper.make_tensor_value_info("INPUT0", kind, dims)],
        [helper.make_tensor_value_info("OUTPUT0", kind, dims)],
    )


def add_sub() -> onnx.ModelProto:
    """Triton's classic ``simple`` model: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, INT32 [1, 16]."""
    shape = [1, 16]
    return _model(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.INT32, shape) for n in ("INPUT0", "INPUT1")],
        [helper.make_tensor_value_info(n, TensorProto.INT32, shape) for n in ("OUTPUT0", "OUTPUT1")],
    )


def fixed_reshape() -> onnx.ModelProto:
    """Accepts FP32 [-1] but reshapes to [2, 2] inside: any other element count fails at run time."""
    target = helper.make_tensor("target", TensorProto.INT64, [2], [2, 2])
    return _model(
        [helper.make_node("Reshape", ["INPUT0", "target"], ["OUTPUT0"])],
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [2, 2])],
        [target],
    )


def save(model: onnx.ModelProto, root: Path, name: str, version: int = 1, config: str | None = None) -> Path:
    """Write ``root/name/version/model.onnx`` (and config.pbtxt when given)."""
    directory = root / name / str(version)
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(model, directory / "model.onnx")
    if config is not None:
        (root / name / "config.pbtxt").write_text(config)
    return directory / "model.onnx"
