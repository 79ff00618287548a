"""ONNX models (onnx.helper) shaped like the TF Serving REST API's examples, for the V1, Vertex and SageMaker tests."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from tests.support import onnx_models


def _save(model: onnx.ModelProto, root: Path, name: str) -> None:
    directory = root / name / "1"
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(model, directory / "model.onnx")


def half_plus_three() -> onnx.ModelProto:
    """TF Serving's toy ``half_plus_three``: ``y = 0.5 * x + 3`` over FP32 ``[-1]``."""
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    three = helper.make_tensor("three", TensorProto.FLOAT, [], [3.0])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Add", ["h", "three"], ["y"])],
        "half_plus_three",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
        [half, three],
    )
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


def tag_signal_sensor() -> onnx.ModelProto:
    """The API doc's three named inputs (``tag`` text, ``signal`` [5], ``sensor`` [2, 2]), echoed as outputs."""
    specs = [("tag", TensorProto.STRING, ["n"]), ("signal", TensorProto.INT64, ["n", 5]),
             ("sensor", TensorProto.INT64, ["n", 2, 2])]  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Identity", [name], [f"{name}_out"]) for name, _, _ in specs],
        "tag_signal_sensor",
        [helper.make_tensor_value_info(name, kind, dims) for name, kind, dims in specs],
        [helper.make_tensor_value_info(f"{name}_out", kind, dims) for name, kind, dims in specs],
    )
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


def text_bytes() -> onnx.ModelProto:
    """BYTES ``[-1]`` in, the same out twice: ``text`` and ``text_bytes`` (TF Serving answers ``_bytes`` as b64)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["text"]), helper.make_node("Identity", ["INPUT0"], ["text_bytes"])],
        "text_bytes",
        [helper.make_tensor_value_info("INPUT0", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info(n, TensorProto.STRING, ["n"]) for n in ("text", "text_bytes")],
    )
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


def build(root: Path) -> Path:
    """half_plus_three, tag_signal_sensor and text_bytes under ``root``."""
    _save(half_plus_three(), root, "half_plus_three")
    _save(tag_signal_sensor(), root, "tag_signal_sensor")
    _save(text_bytes(), root, "text_bytes")
    return root
