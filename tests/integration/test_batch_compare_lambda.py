"""The batch Lambda function compares a candidate version as ``oip batch --compare-version`` does: ``oip invoke`` of
an S3 ObjectCreated event (the object's ``compare-version`` metadata) and of a Step Functions item batch (the
execution input's ``compare_version``), in a real subprocess against moto's standalone server; the report written
beside the output equals a hand computation with onnxruntime's two sessions."""

# covers: handler/batch/s3_compare.py

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from tests.support.aws import aws_environment, oip_invoke, s3_client
from tests.support.servers import unique_name
from tests.support.shadow_models import classifier_repository, rows

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events" / "batch"
ROWS = 60


def _oip_invoke(event: dict[str, Any], tmp_path: Path, moto: str, repository: Path) -> subprocess.CompletedProcess:
    file = tmp_path / "event.json"
    file.write_text(json.dumps(event))
    return oip_invoke(file, aws_environment(moto, MODEL_REPOSITORY=str(repository), OIP_BATCH_CHUNK_SIZE="16"))


def requests(data: np.ndarray) -> list[dict[str, Any]]:
    return [{"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row.tolist()}]} for row in data]


def by_hand(model: Path, data: np.ndarray) -> dict[str, Any]:
    one, two = (ort.InferenceSession(str(model / v / "model.onnx"), providers=["CPUExecutionProvider"]) for v in "12")
    p1, l1 = one.run(["probabilities", "label"], {"input": data})
    p2, l2 = two.run(["probabilities", "label"], {"input": data})
    largest = np.abs(p1.astype(np.float64) - p2.astype(np.float64)).max(axis=1)
    return {"agreeing": int((l1 == l2).sum()), "largest": largest}


def check(report: dict[str, Any], hand: dict[str, Any]) -> None:
    assert report["complete"] is True and report["version"] == "1" and report["compare_version"] == "2"
    assert report["rows"] == report["compared"] == ROWS
    assert report["agreeing"] == hand["agreeing"] and report["agreement"] == hand["agreeing"] / ROWS
    assert report["failed"] == {"default": 0, "candidate": 0}
    label = report["outputs"]["label"]
    assert label["rows_agreeing"] == label["elements_agreeing"] == hand["agreeing"] and label["elements"] == ROWS
    differences = report["outputs"]["probabilities"]["max_abs_difference"]
    assert differences["max"] == pytest.approx(hand["largest"].max(), abs=1e-6)
    assert differences["p50"] == pytest.approx(float(np.percentile(hand["largest"], 50)), abs=1e-6)
    assert 0 < ROWS - hand["agreeing"] < ROWS // 2  # some rows change class, most do not


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    classifier_repository(tmp_path / "models", "clf", perturbed=True)
    return tmp_path / "models"


def test_an_s3_object_with_compare_version_metadata_is_compared_and_reported(
    moto_server: str, tmp_path: Path, repository: Path
) -> None:
    bucket, key = unique_name("compare"), "input/clf/requests.jsonl"
    s3 = s3_client(moto_server)
    s3.create_bucket(Bucket=bucket)
    data = rows(ROWS, seed=21)
    lines = "".join(json.dumps(request) + "\n" for request in requests(data))
    s3.put_object(Bucket=bucket, Key=key, Body=lines.encode(), Metadata={"compare-version": "2"})
    event = json.loads((EVENTS / "s3-put.json").read_text())
    event["Records"][0]["s3"]["bucket"]["name"] = bucket
    event["Records"][0]["s3"]["object"]["key"] = key

    result = _oip_invoke(event, tmp_path, moto_server, repository)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(s3.get_object(Bucket=bucket, Key="output/clf/requests.jsonl.comparison.json")["Body"].read())
    hand = by_hand(repository / "clf", data)
    check(report, hand)
    assert report["input"] == f"s3://{bucket}/{key}"
    (summary,) = json.loads(result.stdout)["manifests"]
    assert summary["report"] == f"s3://{bucket}/output/clf/requests.jsonl.comparison.json"
    assert summary["agreement"] == report["agreement"] and summary["rows_in"] == ROWS and summary["errors"] == 0
    listed = {item["Key"] for item in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert listed == {key, "output/clf/requests.jsonl.comparison.json"}  # no predictions: a comparison only

    again = _oip_invoke(event, tmp_path, moto_server, repository)  # the same object and candidate: not again
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["manifests"][0]["skipped"] is True


def test_a_step_functions_item_batch_compares_logged_requests(
    moto_server: str, tmp_path: Path, repository: Path
) -> None:
    """Sampled request logs as Firehose delivers them (records with ``raw_data``, no file extension) replay
    against the candidate named by the execution input's ``compare_version`` (a number here, as JSON may give it),
    which the state machine passes on in each item batch's ``BatchInput``."""
    bucket, key = unique_name("compare"), "input/logs/2026/11/28/requests-1"
    s3 = s3_client(moto_server)
    s3.create_bucket(Bucket=bucket)
    data = rows(ROWS, seed=22)
    records = [
        {"model": "clf", "model_version": "1", "time": "2026-11-28T10:00:00Z", "raw_data": json.dumps(r)}
        for r in requests(data)
    ]
    s3.put_object(Bucket=bucket, Key=key, Body="".join(json.dumps(r) + "\n" for r in records).encode())
    execution = {"bucket": bucket, "prefix": "input/logs/", "compare_version": 2}  # the state machine's input
    event = {"Items": [{"Key": key}], "BatchInput": {"bucket": bucket, "execution": execution}}

    result = _oip_invoke(event, tmp_path, moto_server, repository)
    assert result.returncode == 0, result.stderr[-3000:]
    target = "output/logs/2026/11/28/requests-1.comparison.json"
    report = json.loads(s3.get_object(Bucket=bucket, Key=target)["Body"].read())
    check(report, by_hand(repository / "clf", data))
    (done,) = json.loads(result.stdout)["processed"]
    assert done == {
        "key": key,
        "rows": ROWS,
        "errors": 0,
        "agreement": report["agreement"],
        "report": f"s3://{bucket}/{target}",
    }
