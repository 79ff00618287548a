"""``oip batch --compare-version`` as a user types it, in a real subprocess: the report of a perturbed candidate
and of an identical one equals what onnxruntime's two sessions give on the same inputs, computed here by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from handler.observability.request_log import RequestLogSampler
from tests.support.shadow_models import classifier_repository, rows

#: Rows per line: most lines one row, some several (agreement counts rows, differences are per line).
LINE_ROWS = [1] * 90 + [3] * 10


def oip(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "handler.cli", *args]
    return subprocess.run(command, cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=300)


def write_lines(path: Path) -> list[np.ndarray]:
    """The input file: one V2 request per line, FP32 [k, 4]; returns each line's array."""
    data = rows(sum(LINE_ROWS))
    arrays, start = [], 0
    for count in LINE_ROWS:
        arrays.append(data[start : start + count])
        start += count
    lines = [
        json.dumps(
            {"inputs": [{"name": "input", "shape": list(a.shape), "datatype": "FP32", "data": a.ravel().tolist()}]}
        )
        for a in arrays
    ]
    path.write_text("\n".join(lines) + "\n")
    return arrays


def by_hand(model: Path, arrays: list[np.ndarray]) -> dict:
    """The comparison computed from two onnxruntime sessions, one run per line."""
    one, two = (ort.InferenceSession(str(model / v / "model.onnx"), providers=["CPUExecutionProvider"]) for v in "12")
    label_agree = label_total = argmax_agree = agreeing_lines = 0
    max_abs, max_rel = [], []
    for array in arrays:
        p1, l1 = one.run(["probabilities", "label"], {"input": array})
        p2, l2 = two.run(["probabilities", "label"], {"input": array})
        label_agree += int((l1 == l2).sum())
        label_total += l1.size
        argmax_agree += int((p1.argmax(-1) == p2.argmax(-1)).sum())
        agreeing_lines += bool((l1 == l2).all() and (p1.argmax(-1) == p2.argmax(-1)).all())
        a, b = p1.astype(np.float64), p2.astype(np.float64)
        difference = np.abs(a - b)
        max_abs.append(difference.max())
        max_rel.append((difference / np.maximum(np.abs(a), np.abs(b))).max())
    return {
        "label": (label_agree, label_total),
        "argmax": argmax_agree,
        "agreeing": agreeing_lines,
        "abs": {f"p{p}": np.percentile(max_abs, p) for p in (50, 90, 99)} | {"max": max(max_abs)},
        "rel": {f"p{p}": np.percentile(max_rel, p) for p in (50, 90, 99)} | {"max": max(max_rel)},
    }


@pytest.mark.parametrize("perturbed", [True, False], ids=["perturbed", "identical"])
def test_the_report_equals_two_onnxruntime_sessions_by_hand(tmp_path: Path, perturbed: bool) -> None:
    model = classifier_repository(tmp_path / "models", "clf", perturbed)
    arrays = write_lines(tmp_path / "rows.jsonl")
    result = oip(
        "batch", "rows.jsonl", "--model", "clf", "--compare-version", "2", "--model-repository", "models",
        "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "rows.jsonl.comparison.json").read_text())
    hand = by_hand(model, arrays)
    assert (report["model"], report["version"], report["compare_version"]) == ("clf", "1", "2")
    assert (report["rows"], report["compared"], report["complete"]) == (len(arrays), len(arrays), True)
    assert report["failed"] == {"default": 0, "candidate": 0}
    assert report["agreeing"] == hand["agreeing"]
    label, probabilities = report["outputs"]["label"], report["outputs"]["probabilities"]
    assert (label["datatype"], label["elements_agreeing"], label["elements"]) == ("INT64", *hand["label"])
    assert "max_abs_difference" not in label
    assert probabilities["elements_agreeing"] == hand["argmax"] == hand["label"][0]
    assert probabilities["max_abs_difference"] == pytest.approx(hand["abs"], rel=1e-6, abs=1e-12)
    assert probabilities["max_rel_difference"] == pytest.approx(hand["rel"], rel=1e-6, abs=1e-12)
    assert not list(tmp_path.glob("*.predictions.jsonl"))  # a comparison writes no predictions
    summary = result.stdout.splitlines()[0]
    assert f"{len(arrays)} compared, {hand['agreeing']} agree" in summary
    if perturbed:
        disagreeing = hand["label"][1] - hand["label"][0]
        assert 0 < disagreeing < hand["label"][1] // 4  # some rows change class, most do not
        worst = report["worst_rows"]
        assert len(worst) == 10 and "worst rows: line" in result.stdout
        first = worst[0]["outputs"]
        assert first["label"]["elements"] - first["label"]["agreeing"] == max(
            row["outputs"]["label"]["elements"] - row["outputs"]["label"]["agreeing"] for row in worst
        )
    else:
        assert report["agreement"] == label["agreement"] == probabilities["agreement"] == 1.0
        assert probabilities["max_abs_difference"]["max"] == 0.0
        assert report["worst_rows"] == []


def test_min_agreement_refuses_the_perturbed_candidate_with_exit_3(tmp_path: Path) -> None:
    classifier_repository(tmp_path / "models", "clf", perturbed=True)
    write_lines(tmp_path / "rows.jsonl")
    result = oip(
        "batch", "rows.jsonl", "--model", "clf", "--compare-version", "2", "--min-agreement", "0.95",
        "--compare-report", "report.json", "--model-repository", "models", "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert "below --min-agreement 0.95" in result.stderr and "Traceback" not in result.stderr
    assert json.loads((tmp_path / "report.json").read_text())["agreement"] < 0.95


def test_an_unknown_candidate_version_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    classifier_repository(tmp_path / "models", "clf", perturbed=False)
    write_lines(tmp_path / "rows.jsonl")
    result = oip(
        "batch", "rows.jsonl", "--model", "clf", "--compare-version", "7", "--model-repository", "models",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "7" in lines[0] and "Traceback" not in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models", "rows.jsonl"]


def test_failed_rows_are_counted_per_version_and_exit_1(tmp_path: Path) -> None:
    classifier_repository(tmp_path / "models", "clf", perturbed=False)
    write_lines(tmp_path / "rows.jsonl")
    with (tmp_path / "rows.jsonl").open("a") as lines:
        lines.write("{garbage\n")
    result = oip(
        "batch", "rows.jsonl", "--model", "clf", "--compare-version", "2", "--model-repository", "models",
        "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    report = json.loads((tmp_path / "rows.jsonl.comparison.json").read_text())
    assert report["failed"] == {"default": 1, "candidate": 0}
    assert report["error_samples"][0]["line"] == len(LINE_ROWS) + 1
    assert report["compared"] == len(LINE_ROWS)


def test_sampled_request_logs_are_replayed_against_the_candidate(tmp_path: Path) -> None:
    """The request logging's records (model, raw_data, ...), as RequestLogSampler writes them, are compared as
    the V2 requests they logged, each naming its model; a record of a binary body fails as its row; a shadow's
    disagreement record, which logged no request, is no row."""
    model = classifier_repository(tmp_path / "models", "clf", perturbed=True)
    arrays = [row[None, :] for row in rows(30, seed=4)]
    records: list[bytes] = []
    sampler = RequestLogSampler(100, records.append)
    for array in arrays:
        request = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": array.ravel().tolist()}]}
        assert sampler.offer("clf", "1", json.dumps(request).encode(), b"{}")
    assert sampler.offer("clf", "1", b"\xff\x00binary", b"{}")
    sampler.log_shadow("clf", "1", {"shadow_version": "2", "request_id": "r"})  # a disagreement: no request, no row
    (tmp_path / "log.jsonl").write_bytes(b"".join(records))
    result = oip(
        "batch", "log.jsonl", "--compare-version", "2", "--model-repository", "models", "--quiet", cwd=tmp_path
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the binary record's row
    report = json.loads((tmp_path / "log.jsonl.comparison.json").read_text())
    hand = by_hand(model, arrays)
    assert (report["rows"], report["compared"], report["failed"]) == (31, 30, {"default": 1, "candidate": 0})
    assert report["outputs"]["label"]["elements_agreeing"] == hand["label"][0]
    assert report["agreeing"] == hand["agreeing"]
