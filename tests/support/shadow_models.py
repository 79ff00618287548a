"""A small classifier built with onnx.helper, in versions that answer alike or apart: the models of the shadow
and comparison tests (``oip batch --compare-version``, live shadow serving)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tests.support.onnx_models import OPSET
from tests.support.overload_models import forever

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


def request_arrays(count: int, seed: int) -> list[np.ndarray]:
    """``count`` requests' inputs: most one row, every fifth three rows."""
    data = rows(count * 3, seed=seed)
    return [data[i * 3 : i * 3 + (3 if i % 5 == 0 else 1)] for i in range(count)]


def body(array: np.ndarray) -> dict[str, Any]:
    """The V2 request of ``array`` as the classifier's ``input``."""
    return {
        "inputs": [{"name": "input", "shape": list(array.shape), "datatype": "FP32", "data": array.ravel().tolist()}]
    }


def failing_candidate(root: Path) -> None:
    """``root/clf`` shadowed by a version 2 that takes five features, not four: onnxruntime refuses every copy of a
    default request."""
    classifier_repository(root, "clf", perturbed=False, parameters={"shadow_version": "2"})
    graph = helper.make_graph(
        [helper.make_node("ArgMax", ["input"], ["label"], axis=1, keepdims=0)],
        "five",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 5])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["n"])],
    )
    onnx.save(helper.make_model(graph, opset_imports=OPSET, ir_version=8), root / "clf" / "2" / "model.onnx")


def endless_candidate(root: Path, timeout_ms: int) -> dict[str, Any]:
    """``root/clf``: version 1 an identity, shadowed by a version 2 that runs until it is stopped
    (tests/support/overload_models.py ``forever``) with ``shadow_timeout_ms``; a request for them."""
    identity = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "fast",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 1])],
    )
    for version, model in (("1", helper.make_model(identity, opset_imports=OPSET, ir_version=8)), ("2", forever())):
        (root / "clf" / version).mkdir(parents=True)
        onnx.save(model, root / "clf" / version / "model.onnx")
    (root / "clf" / "config.pbtxt").write_text(
        'name: "clf"\nparameters { key: "default_version" value { string_value: "1" } }\n'
        'parameters { key: "shadow_version" value { string_value: "2" } }\n'
        f'parameters {{ key: "shadow_timeout_ms" value {{ string_value: "{timeout_ms}" }} }}\n'
    )
    return {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.5]}]}


@dataclass
class ByHand:
    """What a shadow comparison of versions 1 and 2 must count, from two onnxruntime sessions run directly."""

    agreeing: int = 0  #: requests whose labels all agree
    label_agreeing: int = 0  #: label elements that agree
    elements: int = 0  #: label elements
    largest: list[float] = field(default_factory=list)  #: each request's max abs difference of probabilities
    labels: list[list[int]] = field(default_factory=list)  #: version 1's labels, each request's
    values: set[str] = field(default_factory=set)  #: every probability either version gave, as repr


def by_hand(model: Path, arrays: list[np.ndarray]) -> ByHand:
    """Versions 1 and 2 of the classifier at ``model`` run on each of ``arrays`` and compared."""
    one, two = (ort.InferenceSession(str(model / v / "model.onnx"), providers=["CPUExecutionProvider"]) for v in "12")
    hand = ByHand()
    for array in arrays:
        p1, l1 = one.run(["probabilities", "label"], {"input": array})
        p2, l2 = two.run(["probabilities", "label"], {"input": array})
        hand.labels.append(l1.tolist())
        hand.values.update(repr(v) for v in (*p1.ravel().tolist(), *p2.ravel().tolist()))
        hand.label_agreeing += int((l1 == l2).sum())
        hand.elements += l1.size
        hand.agreeing += bool((l1 == l2).all())
        hand.largest.append(float(np.abs(p1.astype(np.float64) - p2.astype(np.float64)).max()))
    return hand
