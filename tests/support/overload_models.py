"""A slow ONNX model for the overload and deadline tests, built with onnx.helper, and repositories of it.

``slow``: ``y = x + 0 * sum(A_k)`` where ``A_0 = sum(x) * C`` and ``A_{i+1} = A_i @ W`` for ``k`` MatMul nodes of
``size`` x ``size``: the answer is its input, the time a chain of MatMuls that depends on the input (so nothing is
folded away), with ``k`` nodes between which onnxruntime may stop the run. FP32 ``x`` of shape [-1, 1] (a batch).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.support.onnx_models import OPSET


def _x_to_y(name: str, nodes: list[onnx.NodeProto], initializers: list[onnx.TensorProto]) -> onnx.ModelProto:
    """A model of ``nodes`` from FP32 ``x`` [-1, 1] to FP32 ``y`` [-1, 1]."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 1])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=OPSET, ir_version=8)


def slow(size: int = 512, k: int = 600) -> onnx.ModelProto:
    """The slow model: ``k`` MatMuls of ``size`` x ``size`` per run, whatever the batch."""
    rng = np.random.default_rng(0)
    weights = (np.eye(size) + rng.normal(0, 1e-3, (size, size))).astype(np.float32)
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Mul", ["s", "C"], ["a0"]),
    ]
    for index in range(k):
        nodes.append(helper.make_node("MatMul", [f"a{index}", "W"], [f"a{index + 1}"]))
    nodes += [
        helper.make_node("ReduceSum", [f"a{k}"], ["t"], keepdims=0),
        helper.make_node("Mul", ["t", "zero"], ["z"]),
        helper.make_node("Add", ["x", "z"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(np.full((size, size), 1e-3, np.float32), "C"),
        numpy_helper.from_array(weights, "W"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    return _x_to_y("slow", nodes, initializers)


def config(name: str, max_batch_size: int = 0, extra: str = "") -> str:
    """A config.pbtxt of the slow model."""
    return f"""name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
input [ {{ name: "x", data_type: TYPE_FP32, dims: [ {"1" if max_batch_size else "-1, 1"} ] }} ]
output [ {{ name: "y", data_type: TYPE_FP32, dims: [ {"1" if max_batch_size else "-1, 1"} ] }} ]
{extra}
"""


def repository(root: Path, models: dict[str, str], size: int = 512, k: int = 600) -> Path:
    """``root`` holding the slow model under each name of ``models``, with that config.pbtxt text."""
    model = slow(size, k)
    for name, text in models.items():
        version = root / name / "1"
        version.mkdir(parents=True)
        onnx.save(model, str(version / "model.onnx"))
        (root / name / "config.pbtxt").write_text(text)
    return root


def forever(size: int = 64) -> onnx.ModelProto:
    """A model whose run never ends by itself: ``y = x + 0 * sum(A)``, ``A`` multiplied by ``W`` in a ``Loop`` of
    2**62 iterations. onnxruntime checks ``RunOptions.terminate`` between the iterations, so only a stopped run
    ends; a test that uses it depends on no machine's speed. FP32 ``x`` of shape [-1, 1] (a batch)."""
    matrix = [size, size]
    body = helper.make_graph(
        [helper.make_node("MatMul", ["a_in", "W"], ["a_out"]), helper.make_node("Identity", ["go_in"], ["go_out"])],
        "step",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("go_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a_in", TensorProto.FLOAT, matrix),
        ],
        [
            helper.make_tensor_value_info("go_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a_out", TensorProto.FLOAT, matrix),
        ],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Mul", ["s", "C"], ["a0"]),
        helper.make_node("Loop", ["trips", "go", "a0"], ["a"], body=body),
        helper.make_node("ReduceSum", ["a"], ["t"], keepdims=0),
        helper.make_node("Mul", ["t", "zero"], ["z"]),
        helper.make_node("Add", ["x", "z"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(np.full(matrix, 1e-3, np.float32), "C"),
        numpy_helper.from_array(np.eye(size, dtype=np.float32), "W"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(2**62, np.int64), "trips"),
        numpy_helper.from_array(np.array(True), "go"),
    ]
    return _x_to_y("forever", nodes, initializers)
