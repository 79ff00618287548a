"""What Prometheus metrics cost ``oip serve``: perf_analyzer's throughput with the metrics port on and off, side by
side, and the in-process cost per request of what a worker records.

    python -m bench.bench_metrics [--rounds 5] [--seconds 2] [--concurrency 4] [--protocols http,grpc]
                                  [--workers 1,2] [--scrape-every 1] [--in-process-only]

The model, client and measurement are bench_throughput's (``small``, binary zeros, batch 1, perf_analyzer on the
same cores). Each round starts the server anew with metrics off (``--metrics-port 0``), then on (a free port), the
order alternating from round to round, so a machine growing busier over the run favours neither side; each round
gives one on/off ratio from two runs minutes apart at most. The table gives each side's median infer/s over the
rounds (with the lowest and highest), and the median of the rounds' on/off - 1 (with the lowest and highest); and
the server's CPU time per request (its processes' user and system time over the measurement, divided by the
successes its statistics counted meanwhile), which other work on a shared machine disturbs less than throughput.

With metrics on, the endpoint is scraped every second during the measurement (``--scrape-every``; 0: never).

In process: ``Telemetry.observe`` around ``Statistics.success`` on a shared table, as a worker does per request,
with the telemetry of metrics off (``Telemetry``) and on (``MeteredTelemetry``, the pending count); the statistics
(and the histograms' buckets in them) are recorded either way. And a whole REST request through the app (iris, its
ASGI callable called in process, no HTTP parsing), CPU time per request, metrics off and on in alternating rounds.
``--app-requests N --side on|off`` only serves N such requests, for counting instructions under callgrind:

    OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind --separate-threads=yes \
        python -m bench.bench_metrics --app-requests 5200 --side on
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import threading
import time
import timeit
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.bench_throughput import MODEL, _oip_executable, _process, build_repositories, free_ports
from bench.perf_analyzer import Measurement, PerfAnalyzer, UnstableError, measure, perf_analyzer


@dataclass(frozen=True)
class Point:
    """One side of one round: perf_analyzer's measurement and the server's CPU time per request."""

    measurement: Measurement
    cpu_us: float


#: {(workers, protocol, metrics on): [one point per round]}
Results = dict[tuple[int, str, bool], list[Point]]


@dataclass(frozen=True)
class Server:
    """A running ``oip serve``: perf_analyzer's ``host:port``, its HTTP base URL, its supervisor's pid, and its
    metrics URL when metrics are on."""

    url: str
    http: str
    pid: int
    metrics: str | None


@contextlib.contextmanager
def scraping(url: str | None, interval: float = 1.0) -> Iterator[list[int]]:
    """Scrape ``url`` every ``interval`` seconds (as a Prometheus would, more often than its usual 15 s) while the
    block runs; the list gets each scrape's size in bytes."""
    sizes: list[int] = []
    stop = threading.Event()

    def scrape() -> None:
        while url is not None and not stop.wait(interval):
            sizes.append(len(httpx.get(url, timeout=10).content))

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    try:
        yield sizes
    finally:
        stop.set()
        thread.join(15)


def _supervisor(http: int) -> int:
    """The pid of the ``oip serve`` started with ``--port http``."""
    wanted = b"serve\0", f"--port\0{http}\0".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes()
                if all(part in command for part in wanted):
                    return int(entry.name)
    raise RuntimeError(f"no oip serve on port {http}")


def _cpu_seconds(root: int) -> float:
    """User and system time of ``root`` and its children (the workers and the metrics process)."""
    from handler.observability.exporter import server_pids

    ticks = 0
    for pid in server_pids(root):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _successes(http: str) -> int:
    documents = httpx.get(f"{http}/v2/models/{MODEL}/stats", timeout=10).json()["model_stats"]
    return sum(document["inference_stats"]["success"]["count"] for document in documents)


@contextlib.contextmanager
def serve(repository: Path, protocol: str, metrics: bool, workers: int, log: Path) -> Iterator[Server]:
    """``oip serve`` on fresh loopback ports, metrics on (a port of its own) or off."""
    http, grpc, metrics_port = free_ports(3)
    command = [
        _oip_executable(), "serve", "--model-repository", str(repository), "--port", str(http), "--no-access-log",
        "--log-level", "warning", "--workers", str(workers), "--metrics-port", str(metrics_port if metrics else 0),
    ]  # fmt: skip
    if protocol == "grpc":
        command += ["--grpc-port", str(grpc)]
    with _process(command, http, grpc if protocol == "grpc" else None, log):
        url = f"127.0.0.1:{grpc if protocol == 'grpc' else http}"
        scraped = f"http://127.0.0.1:{metrics_port}/metrics" if metrics else None
        yield Server(url, f"http://127.0.0.1:{http}", _supervisor(http), scraped)


def _point(
    tool: PerfAnalyzer, server: Server, protocol: str, concurrency: int, seconds: float, scrape_every: float = 1.0
) -> Point:
    cpu, done = _cpu_seconds(server.pid), _successes(server.http)
    with scraping(server.metrics if scrape_every > 0 else None, scrape_every):
        try:
            found = measure(tool, server.url, MODEL, protocol, concurrency, int(seconds * 1000), stability=1000)
        except UnstableError:  # stability 1000 takes any three windows; perf_analyzer may still refuse: once more
            found = measure(tool, server.url, MODEL, protocol, concurrency, int(seconds * 1000), stability=1000)
    cpu, done = _cpu_seconds(server.pid) - cpu, _successes(server.http) - done
    return Point(found, cpu / max(done, 1) * 1e6)


def run(
    tool: PerfAnalyzer, repository: Path, workdir: Path, protocols: list[str], workers: list[int], rounds: int,
    seconds: float, concurrency: int, scrape_every: float = 1.0,
) -> Results:  # fmt: skip
    results: Results = {}
    for index in range(rounds):
        for count in workers:
            for protocol in protocols:
                for metrics in (False, True) if index % 2 == 0 else (True, False):
                    log = workdir / f"oip-{protocol}-{count}-{'on' if metrics else 'off'}.log"
                    with serve(repository, protocol, metrics, count, log) as server:
                        point = _point(tool, server, protocol, concurrency, seconds, scrape_every)
                    results.setdefault((count, protocol, metrics), []).append(point)
                    side = "on " if metrics else "off"
                    print(f"round {index + 1} workers {count} {protocol} metrics {side}: "
                          f"{point.measurement.infer_per_second:,.0f} infer/s, {point.cpu_us:.0f} us CPU per request",
                          flush=True)  # fmt: skip
    return results


def table(results: Results) -> str:
    lines = [
        "| Workers | Protocol | Metrics off: infer/s (lowest-highest) | Metrics on: infer/s (lowest-highest) "
        "| On / off - 1: median of rounds (lowest, highest) | CPU us per request, off / on (median) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for count, protocol in dict.fromkeys((count, protocol) for count, protocol, _ in results):
        sides = [results[(count, protocol, side)] for side in (False, True)]
        off, on = ([point.measurement.infer_per_second for point in points] for points in sides)
        ratios = [b / a - 1 for a, b in zip(off, on, strict=True)]
        cells = [f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})" for values in (off, on)]
        spread = f"{statistics.median(ratios):+.1%} ({min(ratios):+.1%}, {max(ratios):+.1%})"
        cpu = " / ".join(f"{statistics.median(point.cpu_us for point in points):.0f}" for points in sides)
        name = {"http": "HTTP", "grpc": "gRPC"}.get(protocol, protocol)
        lines.append(f"| {count} | {name} | {cells[0]} | {cells[1]} | {spread} | {cpu} |")
    return "\n".join(lines)


def in_process(repeat: int = 7, number: int = 100_000) -> dict[str, float]:
    """Microseconds per request of observing it and counting its success, metrics off and on (the fastest of
    ``repeat`` timings of ``number`` requests)."""
    from adapters.types import Execution
    from handler.observability.prometheus import MeteredTelemetry
    from handler.observability.telemetry import Telemetry
    from handler.protocol.statistics_counters import Statistics

    execution = Execution(1, 10_000, 40_000, 5_000)
    timings = {}
    with tempfile.TemporaryDirectory(prefix="oip-bench-metrics-") as directory:
        counted = Statistics(directory)
        telemetries: dict[str, Telemetry] = {
            "off": Telemetry(),
            "on": MeteredTelemetry(counted, lambda name, version: version or "1"),
        }
        for side, telemetry in telemetries.items():

            def request(telemetry: Telemetry = telemetry) -> None:
                with telemetry.observe(MODEL, None):
                    counted.success(MODEL, "1", 120_000, execution)

            timings[side] = _fastest(request, repeat, number)
    return timings


IRIS_BODY = json.dumps(
    {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [5.1, 3.5, 1.4, 0.2]}]}
).encode()
IRIS_SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
    "path": "/v2/models/iris/infer", "raw_path": b"/v2/models/iris/infer", "query_string": b"", "root_path": "",
    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(IRIS_BODY)).encode())],
    "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000),
}  # fmt: skip


async def _call(app: Any) -> None:
    """One iris inference request through the ASGI ``app``; AssertionError unless it answers 200."""
    received = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:  # the request is over: wait for a disconnect that never comes
            await asyncio.Event().wait()
        received = True
        return {"type": "http.request", "body": IRIS_BODY, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(dict(IRIS_SCOPE), receive, send)
    assert status == [200], status


def _apps(directory: str, sides: tuple[str, ...]) -> dict[str, Any]:
    """The demo repository's app over a shared statistics table, per side: metrics off (port 0) or on."""
    from handler.config.settings import DEMO_REPOSITORY, Settings
    from handler.server import build_app

    return {
        side: build_app(
            Settings(
                model_repository=str(DEMO_REPOSITORY), stats_dir=directory, metrics_port=8002 if side == "on" else 0
            )
        )
        for side in sides
    }


async def _in_app(rounds: int, number: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="oip-bench-metrics-") as directory:
        apps = _apps(directory, ("off", "on"))
        for app in apps.values():
            for _ in range(number // 4):
                await _call(app)
        timings: dict[str, list[float]] = {"off": [], "on": []}
        for index in range(rounds):
            for side in ("off", "on") if index % 2 == 0 else ("on", "off"):
                started = time.process_time()
                for _ in range(number):
                    await _call(apps[side])
                timings[side].append((time.process_time() - started) / number * 1e6)
    return timings


def in_app(rounds: int = 10, number: int = 2000) -> dict[str, list[float]]:
    """CPU microseconds per REST request through the app, per side, one value per round."""
    return asyncio.run(_in_app(rounds, number))


async def _serve_requests(side: str, count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="oip-bench-metrics-") as directory:
        app = _apps(directory, (side,))[side]
        for _ in range(count):
            await _call(app)


def _fastest(function: Callable[[], None], repeat: int, number: int) -> float:
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--protocols", default="http,grpc")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--scrape-every", type=float, default=1.0, help="seconds between scrapes; 0: none")
    parser.add_argument("--in-process-only", action="store_true", help="skip perf_analyzer")
    parser.add_argument("--app-requests", type=int, help="only serve this many requests through the app (callgrind)")
    parser.add_argument("--side", choices=("off", "on"), default="on", help="metrics of --app-requests' app")
    args = parser.parse_args()
    if args.app_requests is not None:
        asyncio.run(_serve_requests(args.side, args.app_requests))
        return
    timings = in_process()
    print(f"in process, per request: metrics off {timings['off']:.2f} us, on {timings['on']:.2f} us "
          f"(+{timings['on'] - timings['off']:.2f} us)", flush=True)  # fmt: skip
    app = in_app()
    differences = [on - off for off, on in zip(app["off"], app["on"], strict=True)]
    print(f"through the app, CPU per request (median of {len(differences)} rounds): "
          f"metrics off {statistics.median(app['off']):.1f} us, on {statistics.median(app['on']):.1f} us, "
          f"on - off {statistics.median(differences):+.2f} us ({min(differences):+.2f} to {max(differences):+.2f})",
          flush=True)  # fmt: skip
    if args.in_process_only:
        return
    tool = perf_analyzer()
    with tempfile.TemporaryDirectory(prefix="oip-bench-metrics-") as scratch:
        workdir = Path(scratch)
        repository, _ = build_repositories(workdir)
        workers = [int(count) for count in args.workers.split(",")]
        results = run(tool, repository, workdir, args.protocols.split(","), workers, args.rounds, args.seconds,
                      args.concurrency, args.scrape_every)  # fmt: skip
    print(table(results))


if __name__ == "__main__":
    main()
