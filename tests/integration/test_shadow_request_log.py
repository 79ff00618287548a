"""A shadow's disagreement on AWS Lambda with request logging on: the real handler, in a process of its own, puts
one record to a real Firehose API (moto, delivering to S3) holding both answers truncated, beside the requests'
records; its warning line names the disagreeing outputs and holds no value of either answer."""

# covers: handler/inference/shadow.py

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from handler.inference.shadow import LOGGED_VALUES
from tests.support import lambda_process
from tests.support.aws import aws_environment
from tests.support.firehose import delivered_records, firehose_to_s3
from tests.support.lambda_process import http_event
from tests.support.servers import unique_name
from tests.support.shadow_models import body, classifier_repository, rows

pytestmark = pytest.mark.integration


def _event(array: np.ndarray, request_id: str) -> dict[str, Any]:
    return http_event({"id": request_id, **body(array)}, "/v2/models/clf/infer")


def _sessions(model: Path) -> tuple[ort.InferenceSession, ort.InferenceSession]:
    one, two = (ort.InferenceSession(str(model / v / "model.onnx"), providers=["CPUExecutionProvider"]) for v in "12")
    return one, two


def test_a_disagreement_is_one_request_log_record_with_both_answers_truncated(aws_env: str, tmp_path: Path) -> None:
    model = classifier_repository(tmp_path / "models", "clf", perturbed=True, parameters={"shadow_version": "2"})
    one, two = _sessions(model)
    candidates = rows(200, seed=3)
    labels = [
        (one.run(["label"], {"input": r[None]})[0][0], two.run(["label"], {"input": r[None]})[0][0]) for r in candidates
    ]
    apart = [r for r, (a, b) in zip(candidates, labels, strict=True) if a != b]
    alike = [r for r, (a, b) in zip(candidates, labels, strict=True) if a == b]
    assert apart and len(alike) >= 3
    agreeing = np.stack(alike[:1])
    disagreeing = np.stack([apart[0], alike[1], alike[2]])  # 9 probabilities: more than a record holds
    bucket, stream = unique_name("shadow-logs"), unique_name("shadow-stream")
    firehose_to_s3(bucket, stream)
    events = [_event(agreeing, "alike-1"), _event(disagreeing, "apart-1")]
    env = aws_environment(aws_env, OIP_REQUEST_LOG_SAMPLING="100", OIP_REQUEST_LOG_STREAM=stream)
    done = lambda_process.invoke(events, tmp_path / "models", tmp_path, env=env)
    answers = done.answers
    assert [answer["statusCode"] for answer in answers] == [200, 200]

    records = delivered_records(bucket)
    requests = [r for r in records if r["raw_data"] is not None]
    (record,) = [r for r in records if r["raw_data"] is None]
    assert len(requests) == 2  # the requests' own records, as without a shadow
    assert record["model"] == "clf" and record["model_version"] == "1" and record["groundtruth"] is None
    logged = json.loads(record["raw_prediction"])
    assert logged["shadow_version"] == "2" and logged["request_id"] == "apart-1"
    p1, l1 = one.run(["probabilities", "label"], {"input": disagreeing})
    p2, l2 = two.run(["probabilities", "label"], {"input": disagreeing})
    for answer, (probabilities, label) in (("default", (p1, l1)), ("shadow", (p2, l2))):
        outputs = {o["name"]: o for o in logged[answer]}
        assert outputs["probabilities"]["shape"] == [3, 3] and outputs["probabilities"]["truncated"] is True
        assert outputs["probabilities"]["data"] == pytest.approx(probabilities.ravel()[:LOGGED_VALUES].tolist())
        assert outputs["label"]["data"] == label.tolist() and outputs["label"]["truncated"] is False
    comparison = {c["name"]: c for c in logged["comparison"]}
    assert comparison["label"]["disagreeing"] == 1 and comparison["label"]["elements"] == 3
    largest = float(np.abs(p1.astype(np.float64) - p2.astype(np.float64)).max())
    assert comparison["probabilities"]["max_abs"] == pytest.approx(largest, abs=1e-6)

    log = done.stdout + done.stderr
    (warning,) = [line for line in log.splitlines() if "shadow disagreement" in line]
    pattern = (
        r"shadow disagreement: model clf version 1 against 2, request id apart-1: probabilities 1 of 3 elements "
        r"disagree, max abs difference [0-9.e+-]+, max rel difference [0-9.e+-]+; label 1 of 3 elements disagree$"
    )
    assert re.search(pattern, warning), warning
    for value in [*p1.ravel().tolist(), *p2.ravel().tolist()]:  # no value of either answer in any log line
        assert repr(value) not in log
