"""The Lambda init makes no full garbage collection (it scanned every object init made, some 50 ms of the cold
start), and leaves collection on, with init's objects frozen, for the invocations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json
full = []
gc.callbacks.append(lambda phase, info: full.append(1) if phase == "start" and info["generation"] == 2 else None)
{before}
import handler.http
during = len(full)
enabled, frozen = gc.isenabled(), gc.get_freeze_count()
class Cycle:
    pass
cycle = Cycle(); cycle.me = cycle; del cycle
print(json.dumps({{"during": during, "enabled": enabled, "frozen": frozen, "collected": gc.collect()}}))
"""


def _init(before: str = "") -> dict[str, int]:
    env = {**os.environ, "MODEL_REPOSITORY": str(ROOT / "models")}
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(before=before)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_init_makes_no_full_collection_and_leaves_collection_on() -> None:
    answer = _init()
    assert answer["during"] == 0
    assert answer["enabled"] and answer["frozen"] > 10_000  # the modules, the app and the sessions
    assert answer["collected"] >= 1  # garbage made after init is still collected


def test_init_leaves_collection_off_when_it_was_off() -> None:
    assert not _init("gc.disable()")["enabled"]
