"""A Triton-style model repository built with onnx.helper: the models Triton's own examples and tools use.

- ``simple``: INPUT0, INPUT1 INT32 [-1, 16], max_batch_size 8 -> OUTPUT0 = sum, OUTPUT1 = difference.
- ``simple_string``: the same on BYTES holding decimal numbers (Triton's ``simple_string``).
- ``simple_int8``: the same on INT8 (Triton's ``simple_int8``).
- ``simple_identity``: BYTES [-1, -1] -> the same BYTES, max_batch_size 8 (Triton's ``simple_identity``).
- ``image_classifier``: FP32 [-1, 3, 8, 8] -> ``probabilities`` FP32 [-1, 10], labels in ``labels.txt``.
- ``reshaped``: config.pbtxt ``reshape``: the client sends [-1, 4], the model takes [-1, 2, 2] and transposes.
- ``raw_string`` / ``raw_strings``: one BYTES input of dims [1] / [2], for raw binary requests.
- ``onnx_zero_1_float32`` / ``identity_fp32``: FP32 [-1] -> the same, max_batch_size 8 / 64, as Triton's QA
  repositories have them (``qa/L0_http``, ``qa/L0_parameters``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.support import onnx_models

LABELS = [f"class_{i}" for i in range(10)]

SIMPLE_CONFIG = """
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
"""

CLASSIFIER_CONFIG = """
max_batch_size: 8
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] label_filename: "labels.txt" } ]
"""

RESHAPED_CONFIG = """
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
"""


def _value(name: str, kind: int, dims: list) -> object:
    return helper.make_tensor_value_info(name, kind, dims)


def add_sub(kind: int) -> object:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 on [batch, 16]; BYTES go through INT32 and back."""
    dims = ["batch", 16]
    nodes, a, b = [], "INPUT0", "INPUT1"
    if kind == TensorProto.STRING:
        nodes += [helper.make_node("Cast", [n], [f"{n}_int"], to=TensorProto.INT32) for n in (a, b)]
        a, b = "INPUT0_int", "INPUT1_int"
    nodes += [helper.make_node("Add", [a, b], ["sum"]), helper.make_node("Sub", [a, b], ["difference"])]
    for result, output in (("sum", "OUTPUT0"), ("difference", "OUTPUT1")):
        if kind == TensorProto.STRING:
            nodes.append(helper.make_node("Cast", [result], [output], to=TensorProto.STRING))
        else:
            nodes.append(helper.make_node("Identity", [result], [output]))
    graph = helper.make_graph(
        nodes,
        "simple",
        [_value("INPUT0", kind, dims), _value("INPUT1", kind, dims)],
        [_value("OUTPUT0", kind, dims), _value("OUTPUT1", kind, dims)],
    )
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


def classifier() -> object:
    """Mean of each channel times a fixed [3, 10] matrix, then softmax: a deterministic 10-class classifier."""
    weights = np.arange(30, dtype=np.float32).reshape(3, 10) % 7 - 3
    nodes = [
        helper.make_node("ReduceMean", ["image"], ["pooled"], axes=[2, 3], keepdims=0),
        helper.make_node("MatMul", ["pooled", "weights"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "classifier",
        [_value("image", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [_value("probabilities", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(weights, "weights")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def transpose() -> object:
    """[batch, 2, 2] -> its transpose per item: shows that the model really received the reshaped tensor."""
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["INPUT0"], ["OUTPUT0"], perm=[0, 2, 1])],
        "reshaped",
        [_value("INPUT0", TensorProto.FLOAT, ["batch", 2, 2])],
        [_value("OUTPUT0", TensorProto.FLOAT, ["batch", 2, 2])],
    )
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


def classifier_weights() -> np.ndarray:
    """The classifier's matrix, for computing expected answers."""
    return np.arange(30, dtype=np.float32).reshape(3, 10) % 7 - 3


def build(root: Path) -> Path:
    """Write the repository under ``root`` and return it."""
    onnx_models.save(add_sub(TensorProto.INT32), root, "simple", config=SIMPLE_CONFIG)
    onnx_models.save(
        add_sub(TensorProto.STRING),
        root,
        "simple_string",
        config=SIMPLE_CONFIG.replace("TYPE_INT32", "TYPE_STRING"),
    )
    onnx_models.save(
        add_sub(TensorProto.INT8), root, "simple_int8", config=SIMPLE_CONFIG.replace("TYPE_INT32", "TYPE_INT8")
    )
    identity = 'max_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
    identity += 'output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
    onnx_models.save(onnx_models.identity("BYTES", ["batch", "length"]), root, "simple_identity", config=identity)
    onnx_models.save(classifier(), root, "image_classifier", config=CLASSIFIER_CONFIG)
    (root / "image_classifier" / "labels.txt").write_text("\n".join(LABELS) + "\n")
    onnx_models.save(transpose(), root, "reshaped", config=RESHAPED_CONFIG)
    for name, dims in (("raw_string", 1), ("raw_strings", 2)):
        config = f'max_batch_size: 4\ninput [ {{ name: "INPUT0" data_type: TYPE_STRING dims: [ {dims} ] }} ]\n'
        onnx_models.save(onnx_models.identity("BYTES", ["batch", dims]), root, name, config=config)
    for name, batch in (("onnx_zero_1_float32", 8), ("identity_fp32", 64)):
        config = f'max_batch_size: {batch}\ninput [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]\n'
        config += 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        onnx_models.save(onnx_models.identity("FP32", ["batch", "length"]), root, name, config=config)
    return root
