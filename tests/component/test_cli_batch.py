"""``oip batch`` as a user types it, in a real subprocess on the demo repository: nothing lost or destroyed on
a user's mistake, one output line per input line, Ctrl-C with a manifest, and one-line errors."""

# covers: handler/batch/cast.py

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

SETOSA, VIRGINICA = [5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]


def oip(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "handler.cli", *args]
    environment = {**os.environ, **(env or {})}
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


def request(row: list[float]) -> str:
    return json.dumps({"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row}]})


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_output_onto_the_input_is_refused_and_the_input_kept(tmp_path: Path) -> None:
    source = tmp_path / "same.jsonl"
    source.write_text(request(SETOSA) + "\n")
    before = source.read_bytes()
    result = oip("batch", "same.jsonl", "--model", "iris", "--output", "same.jsonl", cwd=tmp_path)
    assert result.returncode != 0
    assert "would overwrite the input" in one_line(result.stderr)
    (tmp_path / "link.jsonl").symlink_to(source)
    result = oip("batch", "same.jsonl", "--model", "iris", "--output", "link.jsonl", cwd=tmp_path)
    assert result.returncode != 0 and "would overwrite the input" in one_line(result.stderr)
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "same.jsonl"]


def test_every_line_blank_or_garbage_has_one_output_line_and_the_exit_status_counts_them(tmp_path: Path) -> None:
    lines = [request(SETOSA), "", request(VIRGINICA), "{garbage", "   ", request(SETOSA)]
    (tmp_path / "rows.jsonl").write_text("\n".join(lines) + "\n")
    result = oip("batch", "rows.jsonl", "--model", "iris", cwd=tmp_path)
    assert result.returncode == 1
    assert "3 of 6 rows failed" in result.stderr and "Traceback" not in result.stderr
    output = read_jsonl(tmp_path / "rows.jsonl.predictions.jsonl")
    assert len(output) == 6
    assert [o.get("line") for o in output] == [None, 2, None, 4, 5, None]
    assert output[1]["error"] == output[4]["error"] == "blank line: expected a V2 inference request"
    assert "malformed JSON in line 4" in output[3]["error"]
    assert [o["outputs"][1]["data"] for o in (output[0], output[2], output[5])] == [[0], [2], [0]]
    assert output[5]["id"] == "rows.jsonl:6"
    manifest = json.loads((tmp_path / "rows.jsonl.predictions.manifest.json").read_text())
    assert (manifest["rows_in"], manifest["rows_out"], manifest["errors"], manifest["complete"]) == (6, 6, 3, True)


def test_a_clean_run_exits_0(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text(request(SETOSA) + "\n" + request(VIRGINICA))  # no final newline
    result = oip("batch", "rows.jsonl", "--model", "iris", "--output", "out.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(tmp_path / "out.jsonl")) == 2
    assert json.loads((tmp_path / "out.manifest.json").read_text())["complete"] is True


def test_error_samples_are_in_line_order(tmp_path: Path) -> None:
    # line 1 fails when run (wrong element count), line 3 when parsed: the parse error is met first
    lines = [request([1.0]), request(SETOSA), "{garbage", request(VIRGINICA)]
    (tmp_path / "rows.jsonl").write_text("\n".join(lines) + "\n")
    result = oip("batch", "rows.jsonl", "--model", "iris", "--quiet", cwd=tmp_path)
    assert result.returncode == 1
    manifest = json.loads((tmp_path / "rows.jsonl.predictions.manifest.json").read_text())
    assert [sample["line"] for sample in manifest["error_samples"]] == [1, 3]


@pytest.mark.parametrize("size", ["0", "-3", "x"])
def test_chunk_size_must_be_at_least_1(tmp_path: Path, size: str) -> None:
    (tmp_path / "rows.jsonl").write_text(request(SETOSA) + "\n")
    rows = np.ones((3, 4), dtype=np.float32)
    np.save(tmp_path / "rows.npy", rows)
    for name in ("rows.jsonl", "rows.npy"):
        result = oip("batch", name, "--model", "iris", f"--chunk-size={size}", cwd=tmp_path)
        assert result.returncode == 2
        assert "argument --chunk-size" in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl", "rows.npy"]


def test_progress_bar_shows_total_rate_and_eta(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text("\n".join([request(SETOSA)] * 50) + "\n")
    result = oip("batch", "rows.jsonl", "--model", "iris", "--chunk-size", "10", cwd=tmp_path)
    assert result.returncode == 0
    assert re.search(r"50/50 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+ *row/s\]", result.stderr), result.stderr
    np.save(tmp_path / "rows.npy", np.ones((7, 4), dtype=np.float32))
    result = oip("batch", "rows.npy", "--model", "iris", cwd=tmp_path)
    assert result.returncode == 0 and "7/7 [" in result.stderr


def _wait_for_output(process: subprocess.Popen[bytes], path: Path, deadline: float) -> None:
    while not (path.exists() and path.stat().st_size > 0):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no output before the deadline"
        time.sleep(0.05)


def test_ctrl_c_stops_at_once_writes_the_manifest_and_resume_finishes(tmp_path: Path) -> None:
    rows = 300_000
    line = (request(SETOSA) + "\n").encode()
    (tmp_path / "big.jsonl").write_bytes(line * rows)
    command = [sys.executable, "-m", "handler.cli", "batch", "big.jsonl", "--model", "iris", "--chunk-size", "64"]
    process = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE, start_new_session=True)
    output = tmp_path / "big.jsonl.predictions.jsonl"
    _wait_for_output(process, output, time.monotonic() + 60)
    os.killpg(process.pid, signal.SIGINT)  # one press, to the whole process group as a terminal does
    try:
        _, stderr = process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail("oip batch did not stop within 15 s of one Ctrl-C")
    assert process.returncode == 130, stderr
    text = stderr.decode()
    assert "Traceback" not in text and "add --resume to continue" in text
    manifest = json.loads((tmp_path / "big.jsonl.predictions.manifest.json").read_text())
    assert manifest["complete"] is False and 0 < manifest["rows_out"] < rows
    done = output.read_bytes()
    assert done.count(b"\n") == manifest["rows_in"] == manifest["rows_out"]
    assert manifest["output_bytes"] == len(done)

    result = oip("batch", "big.jsonl", "--model", "iris", "--chunk-size", "64", "--resume", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "big.jsonl.predictions.manifest.json").read_text())
    assert (manifest["complete"], manifest["rows_in"], manifest["rows_out"]) == (True, rows, rows)
    ids = [json.loads(line)["id"] for line in output.read_bytes().splitlines()]
    assert ids == [f"big.jsonl:{n}" for n in range(1, rows + 1)]


def test_resume_refuses_a_changed_input(tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    source.write_text(request(SETOSA) + "\n")
    assert oip("batch", "rows.jsonl", "--model", "iris", "--resume", cwd=tmp_path).returncode == 1
    manifest_path = tmp_path / "rows.jsonl.predictions.manifest.json"
    assert oip("batch", "rows.jsonl", "--model", "iris", cwd=tmp_path).returncode == 0
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "complete": False}))
    source.write_text(request(SETOSA) + "\n" + request(VIRGINICA) + "\n")
    result = oip("batch", "rows.jsonl", "--model", "iris", "--resume", cwd=tmp_path)
    assert result.returncode == 1 and "changed since the interrupted run" in one_line(result.stderr)


def test_unknown_model_fails_at_once_naming_the_models(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text(request(SETOSA) + "\n")
    result = oip("batch", "rows.jsonl", "--model", "irsi", cwd=tmp_path)
    assert result.returncode == 1
    assert "unknown model: 'irsi'" in (line := one_line(result.stderr)) and "iris" in line and "tiny_image" in line
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def _write_inputs(folder: Path) -> None:
    (folder / "rows.jsonl").write_text(request(SETOSA) + "\n")
    (folder / "garbage.npy").write_bytes(b"this is not an array\n" * 10)
    np.save(folder / "object.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    np.save(folder / "good.npy", np.ones((2, 4), dtype=np.float32))
    np.save(folder / "complex.npy", np.ones((2, 4), dtype=np.complex64))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl", "--model", "iris"], "missing.jsonl: no such file"),
        (["garbage.npy", "--model", "iris"], "not a .npy file"),
        (["object.npy", "--model", "iris"], "not an object array"),
        (["good.npy"], "needs --model"),
        (["rows.jsonl", "--model", "iris", "--output", "nowhere/out.jsonl"], "the folder nowhere does not exist"),
        (["complex.npy", "--model", "iris", "--cast"], "cannot convert complex64 to float32"),
        (["rows.jsonl", "--model", "iris", "--model-repository", "no/such/dir"], "model repository"),
    ],
    ids=["missing", "garbage-npy", "object-npy", "npy-no-model", "missing-folder", "complex", "repo"],
)
def test_whole_run_failures_are_one_line_and_create_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    _write_inputs(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = oip("batch", *args, cwd=tmp_path)
    assert result.returncode != 0
    assert message in one_line(result.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_cast_converts_float64_and_without_it_the_error_names_the_flag(tmp_path: Path) -> None:
    data = np.array([SETOSA, VIRGINICA, [1e300, 1.0, 1.0, 1.0]], dtype=np.float64)
    np.save(tmp_path / "x64.npy", data)
    result = oip("batch", "x64.npy", "--model", "iris", cwd=tmp_path)
    assert result.returncode == 1
    assert "float64" in (line := one_line(result.stderr)) and "FP32" in line and "--cast" in line
    assert [p.name for p in tmp_path.iterdir()] == ["x64.npy"]

    result = oip("batch", "x64.npy", "--model", "iris", "--cast", "--quiet", cwd=tmp_path)
    assert result.returncode == 1 and "1 of 3 rows failed" in result.stderr
    output = read_jsonl(tmp_path / "x64.npy.predictions.jsonl")
    assert [o["outputs"][1]["data"] for o in output[:2]] == [[0], [2]]
    assert output[2] == {"line": 3, "error": "row 3: a value does not fit FP32 (--cast)"}

    np.save(tmp_path / "ints.npy", np.array([[5, 3, 1, 0], [7, 3, 5, 2]], dtype=np.int64))
    result = oip("batch", "ints.npy", "--model", "iris", "--cast", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [o["outputs"][1]["data"] for o in read_jsonl(tmp_path / "ints.npy.predictions.jsonl")] == [[0], [2]]


def test_the_model_from_oip_batch_model(tmp_path: Path) -> None:
    np.save(tmp_path / "rows.npy", np.array([VIRGINICA], dtype=np.float32))
    result = oip("batch", "rows.npy", "--quiet", cwd=tmp_path, env={"OIP_BATCH_MODEL": "iris"})
    assert result.returncode == 0, result.stderr
    assert read_jsonl(tmp_path / "rows.npy.predictions.jsonl")[0]["outputs"][1]["data"] == [2]
