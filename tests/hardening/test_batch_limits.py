"""Batch input has the limits of a request body (OIP_MAX_BODY_BYTES): a JSON line over it is a failed row and is
never held whole, whatever its length; a .npy file whose rows are over it is refused as a whole, and in a Step
Functions item batch it is a failed item. With onnxruntime on the demo repository, ``oip batch`` as a user runs it,
and S3 on moto's standalone server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handler.batch.aws import aws_client
from handler.batch.config import BatchConfig
from handler.batch.job import BatchJob
from handler.batch.jsonl import predict_jsonl
from handler.batch.lines import OverlongLine, bounded_lines
from handler.batch.s3 import BatchFailed, handle_item_batch, process_object
from handler.batch.service import batch_service
from handler.config.settings import Settings
from handler.inference.service import InferenceService
from handler.runtime import container
from handler.runtime.container import build_dataplane
from handler.runtime.loop import run
from tests.integration.conftest import aws_env, moto_server  # noqa: F401  (fixtures)
from tests.support.iris_requests import IRIS_REQUEST

MiB = 1 << 20
LINE = json.dumps(IRIS_REQUEST).encode()
LIMIT = 64 * 1024
WIDE_ROWS = np.zeros((2, 4, 4097), dtype=np.float32)  # rows of 16 bytes over 64 KiB


LONG_START, LONG_END = b'{"inputs": [{"name": "input", "data": [', b"1]}]}"


def _stream_with_a_long_line(mib: int) -> Iterator[bytes]:
    """A good line, one of ``mib`` MiB and a few bytes (made 1 MiB at a time, never whole), a good line."""
    yield LINE + b"\n" + LONG_START
    for _ in range(mib):
        yield b"1," * (MiB // 2)
    yield LONG_END + b"\n" + LINE + b"\n"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80).map(lambda b: b.replace(b"\x00", b"\n")), st.integers(0, 12), st.data())
def test_lines_are_those_of_the_text_however_it_is_cut(text: bytes, limit: int, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if b > a]
    found = [(line.size, None) if isinstance(line, OverlongLine) else line for line in bounded_lines(chunks, limit)]
    lines = text.split(b"\n")[: -1 if text.endswith(b"\n") or not text else None]
    assert found == [(len(line), None) if len(line) > limit else line for line in lines]


def test_a_256_mib_line_is_a_failed_row_and_never_held() -> None:
    service = InferenceService(build_dataplane(Settings()), Settings())
    output: list[bytes] = []
    tracemalloc.start()
    try:
        lines = bounded_lines(_stream_with_a_long_line(256), LIMIT)
        summary = run(predict_jsonl(service, BatchJob("iris", max_bytes=LIMIT), lines, output.append))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rows = [json.loads(line) for line in b"".join(output).splitlines()]
    assert (summary.rows_in, summary.rows_out, summary.errors) == (3, 3, 1)
    size = len(LONG_START) + 256 * MiB + len(LONG_END)
    assert rows[1] == {
        "line": 2,
        "error": f"line of {size} bytes, over the limit of {LIMIT} bytes (OIP_MAX_BODY_BYTES)",
    }
    assert rows[0]["outputs"] and rows[2]["outputs"]
    assert peak < 16 * MiB  # a 1 MiB chunk at a time


def _oip_batch(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "handler.cli", "batch", str(path), "--model", "iris", "--quiet", *args]
    env = {**os.environ, "OIP_MAX_BODY_BYTES": str(LIMIT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_oip_batch_reports_a_line_over_the_limit(tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    source.write_bytes(LINE + b"\n" + b" " * (4 * MiB) + LINE + b"\n" + LINE + b"\n")
    finished = _oip_batch(source)
    assert finished.returncode == 1, finished.stderr
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl.predictions.jsonl").read_text().splitlines()]
    assert rows[1] == {"line": 2, "error": f"line of {4 * MiB + len(LINE)} bytes, over the limit of {LIMIT} bytes "
                       "(OIP_MAX_BODY_BYTES)"}  # fmt: skip
    assert rows[0]["outputs"] and rows[2]["outputs"]
    manifest = json.loads((tmp_path / "rows.jsonl.predictions.manifest.json").read_text())
    assert (manifest["rows_in"], manifest["errors"]) == (3, 1)


def test_oip_batch_refuses_npy_rows_over_the_limit(tmp_path: Path) -> None:
    np.save(tmp_path / "wide.npy", WIDE_ROWS)
    finished = _oip_batch(tmp_path / "wide.npy")
    assert finished.returncode == 1
    assert finished.stderr == (
        f"oip batch: error: each row of the .npy array is {WIDE_ROWS[0].nbytes} bytes, over the limit of {LIMIT} "
        "bytes (OIP_MAX_BODY_BYTES)\n"
    )


@pytest.fixture
def bucket(aws_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:  # noqa: F811
    name = f"limits-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    aws_client.cache_clear()
    monkeypatch.setenv("OIP_MAX_BODY_BYTES", str(LIMIT))
    container.settings.cache_clear()
    batch_service.cache_clear()  # the process's service holds the settings it was built with
    yield name
    container.settings.cache_clear()
    batch_service.cache_clear()


@pytest.mark.integration
def test_s3_files_over_the_limit(bucket: str, tmp_path: Path) -> None:
    """A JSON Lines object with a 4 MiB line: that row fails, the others are predicted. A .npy object with rows over
    the limit: its item of a Step Functions item batch fails, the other item is predicted."""
    s3 = boto3.client("s3")
    s3.put_object(Bucket=bucket, Key="input/iris/long.jsonl", Body=LINE + b"\n" + b"[" * (4 * MiB) + b"\n" + LINE)
    manifest = process_object(bucket, "input/iris/long.jsonl", BatchConfig.from_env(), batch_service())
    assert (manifest["rows_in"], manifest["rows_out"], manifest["errors"]) == (3, 3, 1)
    assert manifest["error_samples"] == [
        {"line": 2, "error": f"line of {4 * MiB} bytes, over the limit of {LIMIT} bytes (OIP_MAX_BODY_BYTES)"}
    ]

    np.save(tmp_path / "wide.npy", WIDE_ROWS)
    s3.upload_file(str(tmp_path / "wide.npy"), bucket, "input/iris/wide.npy")
    items = [{"Key": "input/iris/wide.npy"}, {"Key": "input/iris/long.jsonl"}]
    event = {"Items": items, "BatchInput": {"bucket": bucket}}
    with pytest.raises(BatchFailed) as failed:
        handle_item_batch(event, BatchConfig.from_env(), batch_service())
    report = json.loads(str(failed.value))
    assert [item["key"] for item in report["failed"]] == ["input/iris/wide.npy"]
    assert "over the limit of 65536 bytes (OIP_MAX_BODY_BYTES)" in report["failed"][0]["error"]
    assert [item["key"] for item in report["processed"]] == ["input/iris/long.jsonl"]
