"""The statistics table's two forms: private (a list of Python ints: Lambda, one worker, tests) and shared (a
memory-mapped file per worker) count the same requests into the same ``$model_stat`` documents."""

from __future__ import annotations

from pathlib import Path

from adapters.types import Execution
from handler.protocol.statistics_counters import Statistics


def _record(statistics: Statistics, versions: int) -> list[tuple[str, str]]:
    """A mix of every kind of recording over ``versions`` model versions, past the private table's first 64
    rows (each version also has a row per batch size)."""
    keys = []
    for index in range(versions):
        name, version = f"model-{index % 7}", str(index)
        keys.append((name, version))
        statistics.success(name, version, 5_000 + index, Execution(1, 10, 20 + index, 30))
        statistics.success(name, version, 9_000, Execution(4, 11, 21, 31, inferences=2))  # leads a merged batch
        statistics.success(name, version, 9_500, Execution(4, 12, 22, 32, inferences=2, leads=False))
        statistics.success(name, version, 700, None)  # forwarded: no execution, all compute
        statistics.failure(name, version, 123 + index)
    return keys


def _without_time(documents: list[dict]) -> list[dict]:
    return [{key: value for key, value in document.items() if key != "last_inference"} for document in documents]


def test_private_and_shared_tables_give_the_same_documents(tmp_path: Path) -> None:
    private, shared = Statistics(), Statistics(tmp_path)
    keys = _record(private, 40)
    assert _record(shared, 40) == keys
    documents = private.documents(keys)
    assert _without_time(documents) == _without_time(shared.documents(keys))
    first = documents[0]
    assert first["inference_count"] == 1 + 2 + 2 + 1
    assert first["execution_count"] == 1 + 1 + 1
    assert first["inference_stats"]["success"] == {"count": 4, "ns": 5_000 + 9_000 + 9_500 + 700}
    assert first["inference_stats"]["fail"] == {"count": 1, "ns": 123}
    assert [row["batch_size"] for row in first["batch_stats"]] == [1, 4]
    assert first["batch_stats"][1]["compute_infer"] == {"count": 1, "ns": 21}  # the merged run counted once
    assert all(document["last_inference"] > 0 for document in documents)


def test_a_version_not_yet_used_counts_zero() -> None:
    (document,) = Statistics().documents([("never", "1")])
    assert document["inference_count"] == 0
    assert document["inference_stats"]["success"] == {"count": 0, "ns": 0}
    assert document["batch_stats"] == []
