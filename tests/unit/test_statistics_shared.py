"""Statistics shared by the workers of one server: sums across processes, and never a half-written request.

perf_analyzer refuses a statistics answer whose compute counts differ ("Server side statistics compute counts must
be the same"), so a reader in one worker must never see another worker's request half added.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from adapters.types import Execution
from handler.protocol.statistics_counters import Statistics


def _hammer(directory: str, seconds: float) -> None:
    statistics = Statistics(directory)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        statistics.success("m", "1", 1_000, Execution(1, 10, 20, 30))


def test_counts_add_up_across_processes_and_are_never_torn(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_hammer, args=(str(tmp_path), 2.0)) for _ in range(2)]
    for writer in writers:
        writer.start()
    reader = Statistics(tmp_path)
    reads = 0
    deadline = time.monotonic() + 10
    while any(writer.is_alive() for writer in writers) and time.monotonic() < deadline:
        (document,) = reader.documents([("m", "1")])
        stats = document["inference_stats"]
        counts = {stats[phase]["count"] for phase in ("compute_input", "compute_infer", "compute_output")}
        assert len(counts) == 1, stats
        assert stats["success"]["count"] == document["inference_count"] == document["execution_count"]
        assert stats["success"]["count"] in counts
        reads += 1
    for writer in writers:
        writer.join(timeout=10)
        assert writer.exitcode == 0
    (document,) = reader.documents([("m", "1")])
    assert reads > 10
    assert document["inference_count"] > 0
    assert document["inference_stats"]["compute_infer"]["ns"] == 20 * document["inference_count"]
    assert document["batch_stats"][0]["compute_infer"]["count"] == document["inference_count"]
