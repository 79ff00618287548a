"""Instructions per small binary request inside the app, counted by valgrind's callgrind: a measure of CPU work that
a noisy neighbour does not move (two runs of one checkout agree within 0.5 %), where CPU time swings by a third.

    python -m bench.instructions [CHECKOUT] [--requests 1000]

The app and the request are bench/bench_request_cpu.py's. The child process builds the app and warms it up; the
requests counted are answered inside one call of ``functools.reduce``, and callgrind collects only within it
(``--toggle-collect``), so that start-up, warm-up and shut-down count nothing. Every run is on the calling thread
(``OIP_INLINE_RUN_MS=inf``), as the small model's are at native speed (under valgrind a run is slow enough for the
placement to move some to a worker thread), and onnxruntime runs each alone (``OIP_ORT_INTRA_OP_THREADS=1``): how
its pool shares a run out between threads varies from run to run. It needs valgrind (Debian's ``valgrind``); a
run takes a minute and a half. bench/bench_against.py's ``--what instructions`` uses it to compare two checkouts.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Runs in the checkout: warms the app up, then answers ``count`` requests inside ``functools.reduce``, the C
#: function callgrind collects in (``--toggle-collect``), so that nothing else is counted.
_CHILD = """
import asyncio, functools, sys, tempfile
from pathlib import Path
from bench.bench_request_cpu import _one, _request
from bench.bench_throughput import build_repositories
try:
    from handler.config.settings import Settings
except ImportError:  # a checkout from before handler/config/
    from handler.protocol.settings import Settings
from handler.server import build_app
count = int(sys.argv[1])
with tempfile.TemporaryDirectory() as scratch:
    repository, _ = build_repositories(Path(scratch))
    app = build_app(Settings.from_env(model_repository=str(repository)))
    body, headers = _request()
    loop = asyncio.new_event_loop()
    for _ in range(300):
        loop.run_until_complete(_one(app, body, headers))
    functools.reduce(lambda _, __: loop.run_until_complete(_one(app, body, headers)), range(count), None)
"""


def _counted(checkout: Path, count: int) -> int:
    """Instructions callgrind counted while the child answered ``count`` requests."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
             f"--callgrind-out-file={out}", sys.executable, "-c", _CHILD, str(count)],
            cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout), "OIP_INLINE_RUN_MS": "inf",
                               "OIP_ORT_INTRA_OP_THREADS": "1"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
        )  # fmt: skip
        found = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise SystemExit(f"callgrind wrote no totals to {out}")
        return int(found[1])


def instructions_per_request(checkout: Path, count: int = 1000) -> float:
    """Instructions per request of ``checkout``'s app."""
    return _counted(checkout, count) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", nargs="?", type=Path, default=ROOT, help="a checkout (default: this one)")
    parser.add_argument("--requests", type=int, default=1000, help="requests counted (default: %(default)s)")
    args = parser.parse_args()
    print(f"{instructions_per_request(args.checkout.resolve(), args.requests):.0f} instructions per request")


if __name__ == "__main__":
    main()
