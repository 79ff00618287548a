"""The sampling parameter gates payload logging end to end: ``oip invoke`` (the real Lambda handler) with
OIP_REQUEST_LOG_SAMPLING 0 and 100, records put to a real Firehose API (moto) that delivers them to S3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from tests.integration.conftest import AWS_TEST_ENV
from tests.support.servers import unique_name

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


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


def _invoke(aws_env: str, percentage: int, stream: str) -> str:
    env = {**os.environ, **AWS_TEST_ENV, "AWS_ENDPOINT_URL": aws_env, "OIP_REQUEST_LOG_SAMPLING": str(percentage),
           "OIP_REQUEST_LOG_STREAM": stream}  # fmt: skip
    event = ROOT / "events" / "http-api" / "infer-json.json"
    result = subprocess.run([sys.executable, "-m", "handler.cli", "invoke", str(event)], capture_output=True,
                            text=True, env=env, cwd=ROOT, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + result.stderr


def _records(bucket: str) -> list[dict]:
    s3 = boto3.client("s3")
    records = []
    for item in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode()
        records += [json.loads(line) for line in body.splitlines() if line.strip()]
    return records


def test_zero_percent_logs_nothing(aws_env: str) -> None:
    bucket, stream = unique_name("logs-zero"), unique_name("stream-zero")
    _firehose(bucket, stream)
    output = _invoke(aws_env, 0, stream)
    assert _records(bucket) == []
    assert "5.099999904632568" not in output  # the request's first value (float32 5.1) is in no log line


def test_hundred_percent_logs_the_pair(aws_env: str) -> None:
    bucket, stream = unique_name("logs-all"), unique_name("stream-all")
    _firehose(bucket, stream)
    _invoke(aws_env, 100, stream)
    (record,) = _records(bucket)
    assert record["model"] == "iris" and record["model_version"] == "1"
    assert json.loads(record["raw_data"])["inputs"][0]["data"][0] == pytest.approx([5.1, 3.5, 1.4, 0.2])
    assert json.loads(record["raw_prediction"])["id"] == "1"
    assert record["groundtruth"] is None
