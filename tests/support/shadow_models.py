"""A small classifier built with onnx.helper, in versions that answer alike or apart: the models of the shadow
and comparison tests (``oip batch --compare-version``, live shadow serving)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.support.onnx_models import OPSET

FEATURES, CLASSES = 4, 3
#: Version 1's weights; the perturbed version adds noise of this scale, enough to move some rows' class.
WEIGHTS = np.random.default_rng(7).normal(size=(FEATURES, CLASSES)).astype(np.float32)
BIAS = np.array([0.1, -0.2, 0.05], dtype=np.float32)
PERTURBATION = 0.35


def classifier(weights: np.ndarray, bias: np.ndarray) -> onnx.ModelProto:
    """``input`` FP32 [-1, 4] -> ``probabilities`` FP32 [-1, 3] (softmax of a linear layer) and ``label`` INT64
    [-1] (their argmax)."""
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["input", "weights"], ["product"]),
            helper.make_node("Add", ["product", "bias"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
            helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0),
        ],
        "classifier",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", FEATURES])],
        [
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["n", CLASSES]),
            helper.make_tensor_value_info("label", TensorProto.INT64, ["n"]),
        ],
        [numpy_helper.from_array(weights, "weights"), numpy_helper.from_array(bias, "bias")],
    )
    return helper.make_model(graph, opset_imports=OPSET, ir_version=8)


def perturbed_weights() -> np.ndarray:
    noise = np.random.default_rng(11).normal(scale=PERTURBATION, size=WEIGHTS.shape).astype(np.float32)
    return WEIGHTS + noise


def classifier_repository(root: Path, name: str, perturbed: bool, parameters: dict[str, str] | None = None) -> Path:
    """``root/name`` with version 1 and version 2 (version 1 perturbed, or identical), version 1 the default;
    ``parameters`` join config.pbtxt's."""
    for version, weights in ((1, WEIGHTS), (2, perturbed_weights() if perturbed else WEIGHTS)):
        directory = root / name / str(version)
        directory.mkdir(parents=True, exist_ok=True)
        onnx.save(classifier(weights, BIAS), directory / "model.onnx")
    entries = {"default_version": "1", **(parameters or {})}
    config = "".join(
        f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n' for key, value in entries.items()
    )
    (root / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "onnxruntime"\n{config}')
    return root / name


def rows(count: int, seed: int = 3) -> np.ndarray:
    """``count`` input rows, FP32 [count, 4]."""
    return np.random.default_rng(seed).normal(scale=1.5, size=(count, FEATURES)).astype(np.float32)
