"""``oip redrive``: the batch function's on-failure records (Lambda's asynchronous-invocation destination,
an SQS queue) re-driven against moto's standalone S3/SQS server, in a real subprocess."""

# covers: handler/cli/redrive.py

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import boto3
import pytest

pytestmark = pytest.mark.integration

ROW = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}]}


def on_failure_record(bucket: str, key: str) -> dict[str, Any]:
    """What Lambda sends to an on-failure destination after the retries of an asynchronous invocation
    (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html), here for the
    EventBridge "Object Created" event of the template's FileCreated rule."""
    event = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Object Created",
        "source": "aws.s3",
        "region": "us-east-1",
        "detail": {"bucket": {"name": bucket}, "object": {"key": key, "size": 1}},
    }
    return {
        "version": "1.0",
        "timestamp": "2024-01-01T00:00:00.000Z",
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:oip-batch:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": 3,
        },
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": "Task timed out after 900.00 seconds"},
    }


def oip_redrive(queue_url: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "handler.cli", "redrive", queue_url]
    return subprocess.run(command, env=dict(os.environ), capture_output=True, text=True, timeout=120)


def test_a_failed_files_record_is_redriven_and_predicted_once(aws_env: str) -> None:
    s3, sqs = boto3.client("s3"), boto3.client("sqs")
    bucket = f"batch-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    queue_url = sqs.create_queue(QueueName=f"failed-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    key = "input/iris/rows.jsonl"
    s3.put_object(Bucket=bucket, Key=key, Body=("\n".join([json.dumps(ROW)] * 3) + "\n").encode())
    record = json.dumps(on_failure_record(bucket, key))
    sqs.send_message(QueueUrl=queue_url, MessageBody=record)
    sqs.send_message(QueueUrl=queue_url, MessageBody=record)  # the same file failed twice (or was delivered twice)

    result = oip_redrive(queue_url)
    assert result.returncode == 0, result.stderr
    assert "1 predicted, 1 already done, 0 failed" in result.stderr
    predictions = s3.get_object(Bucket=bucket, Key="output/iris/rows.jsonl.predictions.jsonl")["Body"].read()
    lines = [json.loads(line) for line in predictions.splitlines()]
    assert [line["outputs"][1]["data"] for line in lines] == [[2], [2], [2]]
    manifest_key = "output/iris/rows.jsonl.manifest.json"
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=manifest_key)["Body"].read())
    assert (manifest["rows_in"], manifest["rows_out"], manifest["complete"]) == (3, 3, True)
    written = s3.head_object(Bucket=bucket, Key=manifest_key)["LastModified"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == attributes["ApproximateNumberOfMessagesNotVisible"] == "0"

    sqs.send_message(QueueUrl=queue_url, MessageBody=record)  # re-driven again later: not predicted twice
    result = oip_redrive(queue_url)
    assert result.returncode == 0 and "0 predicted, 1 already done" in result.stderr
    assert s3.head_object(Bucket=bucket, Key=manifest_key)["LastModified"] == written


def test_a_record_that_fails_again_stays_on_the_queue(aws_env: str) -> None:
    s3, sqs = boto3.client("s3"), boto3.client("sqs")
    bucket = f"batch-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    queue_url = sqs.create_queue(QueueName=f"failed-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(on_failure_record(bucket, "input/iris/gone.jsonl")))
    result = oip_redrive(queue_url)
    assert result.returncode == 1 and "0 predicted, 0 already done, 1 failed" in result.stderr
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    counts = [int(attributes[f"ApproximateNumberOfMessages{kind}"]) for kind in ("", "NotVisible")]
    assert sum(counts) == 1


def test_a_wrong_queue_is_one_line(aws_env: str) -> None:
    result = oip_redrive(f"{aws_env}/123456789012/no-such-queue")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
