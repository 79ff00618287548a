"""A shadow's disagreement as the request log records it: the comparison and both answers, each output's first
values (BYTES as text, each its first characters), in a record with the request records' columns."""

# covers: handler/inference/shadow.py

from __future__ import annotations

import json

import numpy as np

from adapters.repository.shadow import ShadowPlan
from adapters.types import InferCall, InferResult, Tensor
from handler.inference.shadow import LOGGED_CHARACTERS, LOGGED_VALUES, Copy, shadow_record
from handler.observability.comparison import compare_outputs
from handler.observability.request_log import RequestLogSampler

COLUMNS = {"model", "model_version", "time", "raw_data", "raw_prediction", "groundtruth"}


def _answer(version: str, labels: list[int], text: bytes) -> InferResult:
    outputs = (
        Tensor("label", "INT64", (len(labels),), np.array(labels, dtype=np.int64)),
        Tensor("note", "BYTES", (1,), np.array([text], dtype=object)),
    )
    return InferResult("clf", version, outputs)


def _disagreement() -> tuple[Copy, InferResult]:
    default = _answer("1", list(range(12)), "é".encode() * 100)
    shadowed = _answer("2", [*range(11), 0], b"short")
    call = InferCall((Tensor("x", "FP32", (1,), np.zeros(1, dtype=np.float32)),), id="req-7")
    return Copy(("clf", "1", "2"), ShadowPlan("2"), call, default), shadowed


def test_the_record_holds_both_answers_truncated_and_each_outputs_comparison() -> None:
    copy, shadowed = _disagreement()
    record = shadow_record(copy, shadowed, compare_outputs(copy.result.outputs, shadowed.outputs))
    assert (record["shadow_version"], record["request_id"]) == ("2", "req-7")
    default, shadow = ({o["name"]: o for o in record[k]} for k in ("default", "shadow"))
    assert default["label"] == {
        "name": "label",
        "datatype": "INT64",
        "shape": [12],
        "data": list(range(LOGGED_VALUES)),
        "truncated": True,
    }
    assert shadow["label"]["data"] == list(range(LOGGED_VALUES))
    assert default["note"]["data"] == ["é" * LOGGED_CHARACTERS] and shadow["note"]["data"] == ["short"]
    comparison = {c["name"]: c for c in record["comparison"]}
    assert (comparison["label"]["disagreeing"], comparison["label"]["elements"]) == (1, 12)
    assert comparison["note"]["agrees"] is False


def test_log_shadow_writes_one_record_with_the_request_records_columns() -> None:
    copy, shadowed = _disagreement()
    sink: list[bytes] = []
    shadow = shadow_record(copy, shadowed, compare_outputs(copy.result.outputs, shadowed.outputs))
    RequestLogSampler(0, sink.append).log_shadow("clf", "1", shadow)  # sampling does not choose disagreements
    (line,) = sink
    record = json.loads(line)
    assert set(record) == COLUMNS and line.endswith(b"\n")
    assert (record["model"], record["model_version"], record["raw_data"], record["groundtruth"]) == (
        "clf",
        "1",
        None,
        None,
    )
    assert json.loads(record["raw_prediction"]) == json.loads(json.dumps(shadow))


def test_a_failing_sink_never_fails_the_shadow() -> None:
    def broken(_: bytes) -> None:
        raise OSError("stream gone")

    RequestLogSampler(100, broken).log_shadow("clf", "1", {"shadow_version": "2"})
