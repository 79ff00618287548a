"""Overload with no configuration: ``oip serve --workers 1`` with no ``--max-inflight`` and no queue policy, a slow
model (no config.pbtxt, about 300 ms a run) and the demo ``iris``, open loop at 0.8x and 3x each model's capacity;
with ``--against triton``, tritonserver 2.51 beside it in the same run, with its defaults (no queue policy) and with
``max_queue_size`` (``--queue``) on both models.

    python -m bench.bench_adaptive_overload [--seconds 5] [--slow-k 30] [--max-rate 1500] [--against triton]

For each server and model: unloaded p99 (one request at a time, 2 s), capacity (closed loop, 3 s, 8 clients, 1 for
the slow model, which runs one request at a time: answers 200 a second), then requests on a fixed schedule (open
loop) at 0.8x and 3x that capacity for ``--seconds``, each timed from when it was due, with a health probe and a
metadata request every 50 ms and,
while the slow model is loaded, ``iris`` requests at 20 a second: their statuses and p99. Counted: every status, the
503s' p50 / p99 and ``Retry-After`` values, the accepted requests' p99 against the unloaded p99 plus the 100 ms
target, and the server's resident memory (every process) before, at the end and after. Triton runs the same .onnx
files in a Python-backend model (tests/integration/triton_models/onnx_model.py: the wheel's tritonserver has no
onnxruntime backend), one instance each, as ``oip serve`` has one worker; its slow model takes one request per run
(``max_batch_size: 1``). The client shares the two cores with the server; the load average is printed before and
after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
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

from bench.bench_overload import _pct, rss_mb
from bench.bench_throughput import _triton_server, free_ports
from tests.support import overload_models

ROOT = Path(__file__).resolve().parents[1]
BODIES = {
    "slow": {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]},
    "iris": {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]},
}
TARGET_MS = 100


@dataclass
class Row:
    server: str
    model: str
    factor: float
    unloaded_p99: float = 0.0
    capacity: float = 0.0
    offered: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)
    retry_after: Counter[str] = field(default_factory=Counter)
    refused_p50: float = float("nan")
    refused_p99: float = float("nan")
    accepted_p99: float = float("nan")
    health_p99: float = float("nan")
    metadata_p99: float = float("nan")
    iris: str = ""
    rss: tuple[float, float, float] = (0.0, 0.0, 0.0)


async def _one(session: aiohttp.ClientSession, url: str, body: dict | None) -> tuple[str, float, str]:
    started = time.perf_counter()
    try:
        request = session.post(url, json=body) if body is not None else session.get(url)
        async with request as response:
            await response.read()
            return str(response.status), time.perf_counter() - started, response.headers.get("retry-after", "")
    except aiohttp.ClientError as exc:
        return f"error {type(exc).__name__}", time.perf_counter() - started, ""


async def _probe(session: aiohttp.ClientSession, url: str, body: dict | None, every: float, until: float) -> list:
    seen = []
    while time.perf_counter() < until:
        seen.append(await _one(session, url, body))
        await asyncio.sleep(every)
    return seen


async def model_rows(
    base: str, model: str, seconds: float, max_rate: float, pid: int, server: str, queue: int = 0
) -> list[Row]:
    """The model's rows at 0.8x and 3x; ``queue``: the server's ``max_queue_size`` (0: none), which bounds the
    clients that measure capacity (one more than it, so that none of them is refused)."""
    url, body = f"{base}/v2/models/{model}/infer", BODIES[model]
    rows = []
    connector = aiohttp.TCPConnector(limit=512)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        for _ in range(5):
            await _one(session, url, body)
        alone, until = [], time.perf_counter() + 2
        while time.perf_counter() < until:
            status, took, _ = await _one(session, url, body)
            if status == "200":
                alone.append(took)
        unloaded = _pct(alone, 0.99) * 1000
        answered, until = 0, time.perf_counter() + 3

        async def client() -> None:
            nonlocal answered
            while time.perf_counter() < until:
                answered += (await _one(session, url, body))[0] == "200"

        started = time.perf_counter()
        clients = 8 if model == "iris" else 1  # the slow model runs one request at a time: one client keeps it busy
        await asyncio.gather(*(client() for _ in range(min(clients, queue + 1) if queue else clients)))
        capacity = answered / (time.perf_counter() - started)
        for factor in (0.8, 3.0):
            row = Row(server, model, factor, unloaded, capacity, min(factor * capacity, max_rate))
            rss_before = rss_mb(pid)
            begin, results, tasks = time.perf_counter(), [], []
            end = begin + seconds
            probes = [
                asyncio.ensure_future(_probe(session, f"{base}/v2/health/ready", None, 0.05, end)),
                asyncio.ensure_future(_probe(session, f"{base}/v2/models/{model}", None, 0.05, end)),
            ]
            if model != "iris":
                probes.append(asyncio.ensure_future(_probe(session, f"{base}/v2/models/iris/infer",
                                                           BODIES["iris"], 0.05, end)))  # fmt: skip

            async def due(at: float, results: list = results) -> None:
                status, _, retry = await _one(session, url, body)
                results.append((status, time.perf_counter() - at, retry))  # from when it was due

            count = 0
            while (at := begin + count / row.offered) < end:
                if (delay := at - time.perf_counter()) > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.ensure_future(due(at)))
                count += 1
            row.rss = (rss_before, rss_mb(pid), 0.0)
            await asyncio.gather(*tasks)
            health, metadata, *others = await asyncio.gather(*probes)
            row.statuses = Counter(status for status, _, _ in results)
            row.retry_after = Counter(retry for status, _, retry in results if status == "503")
            refused = [took for status, took, _ in results if status == "503"]
            accepted = [took for status, took, _ in results if status == "200"]
            row.refused_p50, row.refused_p99 = _pct(refused, 0.5) * 1000, _pct(refused, 0.99) * 1000
            row.accepted_p99 = _pct(accepted, 0.99) * 1000
            row.health_p99 = _pct([took for _, took, _ in health], 0.99) * 1000
            row.metadata_p99 = _pct([took for _, took, _ in metadata], 0.99) * 1000
            if others:
                iris = others[0]
                statuses = Counter(status for status, _, _ in iris)
                row.iris = f"{dict(statuses)}, p99 {_pct([took for _, took, _ in iris], 0.99) * 1000:.1f} ms"
            await asyncio.sleep(1.0)  # the queue drains before the next phase
            row.rss = (row.rss[0], row.rss[1], rss_mb(pid))
            rows.append(row)
    return rows


@contextlib.contextmanager
def oip(repository: Path, workdir: Path) -> Iterator[tuple[str, int]]:
    """``oip serve --workers 1`` with no overload configuration."""
    (port,) = free_ports(1)
    command = [sys.executable, "-m", "handler.cli", "serve", "--model-repository", str(repository)]
    command += ["--port", str(port), "--workers", "1", "--no-access-log", "--log-level", "warning"]
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
    """tritonserver 2.51 over ``repository`` (tests/support/triton_server.py)."""
    http, grpc = free_ports(2)
    server = _triton_server().TritonServer(repository, workdir, http, grpc)
    server.start()
    try:
        assert server.process is not None
        yield f"http://127.0.0.1:{http}", server.process.pid
    finally:
        server.stop()


#: The two models' config.pbtxt for Triton's Python backend (``{queue}``: the dynamic batcher's block, or nothing).
TRITON_CONFIGS = {
    "slow": 'max_batch_size: 1\ninput [ { name: "x", data_type: TYPE_FP32, dims: [ 1 ] } ]\n'
    'output [ { name: "y", data_type: TYPE_FP32, dims: [ 1 ] } ]\n',
    "iris": 'max_batch_size: 256\ninput [ { name: "input", data_type: TYPE_FP32, dims: [ 4 ] } ]\n'
    'output [ { name: "probabilities", data_type: TYPE_FP32, dims: [ 3 ] }, '
    '{ name: "label", data_type: TYPE_INT64, dims: [ 1 ] } ]\n',
}


def triton_repository(root: Path, models: Path, queue: int, names: tuple[str, ...] = tuple(TRITON_CONFIGS)) -> Path:
    """The ONNX files of ``models`` (``names`` among them) as Python-backend models, one instance each; ``queue`` >
    0: a dynamic batcher with ``max_queue_size: queue``, else Triton's default scheduler (no queue bound)."""
    for name in names:
        text = TRITON_CONFIGS[name]
        version = root / name / "1"
        version.mkdir(parents=True)
        shutil.copy(models / name / "1" / "model.onnx", version / "model.onnx")
        shutil.copy(_triton_server().MODEL_PY, version / "model.py")
        head = f'name: "{name}"\nbackend: "python"\ninstance_group [ {{ kind: KIND_CPU, count: 1 }} ]\n'
        policy = f"dynamic_batching {{ default_queue_policy {{ max_queue_size: {queue} }} }}\n" if queue else ""
        (root / name / "config.pbtxt").write_text(head + text + policy)
    return root


def table(rows: list[Row]) -> str:
    lines = [
        "| server | model | load | capacity (/s) | offered (/s) | statuses | Retry-After | 503 p50 / p99 (ms) | "
        "200 p99 (ms) | bound: 2x unloaded p99 + 100 ms | health / metadata p99 (ms) | iris meanwhile | "
        "RSS before / end / after (MiB) |",
        "| --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for row in rows:
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(row.statuses.items()))
        retry = ", ".join(f"{value or 'none'} s: {count}" for value, count in sorted(row.retry_after.items())) or "-"
        refused = f"{row.refused_p50:.1f} / {row.refused_p99:.1f}" if row.statuses["503"] else "-"
        lines.append(
            f"| {row.server} | {row.model} | {row.factor:g}x | {row.capacity:.1f} | {row.offered:.1f} | {statuses} | "
            f"{retry} | {refused} | {row.accepted_p99:.1f} | "
            f"{2 * row.unloaded_p99 + TARGET_MS:.1f} | {row.health_p99:.1f} / {row.metadata_p99:.1f} | "
            f"{row.iris or '-'} | {' / '.join(f'{v:.0f}' for v in row.rss)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--slow-k", type=int, default=30, help="MatMuls of the slow model (about 10 ms each here)")
    parser.add_argument("--max-rate", type=float, default=1500.0)
    parser.add_argument("--against", choices=["triton"], help="also tritonserver 2.51, in the same run")
    parser.add_argument("--queue", type=int, default=2, help="Triton's max_queue_size in its second configuration")
    options = parser.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        repository = workdir / "models"
        (repository / "slow" / "1").mkdir(parents=True)
        onnx.save(overload_models.slow(512, options.slow_k), str(repository / "slow" / "1" / "model.onnx"))
        subprocess.run(["cp", "-r", str(ROOT / "models" / "iris"), str(repository / "iris")], check=True)
        servers = [("oip serve, no configuration", oip, repository, 0)]
        if options.against == "triton":
            defaults = triton_repository(workdir / "t0", repository, 0)
            servers.append(("tritonserver 2.51, defaults", triton, defaults, 0))
            queued = triton_repository(workdir / "tq", repository, options.queue)
            servers.append((f"tritonserver 2.51, max_queue_size {options.queue}", triton, queued, options.queue))
        rows = []
        for server, start, served, queue in servers:
            with start(served, workdir) as (base, pid):
                for model in ("slow", "iris"):
                    measuring = model_rows(base, model, options.seconds, options.max_rate, pid, server, queue)
                    found = asyncio.run(measuring)
                    print(table(found).split("\n", 2)[2], flush=True)
                    rows += found
        print(f"load average after: {os.getloadavg()}")
        print(table(rows))


if __name__ == "__main__":
    main()
