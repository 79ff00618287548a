"""Batch prediction over local streams (the code behind ``oip batch`` and the S3 path), on real models."""

# covers: handler/batch/npy.py
# covers: handler/batch/service.py

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from adapters.errors import InvalidInput
from handler.batch.job import BatchJob
from handler.batch.jsonl import predict_jsonl
from handler.batch.npy import predict_npy
from handler.config.settings import DEMO_REPOSITORY, Settings
from handler.inference.service import InferenceService
from handler.runtime.container import build_dataplane
from handler.runtime.loop import run
from tests.conftest import make_settings

ROWS = np.random.default_rng(5).random((40, 4)).round(3).tolist()


def _service(settings: Settings) -> InferenceService:
    return InferenceService(build_dataplane(settings), settings)


@pytest.fixture(scope="module")
def demo() -> InferenceService:
    return _service(Settings(model_repository=str(DEMO_REPOSITORY)))


def _line(row: list[float], **extra: object) -> bytes:
    return orjson.dumps({**extra, "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row}]})


def _predict(service, lines: list[bytes], **job: object) -> tuple[list[dict], object]:  # type: ignore[no-untyped-def]
    out = io.BytesIO()
    summary = run(predict_jsonl(service, BatchJob(**{"model": "iris", "id_prefix": "f:", **job}), lines, out.write))
    return [json.loads(line) for line in out.getvalue().splitlines()], summary


def test_rows_run_together_answer_as_each_row_alone(demo) -> None:  # type: ignore[no-untyped-def]
    lines = [_line(row, id=f"r{i}") if i % 3 else _line(row) for i, row in enumerate(ROWS)]
    together, _ = _predict(demo, lines, chunk_size=16)
    alone, _ = _predict(demo, lines, chunk_size=1)
    assert together == alone
    assert [o["id"] for o in together][:4] == ["f:1", "r1", "r2", "f:4"]


def test_one_output_line_per_input_line_in_order_with_errors_inline(demo) -> None:  # type: ignore[no-untyped-def]
    lines = [_line(row) for row in ROWS[:10]]
    lines[3] = b"{not json"
    lines[6] = _line([1.0])  # wrong element count
    lines.insert(8, b"   ")  # a blank line is an error row of its own, so line k still answers line k
    output, summary = _predict(demo, lines, chunk_size=4)
    assert len(output) == 11 and (summary.rows_in, summary.rows_out, summary.errors) == (11, 11, 3)
    assert output[3]["line"] == 4 and "malformed JSON" in output[3]["error"]
    assert output[6]["line"] == 7 and "needs 4 elements" in output[6]["error"]
    assert output[8] == {"line": 9, "error": "blank line: expected a V2 inference request"}
    assert output[10]["id"] == "f:11"
    assert [e["line"] for e in summary.error_samples] == [4, 7, 9]


def test_each_line_may_name_its_model(test_repository: Path) -> None:
    service = _service(make_settings(test_repository))
    lines = [
        orjson.dumps(
            {
                "model_name": "versioned",
                "model_version": "1",
                "inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1, 2]}],
            }
        ),
        orjson.dumps(
            {"model_name": "missing", "inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1]}]}
        ),
    ]
    output, summary = _predict(service, lines, model=None)
    assert output[0]["model_version"] == "1" and output[0]["outputs"][0]["data"] == [1.0, 2.0]
    assert "Request for unknown model: 'missing' is not found" in output[1]["error"]
    assert summary.errors == 1


def test_merged_runs_respect_max_batch_size(test_repository: Path) -> None:
    service = _service(make_settings(test_repository))  # 'batched' has max_batch_size 4
    lines = [
        orjson.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "FP32", "data": [i, i, i]}]})
        for i in range(10)
    ]
    output, summary = _predict(service, lines, model="batched", chunk_size=10)
    assert summary.errors == 0
    assert [o["outputs"][0]["data"][0] for o in output] == list(range(10))


def test_npy_rows(demo, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    array = np.asarray(ROWS, dtype=np.float32)
    buffer = io.BytesIO()
    np.save(buffer, array)
    buffer.seek(0)
    out = io.BytesIO()
    summary = run(predict_npy(demo, BatchJob("iris", chunk_size=7), buffer, out.write))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (summary.rows_in, summary.rows_out, len(lines)) == (40, 40, 40)
    assert lines[12]["id"] == "13"
    same_row_as_json, _ = _predict(demo, [_line(ROWS[12])])
    assert lines[12]["outputs"] == same_row_as_json[0]["outputs"]


def test_npy_for_a_multi_input_model_is_refused(test_repository: Path) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((2, 16), np.int32))
    buffer.seek(0)
    with pytest.raises(InvalidInput, match="single-input model"):
        run(predict_npy(_service(make_settings(test_repository)), BatchJob("simple"), buffer, print))


def test_oip_batch_cli(tmp_path: Path) -> None:
    from handler.cli import main

    source = tmp_path / "rows.jsonl"
    source.write_bytes(b"\n".join(_line(row) for row in ROWS) + b"\n")
    assert main(["batch", str(source), "--model", "iris", "--quiet"]) == 0
    output = (tmp_path / "rows.jsonl.predictions.jsonl").read_text().splitlines()
    manifest = json.loads((tmp_path / "rows.jsonl.predictions.manifest.json").read_text())
    assert len(output) == len(ROWS) == manifest["rows_in"] == manifest["rows_out"]
    assert manifest["model"] == "iris" and manifest["errors"] == 0
