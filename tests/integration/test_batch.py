"""Event-driven batch prediction against a real S3/SQS API (moto's standalone server on 127.0.0.1), with events
made by ``sam local generate-event`` and filled with real bodies. Count in and count out match in every test."""

# covers: handler/batch/__init__.py
# covers: handler/batch/aws.py
# covers: handler/batch/config.py
# covers: handler/batch/events.py
# covers: handler/batch/routing.py
# covers: handler/batch/s3.py
# covers: handler/batch/sqs.py

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest

from handler import batch
from handler.batch.aws import aws_client
from handler.batch.config import BatchConfig
from handler.batch.s3 import BatchFailed
from handler.cli.lambda_context import LocalLambdaContext
from scripts import lambda_events
from tests.integration.conftest import AWS_TEST_ENV

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ROWS = np.random.default_rng(1).random((8, 4)).round(3).tolist()


@pytest.fixture
def bucket(aws_env: str) -> str:
    name = f"batch-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    aws_client.cache_clear()
    return name


@pytest.fixture
def config(bucket: str, monkeypatch: pytest.MonkeyPatch) -> BatchConfig:
    monkeypatch.setenv("OIP_RESULTS_S3_URI", f"s3://{bucket}/results")
    monkeypatch.setenv("OIP_BATCH_CHUNK_SIZE", "64")
    return BatchConfig.from_env()


def _keys(bucket: str, prefix: str = "") -> list[str]:
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


def _json(bucket: str, key: str) -> Any:
    return json.loads(boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())


def _invoke(event: dict[str, Any]) -> dict[str, Any]:
    return batch.lambda_handler(event, LocalLambdaContext())


def _messages(bodies: list[str]) -> list[tuple[str, str]]:
    return [(str(uuid.uuid4()), body) for body in bodies]


# SQS


def test_good_batch(bucket: str, config: BatchConfig) -> None:
    messages = _messages([lambda_events.iris_request(row, f"req-{i}") for i, row in enumerate(ROWS)])
    response = _invoke(lambda_events.sqs_event(messages))
    assert response == {"batchItemFailures": []}
    keys = _keys(bucket, "results/iris/")
    assert keys == sorted(f"results/iris/{message_id}.json" for message_id, _ in messages)
    result = _json(bucket, f"results/iris/{messages[3][0]}.json")
    assert result["id"] == "req-3" and result["model_version"] == "1"
    head = boto3.client("s3").head_object(Bucket=bucket, Key=f"results/iris/{messages[3][0]}.json")
    assert head["Metadata"] == {"message-id": messages[3][0], "request-id": "req-3"}


def test_one_poisoned_message_fails_alone(bucket: str, config: BatchConfig) -> None:
    bodies = [lambda_events.iris_request(row) for row in ROWS[:4]]
    bodies.insert(
        2, '{"model_name": "iris", "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1]}]}'
    )
    messages = _messages(bodies)
    response = _invoke(lambda_events.sqs_event(messages))
    poisoned = messages[2][0]
    assert response == {"batchItemFailures": [{"itemIdentifier": poisoned}]}
    assert len(_keys(bucket, "results/iris/")) == 4
    error = _json(bucket, f"results/errors/{poisoned}.json")
    assert "needs 4 elements but the data holds 1" in error["error"]
    # a request without an id answers with the message id, so results are keyed and named alike
    assert _json(bucket, f"results/iris/{messages[0][0]}.json")["id"] == messages[0][0]


def test_redelivery_writes_no_duplicates(bucket: str, config: BatchConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    queue_url = boto3.client("sqs").create_queue(QueueName=f"results-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    monkeypatch.setenv("OIP_RESULTS_QUEUE_URL", queue_url)
    messages = _messages([lambda_events.iris_request(row) for row in ROWS[:5]])
    event = lambda_events.sqs_event(messages)
    first = _invoke(event)
    before = {key: _json(bucket, key) for key in _keys(bucket, "results/")}
    second = _invoke(event)  # the same messages delivered again
    assert first == second == {"batchItemFailures": []}
    assert {key: _json(bucket, key) for key in _keys(bucket, "results/")} == before
    sqs = boto3.client("sqs")
    received = []
    while batch_ := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get(
        "Messages", []
    ):
        received += batch_
        for message in batch_:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    assert sorted(json.loads(m["Body"])["id"] for m in received) == sorted(message_id for message_id, _ in messages)
    assert all(m["MessageAttributes"]["message_id"]["StringValue"] == json.loads(m["Body"])["id"] for m in received)


def test_unknown_model_fails_every_item_clearly(bucket: str, config: BatchConfig) -> None:
    messages = _messages([lambda_events.iris_request(row, model="absent") for row in ROWS[:3]])
    response = _invoke(lambda_events.sqs_event(messages))
    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == sorted(m for m, _ in messages)
    for message_id, _ in messages:
        assert "unknown model: 'absent'" in _json(bucket, f"results/errors/{message_id}.json")["error"]


def test_failed_messages_reach_the_dlq(aws_env: str, bucket: str, config: BatchConfig) -> None:
    """The event source mapping's contract, played against a real queue: successes are deleted, failures
    stay, and after maxReceiveCount receives SQS moves them to the DLQ."""
    sqs = boto3.client("sqs")
    dlq_url = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
    queue_url = sqs.create_queue(
        QueueName=f"requests-{uuid.uuid4().hex[:8]}", Attributes={"RedrivePolicy": redrive, "VisibilityTimeout": "0"}
    )["QueueUrl"]
    bodies = [lambda_events.iris_request(ROWS[0]), "not json at all", lambda_events.iris_request(ROWS[1])]
    for body in bodies:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    for _ in range(3):
        received = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"])
        messages = received.get("Messages", [])
        if not messages:
            continue
        event = lambda_events.sqs_event([(m["MessageId"], m["Body"]) for m in messages])
        failures = {f["itemIdentifier"] for f in _invoke(event)["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failures:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    dead = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10).get("Messages", [])
    assert [m["Body"] for m in dead] == ["not json at all"]
    assert "malformed JSON" in _json(bucket, f"results/errors/{dead[0]['MessageId']}.json")["error"]
    assert len(_keys(bucket, "results/iris/")) == 2


def test_http_function_routes_queue_events_to_batch(bucket: str, config: BatchConfig) -> None:
    from handler.http import lambda_handler

    messages = _messages([lambda_events.iris_request(ROWS[0])])
    assert lambda_handler(lambda_events.sqs_event(messages), LocalLambdaContext()) == {"batchItemFailures": []}


# S3 files


def _put_jsonl(bucket: str, key: str, lines: list[str]) -> None:
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body="\n".join(lines).encode() + b"\n")


def _read_lines(bucket: str, key: str) -> list[dict]:
    body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    return [json.loads(line) for line in body.splitlines()]


def test_s3_jsonl_file_in_order_with_manifest(bucket: str, config: BatchConfig) -> None:
    lines = [
        json.dumps(json.loads(lambda_events.iris_request(row)) | {"id": f"r{i}"}) for i, row in enumerate(ROWS * 20)
    ]
    lines[7] = "{broken"
    _put_jsonl(bucket, "input/iris/day1.jsonl", lines)
    response = _invoke(lambda_events.s3_put_event(bucket, "input/iris/day1.jsonl"))
    assert response["files"] == 1
    output = _read_lines(bucket, "output/iris/day1.jsonl.predictions.jsonl")
    assert len(output) == len(lines)
    assert [o.get("id") for o in output] == [f"r{i}" if i != 7 else None for i in range(len(lines))]
    assert output[7] == {"line": 8, "error": output[7]["error"]} and "malformed JSON" in output[7]["error"]
    manifest = _json(bucket, "output/iris/day1.jsonl.manifest.json")
    assert (manifest["rows_in"], manifest["rows_out"], manifest["errors"]) == (len(lines), len(lines), 1)
    assert (manifest["model"], manifest["model_version"]) == ("iris", "1")
    assert manifest["input"] == f"s3://{bucket}/input/iris/day1.jsonl"
    assert manifest["seconds"] > 0 and manifest["error_samples"][0]["line"] == 8


def test_eventbridge_object_created_event(bucket: str, config: BatchConfig) -> None:
    # What the template wires: S3 -> EventBridge "Object Created" -> the batch function.
    _put_jsonl(bucket, "input/iris/eb.jsonl", [lambda_events.iris_request(row) for row in ROWS])
    event = {"version": "0", "source": "aws.s3", "detail-type": "Object Created",
             "detail": {"bucket": {"name": bucket}, "object": {"key": "input/iris/eb.jsonl", "size": 1}}}  # fmt: skip
    assert _invoke(event)["manifests"][0]["rows_out"] == len(ROWS)


def test_outputs_do_not_trigger_predictions(bucket: str, config: BatchConfig) -> None:
    _put_jsonl(bucket, "output/iris/x.jsonl.predictions.jsonl", ['{"id": "1"}'])
    assert _invoke(lambda_events.s3_put_event(bucket, "output/iris/x.jsonl.predictions.jsonl")) == {
        "files": 0,
        "manifests": [],
    }


def test_s3_rerun_writes_no_duplicates(bucket: str, config: BatchConfig) -> None:
    _put_jsonl(bucket, "input/iris/again.jsonl", [lambda_events.iris_request(row) for row in ROWS])
    event = lambda_events.s3_put_event(bucket, "input/iris/again.jsonl")
    _invoke(event)
    first = _keys(bucket, "output/"), _read_lines(bucket, "output/iris/again.jsonl.predictions.jsonl")
    second_response = _invoke(event)
    assert second_response["manifests"][0]["skipped"] is True
    assert (_keys(bucket, "output/"), _read_lines(bucket, "output/iris/again.jsonl.predictions.jsonl")) == first


def test_s3_npy_file(bucket: str, config: BatchConfig, tmp_path: Path) -> None:
    array = np.random.default_rng(2).random((300, 4)).astype(np.float32)
    np.save(tmp_path / "rows.npy", array)
    boto3.client("s3").upload_file(str(tmp_path / "rows.npy"), bucket, "input/iris/rows.npy")
    _invoke(lambda_events.s3_put_event(bucket, "input/iris/rows.npy"))
    output = _read_lines(bucket, "output/iris/rows.npy.predictions.jsonl")
    assert len(output) == 300
    expected = array @ (
        2 * np.array([[5.006, 3.428, 1.462, 0.246], [5.936, 2.77, 4.26, 1.326], [6.588, 2.974, 5.552, 2.026]]).T
    )
    assert output[0]["outputs"][1]["name"] == "label"
    assert output[5]["outputs"][1]["data"] == [
        int(
            np.argmax(
                expected[5]
                - (
                    np.array([[5.006, 3.428, 1.462, 0.246], [5.936, 2.77, 4.26, 1.326], [6.588, 2.974, 5.552, 2.026]])
                    ** 2
                ).sum(1)
            )
        )
    ]


def test_s3_unknown_model_fails_every_line(bucket: str, config: BatchConfig) -> None:
    _put_jsonl(bucket, "input/absent/x.jsonl", [lambda_events.iris_request(row, model="absent") for row in ROWS])
    _invoke(lambda_events.s3_put_event(bucket, "input/absent/x.jsonl"))
    output = _read_lines(bucket, "output/absent/x.jsonl.predictions.jsonl")
    assert len(output) == len(ROWS)
    assert all("Request for unknown model: 'absent' is not found" in line["error"] for line in output)
    assert _json(bucket, "output/absent/x.jsonl.manifest.json")["errors"] == len(ROWS)


# Step Functions Distributed Map


def test_step_functions_item_batch(bucket: str, config: BatchConfig) -> None:
    for name in ("a", "b"):
        _put_jsonl(bucket, f"input/iris/{name}.jsonl", [lambda_events.iris_request(row) for row in ROWS])
    event = {"Items": [{"Key": "input/iris/a.jsonl", "Size": 1}, {"Key": "input/iris/b.jsonl", "Size": 1}],
             "BatchInput": {"bucket": bucket}}  # fmt: skip
    keys = ("input/iris/a.jsonl", "input/iris/b.jsonl")
    assert _invoke(event) == {"processed": [{"key": k, "rows": 8, "errors": 0} for k in keys], "failed": []}


def test_step_functions_failed_item_fails_the_batch_but_not_the_others(bucket: str, config: BatchConfig) -> None:
    _put_jsonl(bucket, "input/iris/ok.jsonl", [lambda_events.iris_request(row) for row in ROWS])
    event = {
        "Items": [{"Key": "input/iris/missing.jsonl"}, {"Key": "input/iris/ok.jsonl"}],
        "BatchInput": {"bucket": bucket},
    }
    with pytest.raises(BatchFailed, match=r"missing\.jsonl"):
        _invoke(event)
    assert "output/iris/ok.jsonl.manifest.json" in _keys(bucket, "output/")


def test_unrecognised_event_is_refused() -> None:
    with pytest.raises(Exception, match="unrecognised event"):
        batch.lambda_handler({"hello": "world"}, LocalLambdaContext())


# A large file, streamed


def test_100k_line_file_streams_with_bounded_memory(aws_env: str, bucket: str, tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    rng = np.random.default_rng(3)
    with source.open("w") as handle:
        for i, row in enumerate(rng.random((100_000, 4)).round(4).tolist()):
            handle.write(
                json.dumps(
                    {"id": str(i), "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row}]}
                )
                + "\n"
            )
    boto3.client("s3").upload_file(str(source), bucket, "input/iris/big.jsonl")
    program = f"""
import json, resource
from handler.batch.config import BatchConfig
from handler.batch.s3 import process_object
from handler.runtime import container
from handler.batch.service import batch_service
service = batch_service()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
manifest = process_object({bucket!r}, "input/iris/big.jsonl", BatchConfig.from_env(), service)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
counts = {{k: manifest[k] for k in ("rows_in", "rows_out", "errors", "rows_per_second")}}
print(json.dumps({{"before_kb": before, "after_kb": after, **counts}}))
"""
    env = {**AWS_TEST_ENV, "AWS_ENDPOINT_URL": aws_env, "OIP_BATCH_CHUNK_SIZE": "512", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    size_mb = source.stat().st_size / 1e6
    growth_mb = (measured["after_kb"] - measured["before_kb"]) / 1024
    print(
        f"\\n100k lines ({size_mb:.1f} MB): peak RSS grew {growth_mb:.1f} MB; {measured['rows_per_second']:.0f} rows/s"
    )
    assert (measured["rows_in"], measured["rows_out"], measured["errors"]) == (100_000, 100_000, 0)
    assert growth_mb < size_mb, "the file was held in memory"
    assert len(_read_lines(bucket, "output/iris/big.jsonl.predictions.jsonl")) == 100_000
