"""Triton's statistics extension: per model version counters that add up across the workers of a server.

Counters are rows of 64-bit integers. Without a directory (Lambda, tests) they are private, a list of Python ints:
on Lambda that means per execution environment, each concurrent instance counting its own requests from zero at
every cold start. Given a directory (``OIP_STATS_DIR``: ``oip serve`` creates one, whatever its workers), each
worker keeps its rows in a memory-mapped file there and lists their keys beside it, and a statistics request sums
every worker's file, so perf_analyzer's before/after deltas hold whichever worker answers.
Recording is a few integer additions under one lock: no measurable cost next to a request (bench/bench_core.py).

The same rows hold what ``oip serve``'s Prometheus endpoint adds to Triton's counters (handler/observability/
exporter.py reads them at scrape time): each success's request, queue and compute times counted in a latency
histogram's buckets (``BUCKETS_NS``; their sums and counts are the durations and count above), and, in a row of
its own per model version (batch size ``PENDING_ROW``), the requests in the worker not answered yet (``pending``),
and, in the version's row, its failures by Triton's reason (``FAILURE_REASONS``: ``failed``, counted by the
telemetry, which sees every request's error, refusals before the model included). A worker that ends keeps its
file, so nothing it counted is lost; ``retire`` counts its pending requests as failures (they will never be
answered).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from adapters.types import Execution

_DURATIONS: Final = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")
_PHASES: Final = ("compute_input", "compute_infer", "compute_output")
# Row layout: last inference (ms, combined by max), inference and execution counts, two counts, the ns of each
# duration, then a sequence number that is odd while the row is being written (a seqlock: readers in other workers
# retry, so perf_analyzer never sees a request's counters half added). Every duration but "fail" is added to by
# the same requests (a version's row: each success; a batch size's row: each execution it leads), so they share
# one count, ``_DONE``; "fail" has its own.
_LAST, _INFERENCES, _EXECUTIONS, _DONE, _FAILED = 0, 1, 2, 3, 4
_NS: Final = {name: 5 + i for i, name in enumerate(_DURATIONS)}
_COUNT: Final = {name: _FAILED if name == "fail" else _DONE for name in _DURATIONS}
_SUCCESS, _QUEUE, _INPUT, _INFER, _OUTPUT = (_NS[name] for name in ("success", "queue", *_PHASES))
#: Upper bounds (ns, inclusive, as Prometheus' ``le``) of the latency histograms' buckets, a last one unbounded:
#: this server's range, from a small model's run (tens of us) to a forwarded call's timeout.
BUCKETS_NS: Final = (
    25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 50_000_000,
    100_000_000, 250_000_000, 500_000_000, 1_000_000_000, 2_500_000_000, 5_000_000_000, 10_000_000_000,
)  # fmt: skip
#: The histograms, each a success's time: from reaching the model to its result, waiting, computing.
HISTOGRAMS: Final = ("request", "queue", "compute")
# After the durations: the pending count (used in pending rows only), then each histogram's bucket counts (one
# cell per bucket, not cumulative, the version's row only), then the sequence number.
_PENDING: Final = 5 + len(_DURATIONS)
_BUCKETS: Final = {name: _PENDING + 1 + i * (len(BUCKETS_NS) + 1) for i, name in enumerate(HISTOGRAMS)}
_REQUEST_BUCKETS, _QUEUE_BUCKETS, _COMPUTE_BUCKETS = (_BUCKETS[name] for name in HISTOGRAMS)
#: Triton's reasons for a failed request (``nv_inference_request_failure``'s ``reason`` label): refused by a
#: scheduler or an admission (queue full, queue timeout, over the admission bound), cancelled (its deadline
#: passed), failed in the backend, anything else.
FAILURE_REASONS: Final = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
#: The reason a worker's requests fail when it is killed or dies with them in progress (``retire``).
RETIRED_REASON: Final = "BACKEND"
_REASONS: Final = {
    reason: _PENDING + 1 + len(HISTOGRAMS) * (len(BUCKETS_NS) + 1) + i for i, reason in enumerate(FAILURE_REASONS)
}
_SEQUENCE: Final = _PENDING + 1 + len(HISTOGRAMS) * (len(BUCKETS_NS) + 1) + len(FAILURE_REASONS)
_WIDTH: Final = _SEQUENCE + 1
_ROWS: Final = 4096
#: The batch size of a version's pending row: apart from its counters, since the version a request is pending
#: under is the model's (a forwarded model's may differ from the one Triton answers with, which it is counted in).
PENDING_ROW: Final = -1

#: A row key: (model, version, batch size), batch size 0 for the version's own totals.
Key = tuple[str, str, int]


class _Table:
    """This process's rows as one flat run of int64 cells, ``_WIDTH`` to a row: a growable list of Python ints
    when private, a fixed-size memory-mapped file when shared with the other workers."""

    def __init__(self, directory: Path | None) -> None:
        self.rows: dict[Key, int] = {}
        self.directory = directory
        self.cells: list[int] | memoryview
        if directory is None:
            # A list: adding to a Python int in a list is cheaper than adding through a buffer.
            self.cells = [0] * (64 * _WIDTH)
            return
        # Named by the process and its start, never reused: a worker started later with a dead one's pid (the
        # kernel reuses them) makes a file of its own instead of overwriting what the dead one counted.
        stem = directory / f"{os.getpid()}-{time.time_ns()}"
        self._mapped = np.memmap(stem.with_suffix(".counters"), dtype=np.int64, mode="w+", shape=(_ROWS, _WIDTH))
        # Written through a flat memoryview of its int64s: a Python int per cell, cheaper to add to than numpy's
        # scalar indexing, and the same bytes in memory.
        self.cells = memoryview(self._mapped).cast("B").cast("q")
        self.keys_path = stem.with_suffix(".keys")
        self.keys_path.write_text("")

    def row(self, key: Key) -> int:
        """The row of ``key``, added on first use (its key listed before the row is written)."""
        index = self.rows.get(key)
        if index is not None:
            return index
        index = len(self.rows)
        if (index + 1) * _WIDTH > len(self.cells):
            if isinstance(self.cells, memoryview):
                raise RuntimeError(f"more than {_ROWS} model versions and batch sizes to count")
            self.cells.extend([0] * len(self.cells))
        if self.directory is not None:
            with self.keys_path.open("a") as keys:
                keys.write(f"{index}\t{key[2]}\t{key[1]}\t{key[0]}\n")
        self.rows[key] = index
        return index

    def start(self, key: Key) -> int:
        """The offset in ``cells`` where the row of ``key`` starts."""
        return self.row(key) * _WIDTH

    def copy_of(self, index: int) -> np.ndarray:
        """Row ``index`` as a new int64 array."""
        return np.array(self.cells[index * _WIDTH : (index + 1) * _WIDTH], dtype=np.int64)


def _shared_rows(directory: Path) -> dict[Key, np.ndarray]:
    """Every worker's rows in ``directory``, summed by key (the last inference time by maximum)."""
    totals: dict[Key, np.ndarray] = {}
    for keys_path in directory.glob("*.keys"):
        listed = [line.split("\t", 3) for line in keys_path.read_text().splitlines() if line]
        if not listed:
            continue
        array = np.memmap(keys_path.with_suffix(".counters"), dtype=np.int64, mode="r", shape=(_ROWS, _WIDTH))
        for index, batch, version, name in listed:
            key, row = (name, version, int(batch)), _consistent(array, int(index))
            total = totals.get(key)
            if total is None:
                totals[key] = row
            else:
                last = max(total[_LAST], row[_LAST])
                total += row
                total[_LAST] = last
    return totals


def _consistent(array: np.ndarray, index: int) -> np.ndarray:
    """A copy of row ``index`` taken while no writer was inside it.

    A writer descheduled inside a row (a busy machine) holds readers back for as long as it is off the CPU, so the
    reader spins briefly, then sleeps between tries; a writer killed inside a row leaves it odd for good, and after
    two seconds the last copy is taken as it is.
    """
    deadline = time.monotonic() + 2.0
    tries = 0
    while True:
        sequence = int(array[index, _SEQUENCE])
        row = np.array(array[index])
        if sequence % 2 == 0 and int(array[index, _SEQUENCE]) == sequence:
            return row
        tries += 1
        if tries > 100:
            if time.monotonic() > deadline:
                return row
            time.sleep(0.0005)


def _durations(row: np.ndarray, names: tuple[str, ...]) -> dict[str, dict[str, int]]:
    return {name: {"count": int(row[_COUNT[name]]), "ns": int(row[_NS[name]])} for name in names}


class Statistics:
    """The counters of every model version this server has served."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._table = _Table(Path(directory) if directory else None)
        self._lock = threading.Lock()

    def success(self, name: str, version: str, total_ns: int, execution: Execution | None, requests: int = 1) -> None:
        """One successful request (``requests`` alike: the same time and execution share each, counted as that many
        in one update); a forwarded call (no ``execution``) counts as batch 1, all compute. A request merged with
        others by the dynamic batcher adds its own rows to the inference count and its phases to the version's
        totals; the merged execution (and its batch size's row) is counted once."""
        self.successes(name, version, total_ns, (execution,) * requests)

    def successes(self, name: str, version: str, total_ns: int, executions: Sequence[Execution | None]) -> None:
        """``success`` for each of ``executions`` (requests that reached the backend together, ``total_ns`` each); a
        run of one execution share (``execution_shares``) in one update, as Triton counts a batch's requests."""
        requests = len(executions)
        if not requests:
            return
        execution = executions[0]
        if requests > 1:
            runs = [0, *(i for i in range(1, requests) if executions[i] is not executions[i - 1]), requests]
            if len(runs) > 2:  # each run in an update of its own
                for start, end in itertools.pairwise(runs):
                    self.successes(name, version, total_ns, executions[start:end])
                return
        if execution is None:
            execution = Execution(1, 0, total_ns, 0)
        now_ms = time.time_ns() // 1_000_000
        inferences = execution.batch_size if execution.inferences is None else execution.inferences
        input_ns, infer_ns = execution.compute_input_ns, execution.compute_infer_ns
        output_ns = execution.compute_output_ns
        compute_ns = input_ns + infer_ns + output_ns
        queue_ns = max(total_ns - compute_ns, 0)
        total_one, queue_one = total_ns, queue_ns
        if requests != 1:
            inferences, total_ns, queue_ns = inferences * requests, total_ns * requests, queue_ns * requests
            input_ns, infer_ns, output_ns = input_ns * requests, infer_ns * requests, output_ns * requests
        table = self._table
        rows_of = table.rows
        with self._lock:  # written out, rows found and cells added to, as this runs on every request
            total = rows_of.get((name, version, 0))
            total = table.start((name, version, 0)) if total is None else total * _WIDTH
            batch = rows_of.get((name, version, execution.batch_size))
            batch = table.start((name, version, execution.batch_size)) if batch is None else batch * _WIDTH
            cells = table.cells
            # Both rows odd while they are written (the seqlock's readers in other workers retry meanwhile).
            cells[total + _SEQUENCE] += 1
            cells[batch + _SEQUENCE] += 1
            cells[total + _LAST] = now_ms
            cells[total + _INFERENCES] += inferences
            rows = (total, batch) if execution.leads else (total,)
            if execution.leads:
                cells[total + _EXECUTIONS] += requests
            cells[total + _SUCCESS] += total_ns
            cells[total + _QUEUE] += queue_ns
            cells[total + _REQUEST_BUCKETS + bisect_left(BUCKETS_NS, total_one)] += requests
            cells[total + _QUEUE_BUCKETS + bisect_left(BUCKETS_NS, queue_one)] += requests
            cells[total + _COMPUTE_BUCKETS + bisect_left(BUCKETS_NS, compute_ns)] += requests
            for row in rows:
                cells[row + _DONE] += requests
                cells[row + _INPUT] += input_ns
                cells[row + _INFER] += infer_ns
                cells[row + _OUTPUT] += output_ns
            cells[total + _SEQUENCE] += 1
            cells[batch + _SEQUENCE] += 1

    def failure(self, name: str, version: str, total_ns: int) -> None:
        """One request that reached the model's backend and failed."""
        table = self._table
        with self._lock:
            total = table.start((name, version, 0))
            cells = table.cells
            cells[total + _SEQUENCE] += 1
            cells[total + _FAILED] += 1
            cells[total + _NS["fail"]] += total_ns
            cells[total + _SEQUENCE] += 1

    def failed(self, name: str, version: str, reason: str, requests: int = 1) -> None:
        """``requests`` failed requests to this model version, by Triton's ``reason`` (one of ``FAILURE_REASONS``)."""
        table = self._table
        with self._lock:
            total = table.start((name, version, 0))
            cells = table.cells
            cells[total + _SEQUENCE] += 1
            cells[total + _REASONS[reason]] += requests
            cells[total + _SEQUENCE] += 1

    def pending_cell(self, name: str, version: str) -> int:
        """The cell of ``cells`` counting the requests to this model version in the worker not answered yet."""
        with self._lock:
            return self._table.start((name, version, PENDING_ROW)) + _PENDING

    def pending(self, cell: int, delta: int) -> None:
        """Add ``delta`` (1 as a request starts, -1 as it ends) to a ``pending_cell``: one cell, written whole, so
        readers need no sequence number."""
        with self._lock:
            self._table.cells[cell] += delta

    def _rows(self) -> dict[Key, np.ndarray]:
        if self._table.directory is not None:
            return _shared_rows(self._table.directory)
        with self._lock:
            return {key: self._table.copy_of(index) for key, index in self._table.rows.items()}

    def recorded(self, name: str) -> list[tuple[str, str]]:
        """The (name, version) pairs counted so far for ``name``."""
        return sorted({(model, version) for model, version, size in self._rows() if model == name and size >= 0})

    def documents(self, versions: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """``$model_stat`` objects in Triton's shape for these (name, version) pairs (``model_documents``)."""
        return model_documents(self._rows(), versions)


def model_documents(rows: dict[Key, np.ndarray], versions: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """``$model_stat`` objects in Triton's shape for these (name, version) pairs of ``rows``, zero for versions not
    yet used (cache counters are always zero: there is no response cache)."""
    empty = np.zeros(_WIDTH, dtype=np.int64)
    documents = []
    for name, version in versions:
        row = rows.get((name, version, 0), empty)
        batches = sorted((key[2], value) for key, value in rows.items() if key[:2] == (name, version) and key[2] > 0)
        documents.append(
            {
                "name": name,
                "version": version,
                "last_inference": int(row[_LAST]),
                "inference_count": int(row[_INFERENCES]),
                "execution_count": int(row[_EXECUTIONS]),
                "inference_stats": {
                    **_durations(row, _DURATIONS),
                    "cache_hit": {"count": 0, "ns": 0},
                    "cache_miss": {"count": 0, "ns": 0},
                },
                "batch_stats": [{"batch_size": size, **_durations(value, _PHASES)} for size, value in batches],
            }
        )
    return documents


@dataclass(frozen=True)
class Histogram:
    """One latency histogram of a model version: each bucket's count (not cumulative, the last one unbounded, as
    ``BUCKETS_NS``), and the sum of the times counted, in ns."""

    buckets: tuple[int, ...]
    sum_ns: int


@dataclass(frozen=True)
class Snapshot:
    """Every worker's rows read once: what a scrape of the metrics endpoint reports."""

    rows: dict[Key, np.ndarray]

    def versions(self) -> list[tuple[str, str]]:
        """Every (name, version) pair counted so far."""
        return sorted({(model, version) for model, version, size in self.rows if size >= 0})

    def histograms(self, name: str, version: str) -> dict[str, Histogram]:
        """The histograms (``HISTOGRAMS``) of a version's successes; their counts are its success count."""
        row = self.rows.get((name, version, 0))
        if row is None:
            row = np.zeros(_WIDTH, dtype=np.int64)
        sums = {
            "request": int(row[_SUCCESS]),
            "queue": int(row[_QUEUE]),
            "compute": int(row[_INPUT]) + int(row[_INFER]) + int(row[_OUTPUT]),
        }
        width = len(BUCKETS_NS) + 1
        return {
            histogram: Histogram(tuple(int(count) for count in row[start : start + width]), sums[histogram])
            for histogram, start in _BUCKETS.items()
        }

    def documents(self, versions: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """``$model_stat`` objects for these (name, version) pairs (``model_documents``)."""
        return model_documents(self.rows, versions)

    def failures(self, name: str, version: str) -> dict[str, int]:
        """A version's failed requests by Triton's reason (``FAILURE_REASONS``)."""
        row = self.rows.get((name, version, 0))
        return {reason: 0 if row is None else int(row[cell]) for reason, cell in _REASONS.items()}

    def pending(self) -> dict[tuple[str, str], int]:
        """The requests not answered yet, by (name, version), over the live workers (``retire``)."""
        return {(name, version): int(row[_PENDING]) for (name, version, size), row in self.rows.items()
                if size == PENDING_ROW}  # fmt: skip


def read_snapshot(directory: str | Path) -> Snapshot:
    """Every worker's rows in ``directory`` (``OIP_STATS_DIR``), read once: for a process that counts nothing
    (``oip serve``'s metrics exporter)."""
    return Snapshot(_shared_rows(Path(directory)))


def retire(directory: str | Path, pid: int) -> None:
    """A worker of ``directory`` that has ended (killed stuck, or crashed): each request it had in progress counted
    as a failure of its model version (``fail`` in the statistics, ``RETIRED_REASON`` in the metrics), since it will
    never be answered, and taken off the pending count; its counters kept; a row it was killed in the middle of
    writing taken as it is (its sequence number made even, so readers stop waiting for it). Nothing to do for a
    worker that ended before it made its table."""
    for keys_path in Path(directory).glob(f"{pid}-*.keys"):
        listed = [line.split("\t", 3) for line in keys_path.read_text().splitlines() if line]
        array = np.memmap(keys_path.with_suffix(".counters"), dtype=np.int64, mode="r+", shape=(_ROWS, _WIDTH))
        rows = {(name, version, int(batch)): int(index) for index, batch, version, name in listed}
        for (name, version, batch), index in list(rows.items()):
            row = array[index]
            row[_SEQUENCE] += row[_SEQUENCE] % 2
            if batch != PENDING_ROW or row[_PENDING] <= 0:
                row[_PENDING] = 0
                continue
            lost = int(row[_PENDING])
            row[_PENDING] = 0
            total = rows.get((name, version, 0))
            if total is None:  # no request to this version was counted in this worker: its row added here
                total = rows[(name, version, 0)] = len(rows)
                if total >= _ROWS:
                    continue
                with keys_path.open("a") as keys:
                    keys.write(f"{total}\t0\t{version}\t{name}\n")
            array[total, _FAILED] += lost
            array[total, _REASONS[RETIRED_REASON]] += lost
        array.flush()
        del array
