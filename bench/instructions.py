"""Instructions per request, counted by valgrind's callgrind: a measure of CPU work that a noisy neighbour does not
move (two runs of one checkout agree within 0.1 %), where CPU time swings by a third on this machine.

    python -m bench.instructions [CHECKOUT] [--requests 1000] [--what app,app-floor,lambda,lambda-floor]

``app``: bench/bench_request_cpu.py's small binary request to the app, inside the app; ``app-floor``: the same
request to bench/floor_server.py's bare ASGI callable; ``lambda``: an invocation of
``handler.http.lambda_handler`` on events/http-api/infer-json.json; ``lambda-floor``: bench/bench_lambda_invoke.py's
floor (Mangum over a bare ASGI callable) on the same event. The child process makes the handler and warms it up;
the requests counted are answered inside one call of ``functools.reduce``, and callgrind collects only within it
(``--toggle-collect``), so that start-up, warm-up and shut-down count nothing. Every run is on the calling thread
(``OIP_INLINE_RUN_MS=inf``, as the small models' are at native speed: under valgrind a run is slow enough for the
placement to move some to a worker thread), and onnxruntime runs each alone (``OIP_ORT_INTRA_OP_THREADS=1``: how
its pool shares a run out between threads varies from run to run). It needs valgrind (Debian's ``valgrind``); a
count takes a minute or two. bench/bench_against.py's ``--what instructions`` compares two checkouts' ``app``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Runs in the checkout: makes ``one()``, which answers one request (``app``: bench/bench_request_cpu.py's request
#: to ``build_app``'s app; ``app-floor``: the same request to its floor, bench/floor_server.py's bare ASGI callable
#: on the same model; ``lambda``: ``handler.http.lambda_handler`` on the API Gateway event of a JSON request
#: to iris; ``lambda-floor``: bench/bench_lambda_invoke.py's floor, Mangum over a bare ASGI callable, on the same
#: event), warms it up, then calls it ``count`` times inside ``functools.reduce``, the C function callgrind
#: collects in (``--toggle-collect``), so that nothing else is counted.
_CHILD = """
import asyncio, contextlib, functools, io, json, os, sys, tempfile
from pathlib import Path
count, what = int(sys.argv[1]), sys.argv[2]
with contextlib.ExitStack() as stack:
    if what in ("app", "app-floor"):
        from bench.bench_request_cpu import _one, _request
        from bench.bench_throughput import build_repositories
        try:
            from handler.config.settings import Settings
        except ImportError:  # a checkout from before handler/config/
            from handler.protocol.settings import Settings
        from handler.server import build_app
        repository, _ = build_repositories(Path(stack.enter_context(tempfile.TemporaryDirectory())))
        app = build_app(Settings.from_env(model_repository=str(repository)))
        if what == "app-floor":
            from bench.floor_server import FloorApp
            app = FloorApp(repository / "small")
        body, headers = _request()
        loop = asyncio.new_event_loop()
        one = lambda: loop.run_until_complete(_one(app, body, headers))
    else:
        from bench.bench_lambda_invoke import Context
        event = json.loads(Path("events/http-api/infer-json.json").read_text())
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))  # the metrics' lines
        if what == "lambda":
            from handler.http import lambda_handler as handler
        else:
            from mangum import Mangum
            from bench.bench_lambda_invoke import FloorApp
            handler = Mangum(FloorApp(), lifespan="off")
        context = Context()
        one = lambda: handler(event, context)
    for _ in range(300):
        one()
    functools.reduce(lambda _, __: one(), range(count), None)
"""

#: What ``--what`` may count.
WHATS = ("app", "app-floor", "lambda", "lambda-floor")


def _counted(checkout: Path, count: int, what: str) -> int:
    """Instructions callgrind counted while the child answered ``count`` requests (``what``: one of ``WHATS``)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench/instructions.py needs valgrind on the PATH (Debian's package valgrind)")
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        child = subprocess.run(
            ["valgrind", "--quiet", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
             f"--callgrind-out-file={out}", sys.executable, "-c", _CHILD, str(count), what],
            cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout), "OIP_INLINE_RUN_MS": "inf",
                               "OIP_ORT_INTRA_OP_THREADS": "1", "POWERTOOLS_METRICS_NAMESPACE": "OIP",
                               "POWERTOOLS_LOG_LEVEL": "WARNING"},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
        )  # fmt: skip
        if child.returncode != 0:
            raise SystemExit(f"{what} at {checkout} failed under valgrind:\n{child.stderr[-2000:]}")
        found = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise SystemExit(f"callgrind wrote no totals to {out}")
        return int(found[1])


def instructions_per_request(checkout: Path, count: int = 1000, what: str = "app") -> float:
    """Instructions per request of ``checkout``'s ``what`` (one of ``WHATS``)."""
    return _counted(checkout, count, what) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", nargs="?", type=Path, default=ROOT, help="a checkout (default: this one)")
    parser.add_argument("--requests", type=int, default=1000, help="requests counted (default: %(default)s)")
    parser.add_argument("--what", default="app", help=f"one or more of {', '.join(WHATS)} (default: %(default)s)")
    args = parser.parse_args()
    for what in args.what.split(","):
        if what not in WHATS:
            raise SystemExit(f"--what: {what!r} is not one of {', '.join(WHATS)}")
        figure = instructions_per_request(args.checkout.resolve(), args.requests, what)
        print(f"{what}: {figure:.0f} instructions per request")


if __name__ == "__main__":
    main()
