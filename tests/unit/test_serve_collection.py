"""``oip serve`` imports what its workers need without cyclic garbage collection (some 150 collections, one of them
full, 45-80 ms of a start), freezes what the imports made (a forked worker's collections then never scan or copy
the supervisor's objects) and leaves collection on, as it was, for serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
from handler.cli.serve import import_without_collection
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
{before}
import_without_collection(int(sys.argv[1]))
during = len(collections)
enabled, frozen = gc.isenabled(), gc.get_freeze_count()
class Cycle:
    pass
cycle = Cycle(); cycle.me = cycle; del cycle
print(json.dumps({{"during": during, "enabled": enabled, "frozen": frozen, "collected": gc.collect()}}))
"""


def _start(workers: int, before: str = "") -> dict[str, int]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(before=before), str(workers)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("workers", [1, 2])
def test_the_imports_make_no_collection_and_leave_collection_on(workers: int) -> None:
    answer = _start(workers)
    assert answer["during"] == 0
    assert answer["enabled"] and answer["frozen"] > 50_000  # numpy's, FastAPI's, onnxruntime's and our modules
    assert answer["collected"] >= 1  # garbage made afterwards is still collected


def test_collection_stays_off_when_it_was_off() -> None:
    assert not _start(2, "gc.disable()")["enabled"]
