"""Ways to run ``oip serve``'s app with 2 worker processes, side by side: start to first answer, memory per worker,
perf_analyzer throughput.

    python -m bench.bench_workers [--ways fork,uvicorn-spawn,...] [--starts 5] [--rounds 3] [--seconds 3]
                                  [--concurrency 2,8] [--baseline CHECKOUT]

Every way serves ``small`` (bench/bench_throughput.py) from the ``servers`` tool venv of scripts/tool_env.py
(gunicorn, uvicorn-worker beside the app's dependencies at the lock's versions), with handler/ from this work tree
(``PYTHONPATH``), ``OIP_STATS_DIR`` set as ``oip serve`` sets it, and uvicorn's server in each worker with the
HTTP protocol ``oip serve`` gives it (handler/cli/connections.py) and no WebSocket protocol:

- fork: ``oip serve --workers 2``: handler/cli/workers.py forks the workers from a supervisor that imported the
  app's modules (handler.server.preload) and listens from the start;
- baseline (with ``--baseline CHECKOUT``): ``oip serve --workers 2`` of another checkout, e.g. the revision whose
  supervisor was uvicorn's own with its ``spawn`` context replaced by ``fork``;
- uvicorn-spawn: ``uvicorn --factory --workers 2``: uvicorn's supervisor spawning fresh interpreters, each of which
  imports everything;
- gunicorn: gunicorn's arbiter with uvicorn-worker's ``UvicornWorker`` (bench/gunicorn_conf.py's subclass with the
  same protocol); the workers import the app after the fork;
- gunicorn-imports: the same, with the arbiter importing what ``oip serve``'s supervisor imports (gunicorn's
  ``on_starting`` hook calling handler.cli.serve's ``import_without_collection``) before it forks;
- gunicorn-preload: gunicorn's ``--preload``: the arbiter calls the factory, so the app and its onnxruntime
  sessions are made once, before the fork, and the workers share them.

Start: from just before the process starts to the first correct JSON answer of ``POST /v2/models/small/infer``,
polled every 10 ms, median of ``--starts`` runs (the ways take turns). Memory: after the throughput runs, the
supervisor's and each worker's RSS and PSS (``/proc/PID/smaps_rollup``: PSS counts a page shared by n processes
as 1/n in each, so it adds up to what the processes take together). Throughput: perf_analyzer over HTTP, binary
tensors, batch 1, at each concurrency for about ``--seconds``; every way once per round (``--rounds``), in turn, so
that a change in the machine's load falls on all of them; the table gives the median over the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from bench.bench_serve_start import REQUEST, _correct, expected
from bench.bench_servers import _point, rss_mb, workers
from bench.bench_throughput import MODEL, SMALL_CONFIG, free_ports, small_model
from bench.perf_analyzer import Measurement, perf_analyzer
from scripts.tool_env import venv as tool_venv
from tests.support import onnx_models

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 2
DRAIN_SECONDS = 20
APP = "handler.server:app_from_env"
PROTOCOL = "handler.cli.connections:GuardedHttpToolsProtocol"
GUNICORN_CONF = str(ROOT / "bench" / "gunicorn_conf.py")
WORKER_CLASS = "bench.gunicorn_conf.Worker"

Command = Callable[[Path, int], list[str]]


def _oip(bin_dir: Path, port: int) -> list[str]:
    return [str(bin_dir / "python"), "-m", "handler.cli", "serve", "--port", str(port), "--workers", str(WORKERS),
            "--no-access-log", "--log-level", "warning", "--drain-timeout", str(DRAIN_SECONDS)]  # fmt: skip


def _uvicorn_spawn(bin_dir: Path, port: int) -> list[str]:
    return [str(bin_dir / "python"), "-m", "uvicorn", APP, "--factory", "--workers", str(WORKERS), "--port", str(port),
            "--http", PROTOCOL, "--ws", "none", "--no-access-log", "--log-level", "warning",
            "--timeout-graceful-shutdown", str(DRAIN_SECONDS)]  # fmt: skip


def _gunicorn(*options: str) -> Command:
    def command(bin_dir: Path, port: int) -> list[str]:
        return [str(bin_dir / "gunicorn"), f"{APP}()", "--worker-class", WORKER_CLASS, "--workers", str(WORKERS),
                "--bind", f"127.0.0.1:{port}", "--graceful-timeout", str(DRAIN_SECONDS), "--log-level", "warning",
                *options]  # fmt: skip

    return command


WAYS: dict[str, Command] = {
    "fork": _oip,
    "baseline": _oip,
    "uvicorn-spawn": _uvicorn_spawn,
    "gunicorn": _gunicorn(),
    "gunicorn-imports": _gunicorn("--config", GUNICORN_CONF),
    "gunicorn-preload": _gunicorn("--preload"),
}


@dataclass
class Result:
    starts: list[float] = field(default_factory=list)
    points: dict[int, list[Measurement | str]] = field(default_factory=dict)
    supervisor: tuple[float, float] = (0.0, 0.0)
    workers: list[tuple[float, float]] = field(default_factory=list)


def pss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def start(
    way: str, repository: Path, baseline: Path | None, log: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``way`` on a fresh loopback port; its process group is stopped on exit."""
    bin_dir = tool_venv("servers") / "bin"
    (port,) = free_ports(1)
    code = baseline if way == "baseline" and baseline else ROOT
    with tempfile.TemporaryDirectory(prefix="oip-stats-") as stats:
        env = {**os.environ, "PYTHONPATH": str(code), "MODEL_REPOSITORY": str(repository), "OIP_STATS_DIR": stats,
               "OIP_DRAIN_TIMEOUT": str(DRAIN_SECONDS), "OIP_LOG_LEVEL": "warning"}  # fmt: skip
        for name in ("OIP_GRPC_ADDRESS", "OIP_WORKERS"):
            env.pop(name, None)
        with log.open("ab") as output:
            process = subprocess.Popen(WAYS[way](bin_dir, port), cwd=code, env=env, stdout=output,
                                       stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            yield process, port
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=DRAIN_SECONDS + 10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def _first_answer(process: subprocess.Popen[bytes], port: int, want: np.ndarray, log: Path) -> None:
    deadline = time.monotonic() + 120
    with httpx.Client(timeout=5) as client:
        while True:
            with contextlib.suppress(httpx.TransportError, ValueError):
                answer = client.post(f"http://127.0.0.1:{port}/v2/models/{MODEL}/infer", json=REQUEST)
                if answer.status_code == 200 and _correct(answer.json(), want):
                    return
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"no answer from {process.args}: {log.read_text()[-3000:]}")
            time.sleep(0.01)


def start_to_answer(way: str, repository: Path, baseline: Path | None, workdir: Path, want: np.ndarray) -> float:
    log = workdir / f"{way}.log"
    started = time.perf_counter()
    with start(way, repository, baseline, log) as (process, port):
        _first_answer(process, port, want, log)
        return time.perf_counter() - started


def throughput(
    way: str, repository: Path, baseline: Path | None, workdir: Path, levels: list[int], seconds: float, result: Result
) -> None:
    tool = perf_analyzer()
    log = workdir / f"{way}.log"
    with start(way, repository, baseline, log) as (process, port):
        deadline = time.monotonic() + 120
        while len(workers(process.pid)) < WORKERS or not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{way} did not start: {log.read_text()[-3000:]}")
            time.sleep(0.2)
        interval_ms = max(200, int(seconds * 1000 / 3))
        for level in levels:
            point = _point(tool, f"127.0.0.1:{port}", level, interval_ms)
            result.points.setdefault(level, []).append(point)
            shown = f"{point.infer_per_second:,.0f} infer/s" if isinstance(point, Measurement) else point
            print(f"{way:>16} c={level}: {shown}", file=sys.stderr, flush=True)
        result.supervisor = (rss_mb(process.pid), pss_mb(process.pid))
        result.workers = [(rss_mb(pid), pss_mb(pid)) for pid in workers(process.pid)]


def _answers(port: int) -> bool:
    with contextlib.suppress(httpx.TransportError):
        return httpx.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2).status_code == 200
    return False


def table(results: dict[str, Result], levels: list[int]) -> str:
    head = "| way | start to first answer | " + " | ".join(f"infer/s c={level}" for level in levels)
    lines = [head + " | supervisor RSS / PSS | per worker RSS / PSS | total PSS |", "| --- " * (5 + len(levels)) + "|"]
    for way, result in results.items():
        start = f"{statistics.median(result.starts) * 1000:.0f} ms" if result.starts else "-"
        rates = []
        for level in levels:
            measured = [p.infer_per_second for p in result.points.get(level, []) if isinstance(p, Measurement)]
            rates.append(f"{statistics.median(measured):,.0f}" if measured else "failed")
        supervisor = f"{result.supervisor[0]:.0f} / {result.supervisor[1]:.0f} MB"
        each = ", ".join(f"{rss:.0f} / {pss:.0f}" for rss, pss in result.workers) + " MB"
        total = result.supervisor[1] + sum(pss for _, pss in result.workers)
        lines.append(f"| {way} | {start} | " + " | ".join(rates) + f" | {supervisor} | {each} | {total:.0f} MB |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ways", type=lambda t: t.split(","), default=[w for w in WAYS if w != "baseline"])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--concurrency", type=lambda t: [int(n) for n in t.split(",")], default=[2, 8])
    parser.add_argument("--rounds", type=int, default=3, help="throughput: every way once per round, medians")
    parser.add_argument("--baseline", type=Path, help="another checkout, run as the way 'baseline'")
    args = parser.parse_args()
    ways = args.ways + (["baseline"] if args.baseline and "baseline" not in args.ways else [])
    unknown = sorted(set(ways) - set(WAYS))
    if unknown:
        sys.exit(f"unknown ways {', '.join(unknown)}; choose from {', '.join(WAYS)}")
    want = expected()
    results = {way: Result() for way in ways}
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as scratch:
        workdir = Path(scratch)
        repository = workdir / "repository"
        onnx_models.save(small_model(), repository, MODEL, config=SMALL_CONFIG)
        print(f"load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
        for run in range(args.starts):
            for way in ways:
                results[way].starts.append(start_to_answer(way, repository, args.baseline, workdir, want))
                print(f"start {run + 1} {way}: {results[way].starts[-1]:.2f} s", file=sys.stderr, flush=True)
        for _ in range(args.rounds):
            for way in ways:
                throughput(way, repository, args.baseline, workdir, args.concurrency, args.seconds, results[way])
    print(table(results, args.concurrency))
    print(f"\nload average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
