"""A shadow's disagreement on AWS Lambda with request logging on: the real handler, in a process of its own, puts
one record to a real Firehose API (moto, delivering to S3) holding both answers truncated, beside the requests'
records; its warning line names the disagreeing outputs and holds no value of either answer."""

# covers: handler/inference/shadow.py

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import onnxruntime as ort
import pytest

from handler.inference.shadow import LOGGED_VALUES
from tests.integration.conftest import AWS_TEST_ENV
from tests.support.servers import unique_name
from tests.support.shadow_models import classifier_repository, rows

ROOT = Path(__file__).resolve().parents[2]
EVENT = ROOT / "events" / "http-api" / "infer-json.json"
pytestmark = pytest.mark.integration

#: Calls the handler once per event of the JSON list in argv[1]; writes the answers to argv[2].
SCRIPT = """
import json, sys
from handler.cli.lambda_context import LocalLambdaContext
from handler.http import lambda_handler
events = json.loads(open(sys.argv[1]).read())
answers = [lambda_handler(event, LocalLambdaContext(timeout_ms=60_000)) for event in events]
open(sys.argv[2], "w").write(json.dumps(answers))
"""


def _firehose(bucket: str, stream: str) -> None:
    boto3.client("s3").create_bucket(Bucket=bucket)
    boto3.client("firehose").create_delivery_stream(
        DeliveryStreamName=stream,
        DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "BucketARN": f"arn:aws:s3:::{bucket}",
            "RoleARN": "arn:aws:iam::123456789012:role/firehose",
            "Prefix": "requests/",
        },
    )


def _records(bucket: str) -> list[dict[str, Any]]:
    s3 = boto3.client("s3")
    records = []
    for item in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode()
        records += [json.loads(line) for line in body.splitlines() if line.strip()]
    return records


def _event(array: np.ndarray, request_id: str) -> dict[str, Any]:
    event = json.loads(EVENT.read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v2/models/clf/infer"
    inputs = [{"name": "input", "shape": list(array.shape), "datatype": "FP32", "data": array.ravel().tolist()}]
    event["body"] = json.dumps({"id": request_id, "inputs": inputs})
    return event


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
    _firehose(bucket, stream)
    (tmp_path / "events.json").write_text(json.dumps([_event(agreeing, "alike-1"), _event(disagreeing, "apart-1")]))
    env = {**os.environ, **AWS_TEST_ENV, "AWS_ENDPOINT_URL": aws_env, "MODEL_REPOSITORY": str(tmp_path / "models"),
           "OIP_WARM_UP": "0", "OIP_REQUEST_LOG_SAMPLING": "100", "OIP_REQUEST_LOG_STREAM": stream}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "events.json"), str(tmp_path / "answers.json")],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads((tmp_path / "answers.json").read_text())
    assert [answer["statusCode"] for answer in answers] == [200, 200]

    records = _records(bucket)
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
