"""The latency histograms and pending counts the statistics table keeps for ``oip serve``'s metrics endpoint: each
success in one bucket per histogram (Prometheus' ``le``: a bound is inclusive), sums and counts that are the
statistics' own, and a worker that dies keeps its counts but not its pending requests."""

# covers: handler/protocol/statistics_counters.py

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from adapters.types import Execution
from handler.protocol.statistics_counters import BUCKETS_NS, HISTOGRAMS, Statistics, read_snapshot, retire


def _bucket(ns: int) -> int:
    """The index of the bucket Prometheus would count ``ns`` in: the first bound at or above it."""
    return next((index for index, bound in enumerate(BUCKETS_NS) if ns <= bound), len(BUCKETS_NS))


def test_each_success_is_in_one_bucket_of_each_histogram_and_the_sums_are_the_statistics(tmp_path: Path) -> None:
    statistics = Statistics(tmp_path)
    # (total, input, infer, output) ns: on a bound, just past one, in the unbounded bucket, a forwarded call.
    calls = [(25_000, 1_000, 10_000, 1_000), (25_001, 0, 25_001, 0), (12_000_000_000, 1, 2, 3), (3_000_000, None)]
    for total, *phases in calls:
        execution = None if phases == [None] else Execution(1, *phases)
        statistics.success("m", "1", total, execution)
    statistics.failure("m", "1", 7_000)
    snapshot = read_snapshot(tmp_path)
    histograms = snapshot.histograms("m", "1")
    assert set(histograms) == set(HISTOGRAMS)
    expected: dict[str, list[int]] = {name: [0] * (len(BUCKETS_NS) + 1) for name in HISTOGRAMS}
    for total, *phases in calls:
        compute = total if phases == [None] else sum(phases)  # a forwarded call is all compute
        for name, ns in (("request", total), ("queue", max(total - compute, 0)), ("compute", compute)):
            expected[name][_bucket(ns)] += 1
    assert {name: list(histogram.buckets) for name, histogram in histograms.items()} == expected
    (document,) = statistics.documents([("m", "1")])
    stats = document["inference_stats"]
    assert histograms["request"].sum_ns == stats["success"]["ns"]
    assert histograms["queue"].sum_ns == stats["queue"]["ns"]
    compute_ns = sum(stats[phase]["ns"] for phase in ("compute_input", "compute_infer", "compute_output"))
    assert histograms["compute"].sum_ns == compute_ns
    for histogram in histograms.values():  # failures are in no histogram
        assert sum(histogram.buckets) == stats["success"]["count"] == 4


def test_pending_requests_are_counted_apart_from_the_versions_served(tmp_path: Path) -> None:
    statistics = Statistics(tmp_path)
    cell = statistics.pending_cell("remote", "")
    statistics.pending(cell, 1)
    statistics.pending(cell, 1)
    statistics.pending(cell, -1)
    statistics.success("remote", "7", 1_000, None)  # Triton answered with version 7
    shared = read_snapshot(tmp_path)
    assert shared.pending() == {("remote", ""): 1}
    # The pending row is no version of its own: statistics and scrapes list the versions served only.
    assert shared.versions() == [("remote", "7")] == statistics.recorded("remote")
    (document,) = statistics.documents([("remote", "7")])
    assert [batch["batch_size"] for batch in document["batch_stats"]] == [1]


def _worker(directory: str, pending: int) -> None:
    """A worker that answers two requests, then dies with ``pending`` requests unanswered (no cleanup at all)."""
    statistics = Statistics(directory)
    cell = statistics.pending_cell("m", "1")
    for _ in range(2):
        statistics.pending(cell, 1)
        statistics.success("m", "1", 40_000, Execution(1, 1_000, 20_000, 1_000))
        statistics.pending(cell, -1)
    statistics.pending(cell, pending)
    os._exit(9)


def test_a_dead_workers_counts_are_kept_and_its_pending_requests_dropped(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    dead = context.Process(target=_worker, args=(str(tmp_path), 3))
    dead.start()
    dead.join(30)
    assert dead.exitcode == 9 and dead.pid is not None
    living = Statistics(tmp_path)
    living.pending(living.pending_cell("m", "1"), 1)
    assert read_snapshot(tmp_path).pending() == {("m", "1"): 4}
    retire(tmp_path, dead.pid)
    snapshot = read_snapshot(tmp_path)
    assert snapshot.pending() == {("m", "1"): 1}  # the living worker's request only
    (document,) = snapshot.documents(snapshot.versions())
    assert document["inference_stats"]["success"]["count"] == 2
    assert sum(snapshot.histograms("m", "1")["request"].buckets) == 2


def test_a_row_left_half_written_by_a_killed_worker_is_read_at_once_after_it_is_retired(tmp_path: Path) -> None:
    import numpy as np

    context = multiprocessing.get_context("fork")
    dead = context.Process(target=_worker, args=(str(tmp_path), 0))
    dead.start()
    dead.join(30)
    assert dead.pid is not None
    # What a worker killed inside ``success`` leaves: its row's sequence number odd.
    (counters,) = tmp_path.glob(f"{dead.pid}-*.counters")
    width = counters.stat().st_size // 8 // 4096
    array = np.memmap(counters, dtype=np.int64, mode="r+", shape=(4096, width))
    array[0, width - 1] += 1
    array.flush()
    del array
    retire(tmp_path, dead.pid)
    retired = np.memmap(counters, dtype=np.int64, mode="r", shape=(4096, width))
    assert retired[0, width - 1] % 2 == 0  # even again: a reader takes the row at once (it waits on an odd one)
    del retired
    snapshot = read_snapshot(tmp_path)
    assert snapshot.histograms("m", "1")["request"].sum_ns == 80_000


def test_a_worker_with_a_dead_ones_pid_keeps_its_counts_apart(tmp_path: Path) -> None:
    """The kernel reuses process ids: a table made later by a process with the same pid (here, this one's second)
    must not overwrite the first's file."""
    first = Statistics(tmp_path)
    for _ in range(2):
        first.success("m", "1", 40_000, Execution(1, 1_000, 20_000, 1_000))
    reborn = Statistics(tmp_path)
    reborn.success("m", "1", 40_000, Execution(1, 1_000, 20_000, 1_000))
    assert len(list(tmp_path.glob(f"{os.getpid()}-*.counters"))) == 2
    (document,) = read_snapshot(tmp_path).documents([("m", "1")])
    assert document["inference_stats"]["success"]["count"] == 3
