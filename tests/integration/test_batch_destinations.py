"""Nothing silently dropped: ``oip invoke`` of the sample batch events (events/batch/*.json) in a real subprocess,
against moto's standalone server. An SQS event without a results destination is refused with one line naming
``OIP_RESULTS_S3_URI`` before any message is predicted; with one, every result is in S3; S3 and Step Functions
events write beside their input and answer where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.aws import aws_environment, oip_invoke, s3_client
from tests.support.servers import unique_name

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events" / "batch"
ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]]


def test_sqs_event_without_a_destination_is_one_line_naming_the_setting() -> None:
    result = oip_invoke(EVENTS / "sqs.json", aws_environment())
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("oip invoke: error: OIP_RESULTS_S3_URI=") and "OIP_RESULTS_QUEUE_URL" in lines[0]
    assert "predict" not in result.stderr  # refused before any message ran: no log line of a message


def test_sqs_event_with_a_destination_writes_every_result(moto_server: str) -> None:
    bucket = unique_name("results")
    s3_client(moto_server).create_bucket(Bucket=bucket)
    env = aws_environment(moto_server, OIP_RESULTS_S3_URI=f"s3://{bucket}/results/")
    result = oip_invoke(EVENTS / "sqs.json", env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"batchItemFailures": []}
    records = json.loads((EVENTS / "sqs.json").read_text())["Records"]
    for record in records:
        key = f"results/iris/{record['messageId']}.json"
        written = json.loads(s3_client(moto_server).get_object(Bucket=bucket, Key=key)["Body"].read())
        assert written["model_name"] == "iris" and written["outputs"], written
    listed = s3_client(moto_server).list_objects_v2(Bucket=bucket)["Contents"]
    assert len(listed) == len(records)


@pytest.mark.parametrize("name", ["s3-put.json", "stepfunctions-items.json"])
def test_file_events_write_beside_the_input_and_say_where(name: str, moto_server: str, tmp_path: Path) -> None:
    bucket = unique_name("batch")
    event_text = (EVENTS / name).read_text().replace("oip-batch-bucket", bucket)
    event = tmp_path / name
    event.write_text(event_text)
    s3 = s3_client(moto_server)
    s3.create_bucket(Bucket=bucket)
    rows = "".join(
        json.dumps({"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": r}]}) + "\n" for r in ROWS
    )
    s3.put_object(Bucket=bucket, Key="input/iris/rows.jsonl", Body=rows.encode())

    result = oip_invoke(event, aws_environment(moto_server))  # no OIP_RESULTS_*: file results go beside their input
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    predictions = s3.get_object(Bucket=bucket, Key="output/iris/rows.jsonl.predictions.jsonl")["Body"].read()
    assert len(predictions.decode().splitlines()) == len(ROWS)
    manifest = json.loads(s3.get_object(Bucket=bucket, Key="output/iris/rows.jsonl.manifest.json")["Body"].read())
    assert manifest["rows_in"] == manifest["rows_out"] == len(ROWS) and manifest["errors"] == 0
    if name == "s3-put.json":
        assert answer["manifests"][0]["output"] == f"s3://{bucket}/output/iris/rows.jsonl.predictions.jsonl"
    else:
        assert answer == {"processed": [{"key": "input/iris/rows.jsonl", "rows": 3, "errors": 0}], "failed": []}
