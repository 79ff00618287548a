"""Overload: an open-loop load at about three times capacity against ``oip serve --workers 2`` and tritonserver 2.51
with the same ``max_queue_size``, side by side.

    python -m bench.bench_overload [--seconds 10] [--factor 3] [--queue 8] [--models small,slow] [--max-rate 3000]

Two models, the same config.pbtxt on both servers (Triton: a Python-backend model running the same ONNX file with
onnxruntime, tests/integration/triton_models/onnx_model.py; two instances, as ``oip serve`` has two workers):

- ``small``: FP32 [-1, 4] -> [-1, 3] (bench/bench_throughput.py), ``max_batch_size: 64``, ``dynamic_batching``;
- ``slow``: tests/support/overload_models.py's MatMul chain (a run of some tens of ms whatever the batch),
  ``max_batch_size: 1``, ``dynamic_batching``: one request per run, so capacity is runs per second;

both with ``default_queue_policy { max_queue_size: --queue }``. For each server and model:

1. unloaded: one request at a time for 2 s: its p99;
2. capacity: 16 clients, closed loop, 3 s: answers per second (for ``small``, the client's own limit);
3. overload: requests sent on a fixed schedule (open loop) at ``--factor`` times that capacity for ``--seconds``
   (at most ``--max-rate``: a Python client on these two cores sends about 3000 a second at best, under the
   ``small`` model's capacity on either server) over aiohttp with up to 256 connections, each timed from when it
   was sent; how late the client itself sent them (it shares the two cores) is its own column. Counted: every
   status, connection errors, the 503s' latency, the accepted requests' p99 against the unloaded p99, and the
   servers' resident memory (every process of the server) before, at the end and after;
4. recovery: right after the load stops, ten requests one after another: their statuses and p50.

The client shares the machine's two cores with the server: the rate it really sent is printed beside the one asked.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx
import onnx

from bench.bench_throughput import _triton_server, free_ports, small_model
from tests.support import overload_models

ROOT = Path(__file__).resolve().parents[1]
INPUTS = {
    "small": {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1.0, 2.0, 3.0, 4.0]}]},
    "slow": {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]},
}


def _configs(queue: int) -> dict[str, str]:
    policy = f"dynamic_batching {{ default_queue_policy {{ max_queue_size: {queue} }} }}\n"
    return {
        "small": 'max_batch_size: 64\ninput [ { name: "input", data_type: TYPE_FP32, dims: [ 4 ] } ]\n'
        'output [ { name: "output", data_type: TYPE_FP32, dims: [ 3 ] } ]\n' + policy,
        "slow": 'max_batch_size: 1\ninput [ { name: "x", data_type: TYPE_FP32, dims: [ 1 ] } ]\n'
        'output [ { name: "y", data_type: TYPE_FP32, dims: [ 1 ] } ]\n' + policy,
    }


def build(root: Path, queue: int, slow_k: int) -> tuple[Path, Path]:
    """The two models as an ONNX repository (oip) and a Python-backend one (Triton), with the same configs."""
    models = {"small": small_model(), "slow": overload_models.slow(512, slow_k)}
    model_py = _triton_server().MODEL_PY
    for name, text in _configs(queue).items():
        for kind in ("onnx", "triton"):
            version = root / kind / name / "1"
            version.mkdir(parents=True)
            onnx.save(models[name], str(version / "model.onnx"))
            head = f'name: "{name}"\n'
            if kind == "triton":
                shutil.copy(model_py, version / "model.py")
                head += 'backend: "python"\ninstance_group [ { kind: KIND_CPU, count: 2 } ]\n'
            (root / kind / name / "config.pbtxt").write_text(head + text)
    return root / "onnx", root / "triton"


def _tree(pid: int) -> list[int]:
    pids, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                children = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
                pids += [int(c) for c in children]
                frontier += [int(c) for c in children]
    return pids


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, MiB."""
    total = 0
    for each in _tree(pid):
        with contextlib.suppress(OSError), open(f"/proc/{each}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def thread_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds (user and system) of every thread of ``pid`` and its descendants, by thread id."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds: dict[int, float] = {}
    for each in _tree(pid):
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{each}/task"):
                stat = Path(f"/proc/{each}/task/{task}/stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                seconds[int(task)] = (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def cpu_share(before: dict[int, float], after: dict[int, float], wall_s: float) -> tuple[float, float]:
    """Between two ``thread_cpu_s`` readings ``wall_s`` apart: the busiest thread's share of one core, and every
    thread's together, in cores."""
    used = [after[tid] - before.get(tid, 0.0) for tid in after]
    return (max(used, default=0.0) / wall_s, sum(used) / wall_s) if wall_s > 0 else (0.0, 0.0)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Row:
    server: str
    model: str
    unloaded_p99: float = 0.0
    capacity: float = 0.0
    offered: float = 0.0
    sent: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)
    refused_p50: float = float("nan")
    refused_p99: float = float("nan")
    accepted_p99: float = float("nan")
    client_lag_p99: float = float("nan")
    rss: tuple[float, float, float] = (0.0, 0.0, 0.0)
    recovery: str = ""


async def _one(session: aiohttp.ClientSession, url: str, body: dict) -> tuple[str, float]:
    started = time.perf_counter()
    try:
        async with session.post(url, json=body) as response:
            await response.read()
            return str(response.status), time.perf_counter() - started
    except aiohttp.ClientError as exc:
        return f"error {type(exc).__name__}", time.perf_counter() - started


async def measure(base: str, model: str, seconds: float, factor: float, max_rate: float, pid: int, server: str) -> Row:
    url, body, row = f"{base}/v2/models/{model}/infer", INPUTS[model], Row(server, model)
    connector = aiohttp.TCPConnector(limit=256)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        for _ in range(20):
            await _one(session, url, body)
        alone: list[float] = []
        until = time.perf_counter() + 2
        while time.perf_counter() < until:
            status, took = await _one(session, url, body)
            if status == "200":
                alone.append(took)
        row.unloaded_p99 = _pct(alone, 0.99) * 1000
        answered = 0
        until = time.perf_counter() + 3

        async def client() -> None:
            nonlocal answered
            while time.perf_counter() < until:
                status, _ = await _one(session, url, body)
                answered += status == "200"

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(16)))
        row.capacity = answered / (time.perf_counter() - started)
        row.offered = min(factor * row.capacity, max_rate)
        rss_before = rss_mb(pid)
        results: list[tuple[str, float]] = []
        interval, begin, tasks = 1 / row.offered, time.perf_counter(), []

        lags: list[float] = []

        async def due(at: float) -> None:
            lags.append(time.perf_counter() - at)  # how late the client itself is
            results.append(await _one(session, url, body))

        count = 0
        while True:
            at = begin + count * interval
            if at - begin >= seconds:
                break
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(due(at)))
            count += 1
        row.sent = count / (time.perf_counter() - begin)
        rss_end = rss_mb(pid)
        await asyncio.gather(*tasks)
        row.statuses = Counter(status for status, _ in results)
        refused = [took for status, took in results if status == "503"]
        accepted = [took for status, took in results if status == "200"]
        row.refused_p50, row.refused_p99 = _pct(refused, 0.5) * 1000, _pct(refused, 0.99) * 1000
        row.accepted_p99 = _pct(accepted, 0.99) * 1000
        row.client_lag_p99 = _pct(lags, 0.99) * 1000
        after: list[tuple[str, float]] = [await _one(session, url, body) for _ in range(10)]
        row.recovery = (
            f"{Counter(s for s, _ in after).most_common(1)[0][0]} x{len(after)}, "
            f"p50 {statistics.median(t for _, t in after) * 1000:.1f} ms"
        )
        row.rss = (rss_before, rss_end, rss_mb(pid))
    return row


@contextlib.contextmanager
def oip(repository: Path, workdir: Path) -> Iterator[tuple[str, int]]:
    (port,) = free_ports(1)
    command = [sys.executable, "-m", "handler.cli", "serve", "--model-repository", str(repository)]
    command += ["--port", str(port), "--workers", "2", "--no-access-log", "--log-level", "warning"]
    with (workdir / "oip.log").open("ab") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"oip serve did not start: {(workdir / 'oip.log').read_text()[-3000:]}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


@contextlib.contextmanager
def triton(repository: Path, workdir: Path) -> Iterator[tuple[str, int]]:
    http, grpc = free_ports(2)
    server = _triton_server().TritonServer(repository, workdir, http, grpc)
    server.start()
    try:
        assert server.process is not None
        yield f"http://127.0.0.1:{http}", server.process.pid
    finally:
        server.stop()


def table(rows: list[Row]) -> str:
    lines = [
        "| server | model | capacity (/s) | offered / sent (/s) | client late p99 (ms) | statuses | "
        "503 p50 / p99 (ms) | 200 p99 (ms) | unloaded p99 (ms) | RSS before / end / after (MiB) | after the load |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(row.statuses.items()))
        rss = " / ".join(f"{value:.0f}" for value in row.rss)
        lines.append(
            f"| {row.server} | {row.model} | {row.capacity:.0f} | {row.offered:.0f} / {row.sent:.0f} | "
            f"{row.client_lag_p99:.1f} | {statuses} | "
            f"{row.refused_p50:.1f} / {row.refused_p99:.1f} | {row.accepted_p99:.1f} | {row.unloaded_p99:.1f} | "
            f"{rss} | {row.recovery} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--factor", type=float, default=3.0)
    parser.add_argument("--queue", type=int, default=8, help="max_queue_size of both models on both servers")
    parser.add_argument("--models", default="small,slow")
    parser.add_argument(
        "--max-rate", type=float, default=3000.0, help="the most requests per second to offer (the client's ceiling)"
    )
    parser.add_argument("--slow-k", type=int, default=40, help="MatMuls of 512 x 512 per run of the slow model")
    args = parser.parse_args()
    models = args.models.split(",")
    print(f"load average before: {os.getloadavg()}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="oip-overload-") as scratch:
        workdir = Path(scratch)
        oip_repository, triton_repository = build(workdir / "models", args.queue, args.slow_k)
        servers = (("oip serve (2 workers)", oip, oip_repository), ("tritonserver 2.51", triton, triton_repository))
        for name, start, repository in servers:
            with start(repository, workdir) as (base, pid):
                for model in models:
                    row = asyncio.run(measure(base, model, args.seconds, args.factor, args.max_rate, pid, name))
                    rows.append(row)
                    print(table([row]).splitlines()[-1], flush=True)
    print(f"load average after: {os.getloadavg()}")
    print(table(rows))


if __name__ == "__main__":
    main()
