"""Shadow counters (handler/observability/shadow_metrics.py): each worker's file, and the scrape that sums them
in Triton's style through prometheus_client's own text format."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest

from adapters.types import Tensor
from handler.observability.comparison import compare_outputs
from handler.observability.shadow_metrics import ShadowCounters, ShadowMetrics
from tests.support.metrics_scrape import parse

KEY = ("clf", "1", "2")
LABELS = dict(zip(("model", "version", "shadow_version"), KEY, strict=True))


def answer(scores: list[list[float]], labels: list[int]) -> list[Tensor]:
    p, y = np.asarray(scores, np.float32), np.asarray(labels, np.int64)
    return [Tensor("probabilities", "FP32", p.shape, p), Tensor("label", "INT64", y.shape, y)]


def test_two_workers_files_are_summed_in_one_scrape(tmp_path: Path) -> None:
    first = ShadowCounters(tmp_path)
    first.compared(KEY, compare_outputs(answer([[0.9, 0.1]], [0]), answer([[0.9, 0.1]], [0])))
    first.failed(KEY, "timeout")
    other = json.loads(first.path.read_text())  # a second worker's file, as a worker of another pid writes it
    (tmp_path / f"shadow-{os.getpid() + 1}.json").write_text(json.dumps(other))
    first.compared(KEY, compare_outputs(answer([[0.6, 0.4]], [0]), answer([[0.4, 0.6]], [1])))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ShadowMetrics(tmp_path))
    scrape = parse(generate_latest(registry).decode())
    assert scrape.value("oip_shadow_compared_total", **LABELS) == 3
    assert scrape.value("oip_shadow_agreement_total", **LABELS) == 2
    assert scrape.value("oip_shadow_failures_total", **LABELS, reason="timeout") == 2
    assert scrape.value("oip_shadow_failures_total", **LABELS, reason="overloaded") == 0
    assert scrape.value("oip_shadow_output_elements_total", **LABELS, output="label") == 3
    assert scrape.value("oip_shadow_output_agreement_total", **LABELS, output="label") == 2
    histogram = {"output": "probabilities", **LABELS}
    assert scrape.value("oip_shadow_max_abs_difference_bucket", **histogram, le="0.0") == 2
    assert scrape.value("oip_shadow_max_abs_difference_bucket", **histogram, le="0.1") == 2
    assert scrape.value("oip_shadow_max_abs_difference_bucket", **histogram, le="1.0") == 3
    assert scrape.value("oip_shadow_max_abs_difference_count", **histogram) == 3
    assert math.isclose(scrape.value("oip_shadow_max_abs_difference_sum", **histogram), 0.2, rel_tol=1e-6)
    assert scrape.types["oip_shadow_compared"] == "counter"
    assert scrape.label_sets("oip_shadow_max_abs_difference_bucket") == {
        ("le", "model", "output", "shadow_version", "version")
    }


def test_a_half_written_or_missing_directory_is_no_failure(tmp_path: Path) -> None:
    (tmp_path / "shadow-1.json").write_text('[{"labels": ')
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ShadowMetrics(tmp_path))
    assert b"oip_shadow_compared" in generate_latest(registry)
    gone = ShadowCounters(tmp_path / "gone")
    gone.failed(KEY, "error")  # the directory removed as the server stops: counted in memory, not raised
    assert gone.counts[KEY]["failures"]["error"] == 1
