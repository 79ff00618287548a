"""This checkout's per-request cost against another checkout's, side by side: is a change faster?

    python -m bench.bench_against OTHER_CHECKOUT [--rounds 5] [--what lambda,cpu]

On this shared 2-core machine the same measurement swings by a third from one run to the next, so a change of 5-10 %
cannot be seen by running a bench before and after it. This runs the measurement in fresh child processes, one per
checkout in turn, ``--rounds`` times, with ``PYTHONPATH`` (and the working directory) at each checkout, so a
noisy neighbour slows both alike, and prints each round and the ratio of the medians:

- ``lambda``: p50 of ``handler.http.lambda_handler`` on ``events/http-api/infer-json.json`` in process (after 300
  untimed invocations; bench/bench_lambda_invoke.py's Context);
- ``cpu``: CPU per small binary request inside the app (bench/bench_request_cpu.py's ``cpu_per_request``);
- ``image``: CPU per ``tiny_image`` request (1x3x224x224 FP32, binary, in 64 KiB messages as uvicorn hands a body
  over) inside the app, every run inline on one onnxruntime thread;
- ``instructions``: instructions per the same request, counted by valgrind (bench/instructions.py): the same
  within 0.1 % from run to run, so one round each tells a change of 1 %. Not in the default (a minute or two a
  round).

The other checkout is e.g. ``git worktree add /tmp/before HEAD~3``; it needs those two bench modules.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.instructions import instructions_per_request

ROOT = Path(__file__).resolve().parents[1]

#: Each child prints one number: microseconds.
_CHILDREN = {
    "lambda": """
import contextlib, io, json, os, statistics, time
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OIP"); os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
from bench.bench_lambda_invoke import Context
event = json.loads(open("events/http-api/infer-json.json").read())
with contextlib.redirect_stdout(io.StringIO()) as out:
    from handler.http import lambda_handler
    context, samples = Context(), []
    for index in range(2500):
        start = time.perf_counter_ns()
        lambda_handler(event, context)
        if index >= 300:
            samples.append(time.perf_counter_ns() - start)
        out.seek(0)
        out.truncate()
print(statistics.median(samples) / 1000)
""",
    "cpu": """
import asyncio, tempfile
from pathlib import Path
from bench.bench_request_cpu import cpu_per_request
from bench.bench_throughput import build_repositories
try:
    from handler.config.settings import Settings
except ImportError:  # a checkout from before handler/config/
    from handler.protocol.settings import Settings
from handler.server import build_app
with tempfile.TemporaryDirectory() as scratch:
    repository, _ = build_repositories(Path(scratch))
    app = build_app(Settings.from_env(model_repository=str(repository)))
    print(asyncio.run(cpu_per_request(app, 4000)))
""",
    "image": """
import asyncio, json, os, time
import numpy as np
os.environ.update(OIP_INLINE_RUN_MS="inf", OIP_ORT_INTRA_OP_THREADS="1")
try:
    from handler.config.settings import DEMO_REPOSITORY, Settings
except ImportError:  # a checkout from before handler/config/
    from handler.protocol.settings import DEMO_REPOSITORY, Settings
from handler.server import build_app
app = build_app(Settings.from_env(model_repository=str(DEMO_REPOSITORY)))
image = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
header = json.dumps({"inputs": [{"name": "image", "shape": [1, 3, 224, 224], "datatype": "FP32",
                                 "parameters": {"binary_data_size": image.nbytes}}],
                     "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}]}).encode()
body = header + image.tobytes()
chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]
headers = [(b"content-type", b"application/octet-stream"), (b"content-length", str(len(body)).encode()),
           (b"inference-header-content-length", str(len(header)).encode())]
scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
         "path": "/v2/models/tiny_image/infer", "raw_path": b"/v2/models/tiny_image/infer", "query_string": b"",
         "root_path": "", "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000)}
async def one():
    parts = iter(chunks)
    async def receive():
        chunk = next(parts, b"")
        return {"type": "http.request", "body": chunk, "more_body": chunk is not chunks[-1]}
    statuses = []
    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
    await app(dict(scope), receive, send)
    assert statuses == [200], statuses
async def many(count):
    for _ in range(count):
        await one()
asyncio.run(many(100))
start = time.process_time()
asyncio.run(many(1000))
print((time.process_time() - start) / 1000 * 1e6)
""",
}


def _sample(checkout: Path, what: str) -> float:
    """One child process's figure (us, or instructions) for ``what``, with ``checkout``'s code."""
    if what == "instructions":
        return instructions_per_request(checkout)
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    found = subprocess.run(
        [sys.executable, "-c", _CHILDREN[what]], cwd=checkout, env=env, capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        raise SystemExit(f"{what} at {checkout} failed:\n{found.stderr[-2000:]}")
    return float(found.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the checkout to compare with (a git worktree)")
    parser.add_argument("--rounds", type=int, default=5, help="child processes per checkout (default: %(default)s)")
    parser.add_argument("--what", default="lambda,cpu", help="lambda, cpu, image, instructions (default: %(default)s)")
    args = parser.parse_args()
    if not (args.other / "handler" / "http.py").is_file():
        raise SystemExit(f"{args.other} is not a checkout of this project")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for what in args.what.split(","):
        ours: list[float] = []
        other: list[float] = []
        for _ in range(args.rounds):
            ours.append(_sample(ROOT, what))
            other.append(_sample(args.other.resolve(), what))
        unit = "" if what == "instructions" else " us"
        listed = [", ".join(f"{x:.1f}" for x in figures) for figures in (ours, other)]
        print(f"{what}: this {listed[0]}{unit}; other {listed[1]}{unit}")
        print(f"{what}: medians {statistics.median(ours):.1f} vs {statistics.median(other):.1f}{unit}, "
              f"this/other {statistics.median(ours) / statistics.median(other):.3f}")  # fmt: skip
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
