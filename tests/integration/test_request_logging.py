"""The sampling parameter gates payload logging end to end: ``oip invoke`` (the real Lambda handler) with
OIP_REQUEST_LOG_SAMPLING 0 and 100, records put to a real Firehose API (moto) that delivers them to S3."""

from __future__ import annotations

import json

import pytest

from tests.support.aws import ROOT, aws_environment, oip_invoke
from tests.support.firehose import delivered_records, firehose_to_s3
from tests.support.servers import unique_name

pytestmark = pytest.mark.integration


def _invoke(aws_env: str, percentage: int, stream: str) -> str:
    env = aws_environment(aws_env, OIP_REQUEST_LOG_SAMPLING=str(percentage), OIP_REQUEST_LOG_STREAM=stream)
    result = oip_invoke(ROOT / "events" / "http-api" / "infer-json.json", env)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + result.stderr


def test_zero_percent_logs_nothing(aws_env: str) -> None:
    bucket, stream = unique_name("logs-zero"), unique_name("stream-zero")
    firehose_to_s3(bucket, stream)
    output = _invoke(aws_env, 0, stream)
    assert delivered_records(bucket) == []
    assert "5.099999904632568" not in output  # the request's first value (float32 5.1) is in no log line


def test_hundred_percent_logs_the_pair(aws_env: str) -> None:
    bucket, stream = unique_name("logs-all"), unique_name("stream-all")
    firehose_to_s3(bucket, stream)
    _invoke(aws_env, 100, stream)
    (record,) = delivered_records(bucket)
    assert record["model"] == "iris" and record["model_version"] == "1"
    assert json.loads(record["raw_data"])["inputs"][0]["data"][0] == pytest.approx([5.1, 3.5, 1.4, 0.2])
    assert json.loads(record["raw_prediction"])["id"] == "1"
    assert record["groundtruth"] is None
