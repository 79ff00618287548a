"""The shadow's EMF records are the ones Powertools' EphemeralMetrics writes for the same values, field for field."""

from __future__ import annotations

import contextlib
import io
import json
import math
from typing import Any

import numpy as np
import pytest
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from adapters.types import Tensor
from handler.observability.comparison import compare_outputs
from handler.observability.shadow_emf import ShadowEmf

KEY = ("clf", "1", "2")


def powertools(dimensions: dict[str, str], values: list[tuple[str, MetricUnit, float]]) -> dict[str, Any]:
    metrics = EphemeralMetrics(namespace="OIP")
    for name, value in dimensions.items():
        metrics.add_dimension(name, value)
    for name, unit, number in values:
        metrics.add_metric(name, unit, number)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        metrics.flush_metrics()
    return json.loads(out.getvalue())


def ours(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def same(mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert abs(mine["_aws"].pop("Timestamp") - theirs["_aws"].pop("Timestamp")) < 5_000
    assert mine == theirs


def test_a_comparison_is_one_record_per_request_and_per_output(capsys: pytest.CaptureFixture[str]) -> None:
    default = [
        Tensor("probabilities", "FP32", (2, 3), np.array([[0.7, 0.2, 0.1], [0.1, 0.5, 0.4]], np.float32)),
        Tensor("label", "INT64", (2,), np.array([0, 1])),
    ]
    candidate = [
        Tensor("probabilities", "FP32", (2, 3), np.array([[0.6, 0.3, 0.1], [0.1, 0.4, 0.5]], np.float32)),
        Tensor("label", "INT64", (2,), np.array([0, 2])),
    ]
    comparison = compare_outputs(default, candidate)
    ShadowEmf().compared(KEY, comparison)
    request, probabilities, label = ours(capsys)
    dimensions = {"model": "clf", "model_version": "1", "shadow_version": "2"}
    count = MetricUnit.Count
    same(request, powertools(dimensions, [("ShadowCompared", count, 1), ("ShadowAgreement", count, 0)]))
    differences = comparison.outputs[0]
    assert differences.max_abs is not None and differences.max_rel is not None
    same(
        probabilities,
        powertools(
            dimensions | {"output": "probabilities"},
            [
                ("ShadowOutputElements", count, 2),
                ("ShadowOutputAgreement", count, 1),
                ("ShadowMaxAbsDifference", MetricUnit.NoUnit, differences.max_abs),
                ("ShadowMaxRelDifference", MetricUnit.NoUnit, differences.max_rel),
            ],
        ),
    )
    expected = [("ShadowOutputElements", count, 2), ("ShadowOutputAgreement", count, 1)]
    same(label, powertools(dimensions | {"output": "label"}, expected))


def test_a_mismatched_output_disagrees_with_no_infinite_value(capsys: pytest.CaptureFixture[str]) -> None:
    default = [Tensor("scores", "FP32", (1, 2), np.array([[0.5, 0.5]], np.float32))]
    candidate = [Tensor("scores", "FP32", (1, 3), np.array([[0.5, 0.25, 0.25]], np.float32))]
    comparison = compare_outputs(default, candidate)
    assert comparison.outputs[0].max_abs == math.inf
    ShadowEmf().compared(KEY, comparison)
    _, scores = ours(capsys)
    assert scores["ShadowOutputElements"] == [1.0] and scores["ShadowOutputAgreement"] == [0.0]
    assert "ShadowMaxAbsDifference" not in scores and "ShadowMaxRelDifference" not in scores


def test_a_failure_is_one_record_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    ShadowEmf().failed(KEY, "skipped")
    (record,) = ours(capsys)
    dimensions = {"model": "clf", "model_version": "1", "shadow_version": "2", "reason": "skipped"}
    same(record, powertools(dimensions, [("ShadowFailures", MetricUnit.Count, 1)]))
