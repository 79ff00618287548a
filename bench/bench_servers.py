"""``oip serve``'s app with 2 workers on one port, three ways: uvicorn's supervisor, gunicorn, granian.

    python -m bench.bench_servers [--seconds 3] [--concurrency 1,2,4,8] [--ways uvicorn,gunicorn,granian,...]
                                  [--no-checks]

The ways (every one runs ``handler.server:app_from_env``, the factory ``oip serve`` gives uvicorn, from the
``servers`` tool venv of scripts/tool_env.py: gunicorn, uvicorn-worker and granian beside the app's own dependencies
at the lock's versions, handler/ imported from this work tree; ``OIP_STATS_DIR`` set for each, as ``oip serve`` does):

- uvicorn: ``python -m handler.cli serve --workers 2`` itself (uvicorn's multiprocessing supervisor, one socket);
- gunicorn: ``gunicorn 'handler.server:app_from_env()' -k uvicorn_worker.UvicornWorker -w 2`` (a forking arbiter,
  one socket, uvicorn's own server in each worker);
- granian: ``granian --interface asgi --factory --workers 2`` (forked workers, each with its own SO_REUSEPORT
  socket, Rust HTTP on a multi-threaded Tokio runtime, the app on uvloop: ``--loop auto`` picks it when installed),
  and variants of it: ``asginl`` (no lifespan), ``--http 1`` (no HTTP/2 detection), ``--runtime-mode st`` (a
  single-threaded Rust runtime). Not here: ``--task-impl rust`` (every request of ours fails with 500) and
  ``--backpressure`` below the concurrency (perf_analyzer's keep-alive connections beyond it wait forever).

Throughput: perf_analyzer (bench/perf_analyzer.py) over HTTP, binary tensors of zeros, batch 1, against ``small``
(the model of bench/bench_throughput.py), at each concurrency for about ``--seconds``, one server at a time; the
table gives infer/s, p50 and p99 and infer/s as a ratio to uvicorn's at the same concurrency, and the resident
memory of the supervisor and of each worker after the measurement. With ``--rounds N`` every way is measured once
per round, in turn (so that a change in the machine's load falls on all of them), and the table gives medians over
the rounds, the ratio to uvicorn taken within each round and its range.

Checks (each way started again with ``OIP_GRPC_ADDRESS``, the gRPC port of handler/server.py's lifespan): the
factory app and its lifespan run (gRPC answers); how many worker processes listen on the HTTP and the gRPC port;
a SIGKILLed worker is replaced and the port keeps answering; SIGTERM lets four requests in flight (headers and half
a body sent) finish with 200 and then every process exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.bench_throughput import MODEL, SMALL_CONFIG, UNSTABLE, free_ports, small_model
from bench.perf_analyzer import Measurement, PerfAnalyzer, PerfAnalyzerError, UnstableError, measure, perf_analyzer
from scripts.tool_env import venv as tool_venv
from tests.support import onnx_models, procfs

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 2
DRAIN_SECONDS = 20
APP = "handler.server:app_from_env"


@dataclass(frozen=True)
class Way:
    """One way of serving the app with WORKERS workers: its command, given the venv's bin/ and the ports."""

    command: Callable[[Path, int, int | None], list[str]]
    #: True when the command is ``oip serve`` (which takes the gRPC port as an option, not from the environment)
    oip: bool = False


def _uvicorn(bin_dir: Path, port: int, grpc: int | None) -> list[str]:
    command = [str(bin_dir / "python"), "-m", "handler.cli", "serve", "--port", str(port)]
    command += ["--workers", str(WORKERS), "--no-access-log", "--log-level", "warning"]
    command += ["--drain-timeout", str(DRAIN_SECONDS)]
    return command + (["--grpc-port", str(grpc)] if grpc else [])


def _gunicorn(bin_dir: Path, port: int, grpc: int | None) -> list[str]:
    return [str(bin_dir / "gunicorn"), f"{APP}()", "--worker-class", "uvicorn_worker.UvicornWorker",
            "--workers", str(WORKERS), "--bind", f"127.0.0.1:{port}", "--graceful-timeout", str(DRAIN_SECONDS),
            "--log-level", "warning"]  # fmt: skip


def _granian(*options: str, interface: str = "asgi") -> Callable[[Path, int, int | None], list[str]]:
    def command(bin_dir: Path, port: int, grpc: int | None) -> list[str]:
        return [str(bin_dir / "granian"), "--interface", interface, "--factory", "--workers", str(WORKERS),
                "--host", "127.0.0.1", "--port", str(port), "--no-access-log", "--log-level", "warning",
                "--respawn-failed-workers", "--workers-kill-timeout", str(DRAIN_SECONDS), *options, APP]  # fmt: skip

    return command


WAYS: dict[str, Way] = {
    "uvicorn": Way(_uvicorn, oip=True),
    "gunicorn": Way(_gunicorn),
    "granian": Way(_granian()),
    "granian-asginl": Way(_granian(interface="asginl")),
    "granian-http1": Way(_granian("--http", "1")),
    "granian-st": Way(_granian("--runtime-mode", "st")),
}
#: The ways whose properties are checked (the granian variants differ from granian in speed only, asginl aside:
#: it has no lifespan, so no gRPC).
CHECKED = ("uvicorn", "gunicorn", "granian", "granian-asginl")


# -- processes ---------------------------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                children += [int(child) for child in (task / "children").read_text().split()]
    return children


def descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        for child in _children(queue.pop()):
            found.append(child)
            queue.append(child)
    return found


def _maps_onnxruntime(pid: int) -> bool:
    try:
        return "onnxruntime" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def workers(pid: int) -> list[int]:
    """The processes under ``pid`` that hold the app (its onnxruntime is mapped): the workers."""
    return sorted(child for child in descendants(pid) if _maps_onnxruntime(child))


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def listeners(pids: list[int], port: int) -> tuple[int, int]:
    """(how many of ``pids`` hold a listening socket on ``port``, how many distinct listening sockets there are)."""
    inodes = procfs.listening(port)
    return sum(1 for pid in pids if procfs.socket_inodes(pid) & inodes), len(inodes)


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    port: int
    grpc: int | None
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _ready(url: str) -> bool:
    with contextlib.suppress(httpx.TransportError):
        return httpx.get(f"{url}/v2/health/ready", timeout=1).status_code == 200
    return False


@contextlib.contextmanager
def start(way: str, repository: Path, workdir: Path, grpc: bool = False) -> Iterator[Running]:
    """Run ``way`` on fresh loopback ports until every worker is up and it answers ready; stopped on exit."""
    bin_dir = tool_venv("servers") / "bin"
    port, grpc_port = free_ports(2)
    spec = WAYS[way]
    stats = tempfile.TemporaryDirectory(prefix="oip-stats-")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MODEL_REPOSITORY": str(repository), "OIP_STATS_DIR": stats.name,
           "OIP_DRAIN_TIMEOUT": str(DRAIN_SECONDS), "OIP_LOG_LEVEL": "warning"}  # fmt: skip
    env.pop("OIP_GRPC_ADDRESS", None)
    if grpc and not spec.oip:
        env["OIP_GRPC_ADDRESS"] = f"127.0.0.1:{grpc_port}"
    log = workdir / f"{way}{'-grpc' if grpc else ''}.log"
    command = spec.command(bin_dir, port, grpc_port if grpc else None)
    with log.open("ab") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
    running = Running(process, port, grpc_port if grpc else None, log)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while not (_ready(running.url) and len(workers(process.pid)) >= WORKERS):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{way} did not start: {log.read_text()[-3000:]}")
            time.sleep(0.2)
        seen = set(workers(process.pid))
        yield running
    finally:
        if process.poll() is None:
            seen |= set(workers(process.pid))
            process.terminate()
            try:
                process.wait(timeout=DRAIN_SECONDS + 10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for pid in seen:  # a worker left behind must not outlive its server
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stats.cleanup()


# -- throughput --------------------------------------------------------------------------------------------------


@dataclass
class Served:
    points: dict[int, Measurement | str]
    supervisor_mb: float
    worker_mb: list[float]


def _point(tool: PerfAnalyzer, url: str, level: int, interval_ms: int) -> Measurement | str:
    try:
        try:
            return measure(tool, url, MODEL, "http", level, interval_ms)
        except UnstableError:
            return measure(tool, url, MODEL, "http", level, interval_ms, stability=UNSTABLE)
    except PerfAnalyzerError as error:
        return str(error)


def throughput(
    tool: PerfAnalyzer, way: str, repository: Path, workdir: Path, levels: list[int], seconds: float
) -> Served:
    interval_ms = max(200, int(seconds * 1000 / 3))
    with start(way, repository, workdir) as running:
        points = {}
        for level in levels:
            points[level] = point = _point(tool, f"127.0.0.1:{running.port}", level, interval_ms)
            shown = f"{point.infer_per_second:,.0f} infer/s" if isinstance(point, Measurement) else point
            print(f"{way:>15} c={level}: {shown}", file=sys.stderr, flush=True)
        pid = running.process.pid
        return Served(points, rss_mb(pid), [rss_mb(worker) for worker in workers(pid)])


# -- checks ------------------------------------------------------------------------------------------------------

IRIS_LIKE = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}]}


def _infer(url: str) -> bool:
    try:
        return httpx.post(f"{url}/v2/models/{MODEL}/infer", json=IRIS_LIKE, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _grpc_ready(port: int) -> bool:
    import tritonclient.grpc as grpcclient

    with contextlib.suppress(Exception):
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            return bool(client.is_server_ready(client_timeout=5))
        finally:
            client.close()
    return False


def _slow_request(port: int) -> tuple[socket.socket, bytes]:
    """An infer request with its headers and half its body sent (in flight); returns the rest of the body."""
    body = json.dumps(IRIS_LIKE).encode()
    connection = socket.create_connection(("127.0.0.1", port))
    head = (f"POST /v2/models/{MODEL}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
    connection.sendall(head + body[: len(body) // 2])
    return connection, body[len(body) // 2 :]


def _replaced(running: Running) -> str:
    """SIGKILL one worker: is it replaced, and does the port keep answering?"""
    pid = running.process.pid
    before = workers(pid)
    victim = before[0]
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    answered = sum(_infer(running.url) for _ in range(20))  # meanwhile, the other worker should answer
    while time.monotonic() < killed_at + 30:
        now = workers(pid)
        if len(now) >= WORKERS and victim not in now:
            return f"yes, in {time.monotonic() - killed_at:.1f} s ({answered}/20 answered meanwhile)"
        time.sleep(0.1)
    return f"no: workers {workers(pid)} 30 s after killing {victim} ({answered}/20 answered)"


def _drain(running: Running) -> str:
    """SIGTERM with four requests in flight: do they get 200, and does every process exit 0?"""
    connections = [_slow_request(running.port) for _ in range(4)]
    time.sleep(0.5)
    pids = workers(running.process.pid)
    running.process.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    answers = []
    for connection, rest in connections:
        try:
            connection.sendall(rest)
            connection.settimeout(DRAIN_SECONDS)
            answers.append(connection.recv(65536).decode(errors="replace").split("\r\n", 1)[0] or "closed")
        except OSError as error:
            answers.append(type(error).__name__)
        finally:
            connection.close()
    try:
        code: int | str = running.process.wait(timeout=DRAIN_SECONDS + 10)
    except subprocess.TimeoutExpired:
        code = "still running"
    left = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    ok = sum(answer.startswith("HTTP/1.1 200") for answer in answers)
    said = "; ".join(sorted(set(answers)))
    return f"{ok}/4 in flight answered 200 ({said}), exit {code}" + (f", workers left: {left}" if left else "")


def checks(way: str, repository: Path, workdir: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        with start(way, repository, workdir, grpc=True) as running:
            assert running.grpc is not None
            pids = workers(running.process.pid)
            found["factory app"] = "yes" if _infer(running.url) else "no answer"
            grpc_ok = sum(_grpc_ready(running.grpc) for _ in range(10))
            found["lifespan (gRPC up)"] = f"yes ({grpc_ok}/10 gRPC ready)" if grpc_ok else "no"
            for name, port in (("HTTP port", running.port), ("gRPC port per worker", running.grpc)):
                deadline = time.monotonic() + 30  # a worker may answer HTTP before the other's lifespan is done
                while (found_now := listeners(pids, port))[0] < WORKERS and time.monotonic() < deadline:
                    time.sleep(0.2)
                holders, sockets = found_now
                supervisor = " and the supervisor" if listeners([running.process.pid], port)[0] else ""
                found[name] = f"{sockets} listening socket(s) in {holders} workers{supervisor}"
            found["killed worker replaced"] = _replaced(running)
            found["SIGTERM drain"] = _drain(running)
    except RuntimeError as error:
        found["factory app"] = f"failed: {' '.join(str(error).split())[-300:]}"
    return found


# -- report ------------------------------------------------------------------------------------------------------


def _ratios(rounds: list[dict[str, Served]], way: str, level: int) -> list[float]:
    """infer/s of ``way`` over uvicorn's at ``level``, within each round where both were measured."""
    ratios = []
    for served in rounds:
        point, reference = served[way].points.get(level), served.get("uvicorn")
        base = reference.points.get(level) if reference else None
        if isinstance(point, Measurement) and isinstance(base, Measurement):
            ratios.append(point.infer_per_second / base.infer_per_second)
    return ratios


def throughput_table(rounds: list[dict[str, Served]], levels: list[int]) -> str:
    """Per way and concurrency: the median over rounds of infer/s, p50 and p99, and of the ratio to uvicorn
    measured within each round (with its range when there are several rounds); then memory from the last round."""
    several = len(rounds) > 1
    lines = ["| way | c | infer/s | p50 us | p99 us | / uvicorn |" + (" range |" if several else ""),
             "| --- " * (7 if several else 6) + "|"]  # fmt: skip
    for level in levels:
        for way in rounds[0]:
            points = [served[way].points.get(level) for served in rounds]
            measured = [point for point in points if isinstance(point, Measurement)]
            if not measured:
                lines.append(f"| {way} | {level} | failed: {points[0]} |" + " |" * (4 if several else 3))
                continue
            ratios = _ratios(rounds, way, level)
            ratio = f"{statistics.median(ratios):.2f}x" if ratios else "-"
            spread = f" {min(ratios):.2f}-{max(ratios):.2f}x |" if several and ratios else (" - |" if several else "")
            mark = "~" if any(point.stability == UNSTABLE for point in measured) else ""
            rate = statistics.median(point.infer_per_second for point in measured)
            p50 = statistics.median(point.p50_us for point in measured)
            p99 = statistics.median(point.p99_us for point in measured)
            lines.append(f"| {way} | {level} | {mark}{rate:,.0f} | {p50:,.0f} | {p99:,.0f} | {ratio} |{spread}")
    lines += ["", "| way | supervisor RSS | worker RSS |", "| --- | --- | --- |"]
    for way, result in rounds[-1].items():
        worker_mb = ", ".join(f"{mb:.0f}" for mb in result.worker_mb)
        lines.append(f"| {way} | {result.supervisor_mb:.0f} MB | {worker_mb} MB |")
    if any(isinstance(p, Measurement) and p.stability == UNSTABLE
           for served in rounds for r in served.values() for p in r.points.values()):  # fmt: skip
        lines.append("\n~ some window sets not within 20 % of each other (a busy machine): their average.")
    return "\n".join(lines)


def checks_table(found: dict[str, dict[str, str]]) -> str:
    names = list(dict.fromkeys(name for checked in found.values() for name in checked))
    lines = ["| way | " + " | ".join(names) + " |", "| --- " * (1 + len(names)) + "|"]
    for way, checked in found.items():
        lines.append(f"| {way} | " + " | ".join(checked.get(name, "-") for name in names) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3, help="per point: three windows of a third each")
    parser.add_argument("--concurrency", type=lambda t: [int(n) for n in t.split(",")], default=[1, 2, 4, 8])
    parser.add_argument("--ways", type=lambda t: [w.strip() for w in t.split(",")], default=list(WAYS))
    parser.add_argument("--rounds", type=int, default=1, help="every way once per round; medians over rounds")
    parser.add_argument("--no-checks", dest="checks", action="store_false", help="throughput only")
    parser.add_argument("--no-throughput", dest="throughput", action="store_false", help="checks only")
    args = parser.parse_args()
    unknown = sorted(set(args.ways) - set(WAYS))
    if unknown:
        sys.exit(f"unknown ways {', '.join(unknown)}; choose from {', '.join(WAYS)}")
    with tempfile.TemporaryDirectory(prefix="bench-servers-") as scratch:
        workdir = Path(scratch)
        repository = workdir / "repository"
        onnx_models.save(small_model(), repository, MODEL, config=SMALL_CONFIG)
        print(f"load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
        if args.throughput:
            try:
                tool = perf_analyzer()
            except PerfAnalyzerError as error:
                sys.exit(str(error))
            rounds = []
            for number in range(args.rounds):
                print(f"round {number + 1}, load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
                rounds.append({way: throughput(tool, way, repository, workdir, args.concurrency, args.seconds)
                               for way in args.ways})  # fmt: skip
            print(throughput_table(rounds, args.concurrency))
        if args.checks:
            found = {way: checks(way, repository, workdir) for way in args.ways if way in CHECKED}
            print()
            print(checks_table(found))
        print(f"\nload average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
