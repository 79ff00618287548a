"""``Statistics.successes`` (the requests of one execution counted in one update per execution share, as a batch
chunk's merged rows are) leaves the same counters as one ``success`` per request: ``$model_stat`` documents in
private and shared tables, and the shared table's histograms and failures, which the metrics endpoint reads."""

# covers: handler/protocol/merged_run.py

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.types import Execution
from handler.protocol.merged_run import execution_shares
from handler.protocol.statistics_counters import Statistics, read_snapshot

#: Executions as the backends give them: a plain one, one the dynamic batcher shared, none (forwarded).
EXECUTIONS = {
    "plain": Execution(12, 1_000, 20_000, 3_000),
    "shared": Execution(12, 1_000, 20_000, 3_000, inferences=4, leads=False),
    "forwarded": None,
}
KEY = [("m", "1")]


def _documents(statistics: Statistics) -> list[dict]:
    return [{k: v for k, v in d.items() if k != "last_inference"} for d in statistics.documents(KEY)]


def _scraped(directory: Path) -> tuple[list[dict], dict, dict]:
    snapshot = read_snapshot(directory)
    documents = [{k: v for k, v in d.items() if k != "last_inference"} for d in snapshot.documents(KEY)]
    return documents, snapshot.histograms("m", "1"), snapshot.failures("m", "1")


def _count(statistics: Statistics, executions: list[Execution | None], at_once: bool) -> None:
    for total_ns in (40_000, 7_000_000):  # two executions, their times in different buckets
        if at_once:
            statistics.successes("m", "1", total_ns, executions)
        else:
            for execution in executions:
                statistics.success("m", "1", total_ns, execution)
    statistics.failure("m", "1", 900)


@pytest.mark.parametrize("kind", sorted(EXECUTIONS))
@pytest.mark.parametrize("requests", [1, 2, 3, 256])
def test_successes_count_as_one_success_per_request(kind: str, requests: int, tmp_path: Path) -> None:
    executions = execution_shares(EXECUTIONS[kind], requests, 3)
    one_by_one, at_once = Statistics(), Statistics()
    _count(one_by_one, executions, at_once=False)
    _count(at_once, executions, at_once=True)
    assert _documents(at_once) == _documents(one_by_one)
    (document,) = at_once.documents(KEY)
    assert document["inference_stats"]["success"]["count"] == 2 * requests

    (tmp_path / "one").mkdir()
    (tmp_path / "many").mkdir()
    _count(Statistics(tmp_path / "one"), executions, at_once=False)
    _count(Statistics(tmp_path / "many"), executions, at_once=True)
    assert _scraped(tmp_path / "many") == _scraped(tmp_path / "one")
    assert _scraped(tmp_path / "many")[0] == _documents(one_by_one)


def test_successes_keep_each_execution_apart() -> None:
    """Executions that differ are each counted as their own (no run of equal objects spans two of them)."""
    first, second = Execution(4, 1, 2, 3), Execution(8, 10, 20, 30, inferences=2)
    executions = [first, first, second, None, None, first]
    one_by_one, at_once = Statistics(), Statistics()
    _count(one_by_one, executions, at_once=False)
    _count(at_once, executions, at_once=True)
    assert _documents(at_once) == _documents(one_by_one)
    (document,) = at_once.documents(KEY)
    assert [batch["batch_size"] for batch in document["batch_stats"]] == [1, 4, 8]
