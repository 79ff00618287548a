"""onnxruntime's telemetry stays off in the product: no uploader thread, nothing written under $HOME.

onnxruntime 1.32 on Linux starts a 1DS telemetry uploader at import (a thread, a device id and an SQLite store
under ~/.cache/Microsoft) unless ORT_DISABLE_TELEMETRY is set before the import, and skips it by itself where the
CI variables are set: the children here run without them, as a deployment does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Variables with which onnxruntime suppresses telemetry on its own (continuous integration).
CI_VARIABLES = ("CI", "TF_BUILD", "GITHUB_ACTIONS")

#: The uploader's store: written during the import when telemetry is on (before the import returns).
STORE = ".cache/Microsoft/DeveloperTools/.onnxruntime/deviceid"
#: Threads started by the statement, and whether the uploader's store was written when it returned. With the store
#: written, the uploader is on: its thread may start just after the import returns, so wait for it (bounded).
CHILD = """
import os, sys, time
import numpy
before = len(os.listdir("/proc/self/task"))
exec(sys.argv[1])
store = os.path.exists(os.path.join(os.environ["HOME"], sys.argv[2]))
deadline = time.monotonic() + 60
while store and len(os.listdir("/proc/self/task")) <= before and time.monotonic() < deadline:
    time.sleep(0.01)
print(len(os.listdir("/proc/self/task")) - before, store)
"""


def _new_threads(tmp_path: Path, statement: str, **env: str) -> tuple[int, bool, list[Path]]:
    """Threads started by ``statement`` in a fresh process (HOME in ``tmp_path``), whether the uploader's store
    was there when it returned, and the files it left under HOME."""
    home = tmp_path / "home"
    home.mkdir()
    clean = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES and k != "ORT_DISABLE_TELEMETRY"}
    found = subprocess.run(
        [sys.executable, "-c", CHILD, statement, STORE],
        env={**clean, "HOME": str(home), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    threads, store = found.stdout.split()
    return int(threads), store == "True", [path for path in home.rglob("*") if path.is_file()]


def test_the_onnx_backend_imports_onnxruntime_without_telemetry(tmp_path: Path) -> None:
    threads, store, files = _new_threads(tmp_path, "import adapters.onnx.backend")
    assert (threads, store, files) == (0, False, [])


def test_without_the_setting_onnxruntime_starts_its_uploader(tmp_path: Path) -> None:
    """What the setting prevents (if this fails, onnxruntime dropped its telemetry and the setting can go)."""
    threads, store, files = _new_threads(tmp_path, "import onnxruntime")
    assert threads >= 1 and store and tmp_path / "home" / STORE in files


def test_a_deployment_may_turn_it_back_on(tmp_path: Path) -> None:
    threads, store, _ = _new_threads(tmp_path, "import adapters.onnx.backend", ORT_DISABLE_TELEMETRY="0")
    assert threads >= 1 and store
