"""CPU per inference request inside the server, without a network or a client: our ASGI app against the floor.

    python -m bench.bench_request_cpu [--requests 5000] [--profile]

The request is what perf_analyzer sends: the ``small`` model (FP32 [1, 4] -> [1, 3]) with binary tensors in and
out. Each app is called directly with an ASGI scope, a ``receive`` that hands over the body and a ``send`` that
keeps the status, so the figure is the app's own CPU time per request (``time.process_time``): routing, body,
checks, decode, telemetry, statistics, ``session.run``, encode. The floor is bench/floor_server.py's bare ASGI
callable around the same onnxruntime session. ``--profile`` prints cProfile's top functions of ours instead.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_throughput import build_repositories
from bench.floor_server import FloorApp

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def _request() -> tuple[bytes, list[tuple[bytes, bytes]]]:
    header = json.dumps(
        {
            "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}],
            "outputs": [{"name": "output", "parameters": {"binary_data": True}}],
        }
    ).encode()
    body = header + np.arange(4, dtype=np.float32).tobytes()
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/octet-stream"),
        (b"content-length", str(len(body)).encode()),
        (b"inference-header-content-length", str(len(header)).encode()),
    ]
    return body, headers


async def _one(app: App, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v2/models/small/infer", "raw_path": b"/v2/models/small/infer", "query_string": b"",
        "root_path": "", "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000), "state": {},
    }  # fmt: skip
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            await asyncio.sleep(3600)
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    statuses = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await app(scope, receive, send)
    assert statuses == [200], statuses


async def cpu_per_request(app: App, count: int) -> float:
    """Microseconds of this process's CPU per request, after a warm-up."""
    body, headers = _request()
    for _ in range(300):
        await _one(app, body, headers)
    start = time.process_time()
    for _ in range(count):
        await _one(app, body, headers)
    return (time.process_time() - start) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=5000, help="requests per app (default: %(default)s)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of ours")
    parser.add_argument("--sort", default="tottime", help="cProfile's order with --profile (default: %(default)s)")
    args = parser.parse_args()
    from handler.config.settings import Settings
    from handler.server import build_app

    with tempfile.TemporaryDirectory() as scratch:
        ours_repository, _ = build_repositories(Path(scratch))
        ours = build_app(Settings.from_env(model_repository=str(ours_repository)))
        floor = FloorApp(ours_repository / "small")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            asyncio.run(cpu_per_request(ours, args.requests))
            profile.disable()
            pstats.Stats(profile).sort_stats(args.sort).print_stats(30)
            return
        ours_us = floor_us = 0.0
        for _ in range(3):  # alternate, so that a noisy neighbour slows both
            ours_us += asyncio.run(cpu_per_request(ours, args.requests // 3)) / 3
            floor_us += asyncio.run(cpu_per_request(floor, args.requests // 3)) / 3
    print("| app | CPU per request |")
    print("| --- | --- |")
    print(f"| oip (FastAPI app, fast path) | {ours_us:.0f} us |")
    print(f"| floor (bare ASGI callable) | {floor_us:.0f} us |")
    print(f"ratio ours/floor: {ours_us / floor_us:.2f}x")


if __name__ == "__main__":
    main()
