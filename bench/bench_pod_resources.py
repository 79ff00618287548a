"""What one pod of infra/kubernetes/ needs: memory and CPU of ``oip serve`` over the demo repository (iris and
tiny_image), started as the KServe runtime starts it (HTTP, gRPC and metrics on), idle and under a short load.

    python -m bench.bench_pod_resources [--workers 1,2] [--requests 3000] [--concurrency 8]

For each worker count: the proportional set size of every process of the server (supervisor, workers, metrics
process: ``/proc/PID/smaps_rollup``, which adds up to what a container's cgroup is charged for them, shared pages
once) once ready, and its peak while ``--requests`` iris inferences are sent over HTTP, ``--concurrency`` at a
time, as V2 JSON by httpx; the CPU seconds all of them spent on those requests (``/proc/PID/stat``, children that
exited included), per 1,000 requests, and the throughput seen by the client.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support.procfs import children
from tests.support.servers import oip_serve

REQUEST = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}]}


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found = [pid]
    for child in children(pid):
        found += tree(child)
    return found


def pss_bytes(pids: list[int]) -> int:
    """The proportional set size of ``pids`` together."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of ``pids``, with that of their children already reaped."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def measure(workers: int, requests: int, concurrency: int) -> dict[str, float]:
    with oip_serve("--log-level", "warning", grpc=True, metrics=True, workers=workers) as server:
        pids = tree(server.pid)
        idle = pss_bytes(pids)
        limits = httpx.Limits(max_connections=concurrency)
        client = httpx.Client(base_url=server.url, limits=limits, timeout=30)
        peak = idle

        def one(_: int) -> None:
            client.post("/v2/models/iris/infer", json=REQUEST).raise_for_status()

        for warm in range(50):
            one(warm)
        cpu_before, start = cpu_seconds(pids), time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            pending = [pool.submit(one, i) for i in range(requests)]
            while not all(f.done() for f in pending):
                peak = max(peak, pss_bytes(pids))
                time.sleep(0.05)
            for future in pending:
                future.result()
        wall = time.monotonic() - start
        cpu = cpu_seconds(pids) - cpu_before
        peak = max(peak, pss_bytes(pids))
        client.close()
    return {
        "workers": workers,
        "idle_mib": idle / 2**20,
        "peak_mib": peak / 2**20,
        "cpu_s_per_1000": cpu / requests * 1000,
        "cores_busy": cpu / wall,
        "requests_per_s": requests / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    print("| workers | PSS ready (MiB) | PSS peak (MiB) | CPU s / 1,000 requests | cores busy | requests/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for workers in (int(w) for w in args.workers.split(",")):
        row = measure(workers, args.requests, args.concurrency)
        print(
            f"| {workers} | {row['idle_mib']:.0f} | {row['peak_mib']:.0f} | {row['cpu_s_per_1000']:.2f} | "
            f"{row['cores_busy']:.2f} | {row['requests_per_s']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
