"""A fast model past its worker's capacity with no configuration: ``oip serve --workers 1`` and the demo ``iris``,
open loop at 0.8x and at as much as the client offers toward 3x its capacity, with h2load (nghttp2's load
generator, in C); ``--against CHECKOUT`` runs another checkout's server in the same run, one after the other, and
``--triton`` tritonserver 2.51 with its defaults and with ``max_queue_size`` (``--queue``), running the same .onnx
file in a Python-backend model, one instance (bench/bench_adaptive_overload.py's repository).

    python -m bench.bench_loop_shedding [--seconds 6] [--against /tmp/before] [--triton] [--factors 0.8,3]
                                        [--connections N]

Python clients offer at most about 1,000 requests a second here, half what one worker answers, so the load is
h2load's: one request in flight per connection (HTTP/1.1), ``--rps`` per connection (at most ``CONNECTIONS`` of
them, each sending more beyond; ``--connections`` sets their number, past the worker's OIP_MAX_CONNECTIONS too),
the connections opened evenly
over one request period (as near as h2load's whole milliseconds allow) so that their requests do not come in step
and the onset's first requests come at the load's rate (h2load's ``-r``/``--rate-period``); a request is timed
from when it is sent. For each server: the unloaded p99 (one connection, 2 s), the capacity (8 connections, closed
loop, 4 s), then each factor: the rate h2load reached, every status, the p50/p99 of the 200s and the 503s (after
the first second, which opens the connections), a health and a metadata probe on a kept-alive connection and a
health probe on a new connection every 50 ms throughout (their p99 after the first second, and in it: the sudden
load of every connection's first request; the bench process collects no garbage meanwhile, so that its own pauses
are not timed as the server's),
``nv_inference_request_failure{reason="REJECTED"}`` counted during it, the server's resident memory (every
process) before and after, and the server's CPU during the load: its busiest thread's share of one core (an ``oip
serve`` worker's event loop) and all its threads' together. A worker's loop at 95 % or more is at its capacity for
that load, whatever the closed-loop measurement said: many connections each sending a few requests a second cost
the loop more per request than 8 connections back to back. Under each row, the load's slowest request and the
kernel's dropped and retried handshakes during it (``/proc/net/netstat``): a connection that waits seconds shows
there. The load average is printed before and after; the client shares the two cores.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.bench_adaptive_overload import triton, triton_repository
from bench.bench_overload import _pct, cpu_share, rss_mb, thread_cpu_s
from bench.bench_throughput import free_ports
from tests.support.metrics_scrape import scrape

ROOT = Path(__file__).resolve().parents[1]
BODY = b'{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[5.1,3.5,1.4,0.2]}]}'
#: Requests each connection sends a second: the connections are the rate over this.
PER_CONNECTION = 10
#: The most connections the load opens: below the worker's default OIP_MAX_CONNECTIONS (1,024), past which the
#: others would wait in the backlog, unanswered, until one closes.
CONNECTIONS = 1000
#: The load's onset (s): its connections opening, each with its first request at once. Its statuses and latencies
#: are left out; the probes' are shown apart.
ONSET_S = 1.0
#: The capacity search under the load's own traffic (``--capacity open``): its first rate, as a share of the
#: closed-loop capacity; what each step multiplies the rate by; how long each step lasts (s, its first second not
#: judged, as the load's onset is not).
SEARCH_FROM = 0.4
SEARCH_STEP = 1.1
SEARCH_S = 3.0


@contextlib.contextmanager
def served(checkout: Path) -> Iterator[tuple[str, int | None, int]]:
    """``oip serve --workers 1`` of ``checkout`` on free ports, no admission setting: (base URL, metrics port, pid)."""
    port, grpc, metrics = free_ports(3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OIP_")} | {"PYTHONPATH": str(checkout)}
    command = [sys.executable, "-m", "handler.cli", "serve", "--workers", "1", "--port", str(port)]
    command += ["--grpc-port", str(grpc), "--metrics-port", str(metrics), "--no-access-log", "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=checkout, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/v2/health/ready", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit(f"bench_loop_shedding: {checkout}'s oip serve did not become ready")
            time.sleep(0.2)
        yield base, metrics, process.pid
    finally:
        process.terminate()
        process.wait(60)


def h2load(base: str, connections: int, log: Path, seconds: float, rps: int | None = None) -> float:
    """h2load on the iris model: ``rps`` per connection (open loop, connections staggered over one period) for
    ``seconds``, or closed loop without it; the rate it reached, requests a second. Each request is in ``log``
    (written anew: h2load appends to it)."""
    log.unlink(missing_ok=True)
    command = ["h2load", "--h1", "-c", str(connections), "-H", "content-type: application/json"]
    if rps:
        per_period, period_ms = stagger(connections, rps)
        command += ["--rps", str(rps), "-r", str(per_period), "--rate-period", f"{period_ms}ms"]
        command += ["-n", str(int(connections * rps * seconds))]
    else:
        command += ["-D", str(seconds)]
    with tempfile.NamedTemporaryFile(suffix=".json") as body:
        body.write(BODY)
        body.flush()
        command += ["-d", body.name, f"--log-file={log}", f"{base}/v2/models/iris/infer"]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = next(line for line in output.splitlines() if line.startswith("finished in"))
    return float(line.split(",")[1].split()[0])


def stagger(connections: int, rps: int) -> tuple[int, int]:
    """h2load's ``-r`` and ``--rate-period`` (whole ms) that open ``connections`` evenly over one request period
    (``1000 / rps`` ms), within 5 % of it in the fewest connections at once that whole milliseconds allow: their
    first requests come at the load's own rate, not faster (an onset faster than the rate would be a burst above
    the factor asked for)."""
    period = 1000 / rps
    for period_ms in range(1, math.ceil(period) + 1):
        per_period = max(1, round(connections * period_ms / period))
        if abs(-(-connections // per_period) * period_ms - period) <= max(1.0, 0.05 * period):
            return per_period, period_ms
    return connections, math.ceil(period)


def slowest(log: Path) -> str:
    """The log's slowest request (onset included): its time, status and when it was sent into the load; and how
    many requests the log holds (h2load writes a request there once it is answered)."""
    rows = [line.split() for line in log.read_text().splitlines() if line.strip()]
    start = min(int(row[0]) for row in rows)
    took, status, sent = max((int(row[2]), row[1], int(row[0]) - start) for row in rows)
    return f"slowest request {took / 1000:,.1f} ms ({status}, sent at {sent / 1e6:.2f} s); {len(rows):,} logged"


def tcp_counters() -> dict[str, int]:
    """The kernel's count of connections dropped from a full accept queue (``ListenOverflows``) and of SYNs sent
    again (``TCPSynRetrans``): a client whose connection waits seconds for its handshake shows there."""
    names, values = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines()[:2]]
    counters = dict(zip(names[1:], values[1:], strict=True))
    return {name: int(counters.get(name, 0)) for name in ("ListenOverflows", "TCPSynRetrans")}


def read_log(log: Path, skip_s: float = ONSET_S) -> tuple[dict[str, list[float]], float]:
    """The log's durations (ms) by status, past its first ``skip_s`` seconds, and when its first request was sent
    (the wall clock, seconds)."""
    rows = [line.split() for line in log.read_text().splitlines() if line.strip()]
    start = min(int(row[0]) for row in rows)
    by_status: dict[str, list[float]] = {}
    for started, status, took in rows:
        if int(started) - start >= skip_s * 1e6:
            by_status.setdefault(status, []).append(int(took) / 1000)
    return by_status, start / 1e6


class Probes:
    """GET health and the model's metadata on one kept-alive connection, and health on a new connection each time
    (as a load balancer's health check may open), every 50 ms until stopped: their latencies, ms, each with when it
    was sent (the wall clock, as h2load's log has it)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.seen: dict[str, list[tuple[float, float]]] = {"health": [], "metadata": [], "new": []}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                for name, path in (("health", "/v2/health/ready"), ("metadata", "/v2/models/iris")):
                    sent, started = time.time(), time.perf_counter()
                    client.get(self.base + path)
                    self.seen[name].append((sent, (time.perf_counter() - started) * 1000))
                sent, started = time.time(), time.perf_counter()
                self.fresh_health()
                self.seen["new"].append((sent, (time.perf_counter() - started) * 1000))
                self.stop.wait(0.05)

    def p99(self, start: float, onset: bool) -> str:
        """``health / metadata / new`` p99 (ms) of the probes sent in the load's first ``ONSET_S`` (``onset``), or
        after it."""
        return " / ".join(
            f"{_pct([took for sent, took in self.seen[name] if (sent < start + ONSET_S) == onset], 0.99):.1f}"
            for name in ("health", "metadata", "new")
        )

    def fresh_health(self) -> None:
        """GET health on a new TCP connection (a raw socket: an HTTP client's own setup is not the server's time),
        until its answer's status line."""
        host, port = self.base.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n")
            seen = b""
            while b"\r\n" not in seen:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                seen += chunk

    def __enter__(self) -> Probes:
        # The bench process's own full collections (30-40 ms here, over httpx's and the bench's objects) would be
        # timed as the server's: none run while the probes do.
        gc.collect()
        gc.disable()
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        gc.enable()


@contextlib.contextmanager
def triton_served(work: Path, queue: int) -> Iterator[tuple[str, int | None, int]]:
    """tritonserver 2.51 over the demo iris model (``queue`` > 0: ``max_queue_size``): (base URL, None, pid)."""
    repository = triton_repository(work / f"triton-{queue}", ROOT / "models", queue, ("iris",))
    with triton(repository, work) as (base, pid):
        yield base, None, pid


def rejected(metrics_port: int | None) -> float:
    if metrics_port is None:
        return float("nan")
    with contextlib.suppress(KeyError):
        return scrape(f"http://127.0.0.1:{metrics_port}/metrics").value(
            "nv_inference_request_failure", model="iris", version="1", reason="REJECTED"
        )
    return 0.0


def shape(rate: float, fixed: int | None) -> tuple[int, int]:
    """The load's connections and each one's requests a second for ``rate``: ``fixed`` connections, or
    ``PER_CONNECTION`` a second each (in hundreds, at most ``CONNECTIONS``)."""
    connections = fixed or min(CONNECTIONS, max(100, round(rate / PER_CONNECTION / 100) * 100))
    return connections, max(1, round(rate / connections))


def loaded(base: str, pid: int, connections: int, log: Path, seconds: float, rps: int) -> tuple[float, float, float]:
    """``h2load``'s open loop, and the server's CPU meanwhile: the rate reached, the busiest thread's share of one
    core, all threads' in cores (``cpu_share``)."""
    before, started = thread_cpu_s(pid), time.monotonic()
    reached = h2load(base, connections, log, seconds, rps)
    return (reached, *cpu_share(before, thread_cpu_s(pid), time.monotonic() - started))


def open_capacity(base: str, pid: int, closed: float, bound: float, work: Path, fixed: int | None) -> float:
    """The most requests a second the server answers under the load's own traffic (open loop, the load's
    connections), every one 200 and within ``bound`` ms at p99 past the first second: rates from ``SEARCH_FROM``
    of the closed-loop capacity ``closed`` up by ``SEARCH_STEP``, ``SEARCH_S`` each, until one is not (each step
    printed, with the server's CPU); the last that was, or the first step's rate when even it was not."""
    rate, capacity = SEARCH_FROM * closed, 0.0
    while rate <= 3 * closed:
        connections, rps = shape(rate, fixed)
        reached, busiest, cores = loaded(base, pid, connections, work / "search.log", SEARCH_S, rps)
        statuses, _ = read_log(work / "search.log")
        ok = statuses.get("200", [])
        answered = len(ok) == sum(len(values) for values in statuses.values())
        within = answered and _pct(ok, 0.99) <= bound and reached >= 0.97 * connections * rps
        print(f"  capacity search: {connections * rps:,}/s offered on {connections} connections, {reached:,.0f}/s "
              f"reached, {dict(sorted((status, len(v)) for status, v in statuses.items()))}, 200 p99 "
              f"{_pct(ok, 0.99):.1f} ms, CPU {busiest:.0%} / {cores:.2f}: {'within' if within else 'past'}",
              flush=True)  # fmt: skip
        if not within:
            break
        capacity, rate = connections * rps, rate * SEARCH_STEP
    return capacity or SEARCH_FROM * closed


def measure(
    name: str, server: contextlib.AbstractContextManager[tuple[str, int | None, int]], factors: list[float],
    seconds: float, work: Path, clients: int = 8, fixed: int | None = None, open_loop: bool = False,
) -> list[str]:  # fmt: skip
    """``server``'s rows; ``clients``: the connections that measure its capacity (a server with a queue bound gets
    one more than the bound, so that none of them is refused); ``fixed``: the load's connections, each sending its
    share of the rate, instead of ``PER_CONNECTION`` a second each (at most ``CONNECTIONS``); ``open_loop``: the
    factors are of the capacity under the load's own traffic (``open_capacity``), not of the closed loop's."""
    rows = []
    with server as (base, metrics_port, pid):
        h2load(base, 8, work / "warm.log", 2)
        h2load(base, 1, work / "alone.log", 2)
        unloaded = _pct(read_log(work / "alone.log", 0)[0].get("200", []), 0.99)
        capacity = h2load(base, clients, work / "capacity.log", 4)
        if open_loop:
            closed = capacity
            capacity = open_capacity(base, pid, closed, 2 * unloaded + 100, work, fixed)
            print(f"  capacity: {capacity:,.0f}/s under the load's traffic, {closed:,.0f}/s closed loop", flush=True)
        for factor in factors:
            connections, rps = shape(factor * capacity, fixed)
            before_rss, before_rejected, before_tcp = rss_mb(pid), rejected(metrics_port), tcp_counters()
            with Probes(base) as probes:
                reached, busiest, cores = loaded(base, pid, connections, work / "load.log", seconds, rps)
            tcp = {name: count - before_tcp[name] for name, count in tcp_counters().items()}
            statuses, start = read_log(work / "load.log")
            counts = Counter({status: len(values) for status, values in statuses.items()})
            ok, refused = statuses.get("200", []), statuses.get("503", [])
            bound = 2 * unloaded + 100
            rows.append(
                f"| {name} | {factor}x: {connections * rps:,}/s offered, {reached:,.0f}/s reached "
                f"(capacity {capacity:,.0f}/s) | {dict(sorted(counts.items()))} "
                f"| {_pct(ok, 0.5):.1f} / {_pct(ok, 0.99):.1f} (bound {bound:.0f}) "
                f"| {_pct(refused, 0.5):.1f} / {_pct(refused, 0.99):.1f} "
                f"| {probes.p99(start, onset=False)} | {probes.p99(start, onset=True)} "
                f"| {rejected(metrics_port) - before_rejected:,.0f} | {before_rss:.0f} → {rss_mb(pid):.0f} "
                f"| {busiest:.0%} / {cores:.2f} |"
            )
            print(rows[-1], flush=True)
            print(f"  ({slowest(work / 'load.log')} of {int(connections * rps * seconds):,} sent; "
                  f"{', '.join(f'{name} +{count}' for name, count in tcp.items())})", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--against", type=Path, help="another checkout, measured in the same run")
    parser.add_argument("--triton", action="store_true", help="also tritonserver 2.51, defaults and max_queue_size")
    parser.add_argument("--queue", type=int, default=2, help="Triton's max_queue_size (default 2)")
    parser.add_argument("--factors", default="0.8,3")
    parser.add_argument("--connections", type=int, help="the load's connections (default: 10 requests a second each)")
    parser.add_argument(
        "--capacity", choices=("closed", "open"), default="closed",
        help="what the factors multiply: the closed loop's rate on 8 connections (default), or the most the server "
        "answers in full under the load's own traffic, found by raising an open-loop rate",
    )  # fmt: skip
    args = parser.parse_args()
    if shutil.which("h2load") is None:
        raise SystemExit("bench_loop_shedding: h2load is not installed (Debian: apt-get install nghttp2-client)")
    factors = [float(factor) for factor in args.factors.split(",")]
    print(f"load average before: {os.getloadavg()}")
    header = [
        "| server | load | statuses | 200 p50 / p99 ms | 503 p50 / p99 ms "
        "| health / metadata / health on a new connection p99 ms | the same in the first second | REJECTED "
        "| RSS MiB | server CPU: busiest thread / all threads (cores) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        servers = [("oip serve, this checkout", served(ROOT), 8)]
        if args.against is not None:
            servers.append((f"oip serve, {args.against}", served(args.against.resolve()), 8))
        if args.triton:
            servers.append(("tritonserver 2.51, defaults", triton_served(work, 0), 8))
            queued = triton_served(work, args.queue)
            servers.append((f"tritonserver 2.51, max_queue_size {args.queue}", queued, min(8, args.queue + 1)))
        rows = [
            row
            for name, server, clients in servers
            for row in measure(
                name, server, factors, args.seconds, work, clients, args.connections, args.capacity == "open"
            )
        ]
    print(f"load average after: {os.getloadavg()}")
    print("\n".join([*header, *rows]))


if __name__ == "__main__":
    main()
