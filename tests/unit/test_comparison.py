"""Two answers compared output by output (handler/observability/comparison.py): exact outputs value by value,
floats by their largest differences, class scores by their argmax, and mismatches never agreeing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adapters.types import Tensor
from handler.observability.comparison import compare_outputs, compare_tensor, float_differences


def tensor(name: str, datatype: str, values: object, dtype: object = None) -> Tensor:
    array = np.asarray(values, dtype=dtype)
    return Tensor(name, datatype, tuple(array.shape), array)


def test_bytes_and_integers_agree_value_by_value() -> None:
    ours = tensor("text", "BYTES", [b"cat", b"dog", "é".encode()], object)
    theirs = tensor("text", "BYTES", [b"cat", b"cow", "é".encode()], object)
    found = compare_tensor(ours, theirs)
    assert (found.elements, found.agreeing, found.agrees, found.max_abs) == (3, 2, False, None)
    labels = compare_tensor(
        tensor("label", "INT64", [1, 2, 0], np.int64), tensor("label", "INT64", [1, 2, 0], np.int64)
    )
    assert (labels.elements, labels.agreeing, labels.agrees) == (3, 3, True)


def test_class_scores_agree_by_argmax_and_report_their_differences() -> None:
    ours = tensor("p", "FP32", [[0.7, 0.2, 0.1], [0.4, 0.5, 0.1]], np.float32)
    theirs = tensor("p", "FP32", [[0.6, 0.3, 0.1], [0.5, 0.4, 0.1]], np.float32)
    found = compare_tensor(ours, theirs)
    assert (found.elements, found.agreeing) == (2, 1)
    a, b = ours.data.astype(np.float64), theirs.data.astype(np.float64)
    assert found.max_abs == pytest.approx(np.abs(a - b).max())
    assert found.max_rel == pytest.approx((np.abs(a - b) / np.maximum(np.abs(a), np.abs(b))).max())


def test_a_float_output_that_is_no_class_scores_is_judged_by_differences_alone() -> None:
    found = compare_tensor(tensor("y", "FP64", [1.0, 2.0]), tensor("y", "FP64", [1.0, 2.5]))
    assert (found.elements, found.agreeing, found.agrees, found.max_abs, found.max_rel) == (0, 0, True, 0.5, 0.2)


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [
        ([math.nan, 1.0], [math.nan, 1.0], (0.0, 0.0)),
        ([math.inf, 0.0], [math.inf, 0.0], (0.0, 0.0)),
        ([math.nan, 1.0], [2.0, 1.0], (math.inf, math.inf)),
        ([math.inf], [-math.inf], (math.inf, math.inf)),
        ([], [], (0.0, 0.0)),
    ],
)
def test_float_differences_of_nan_infinity_and_empty(ours: list, theirs: list, expected: tuple) -> None:
    assert float_differences(np.asarray(ours), np.asarray(theirs)) == expected


def test_a_missing_or_reshaped_output_is_mismatched_and_never_agrees() -> None:
    ours = [tensor("p", "FP32", [[0.5, 0.5]], np.float32), tensor("label", "INT64", [1], np.int64)]
    found = compare_outputs(ours, [tensor("p", "FP32", [0.5, 0.5], np.float32)])
    p, label = found.outputs
    assert (p.matched, p.elements, p.agreeing, p.max_abs) == (False, 1, 0, math.inf)
    assert (label.matched, label.elements, label.agreeing, label.max_abs) == (False, 1, 0, None)
    assert not found.agrees
    other_type = compare_tensor(ours[1], tensor("label", "INT32", [1], np.int32))
    assert not other_type.matched and not other_type.agrees
