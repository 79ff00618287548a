"""``oip serve`` with REST and gRPC ports, as a user starts it: a child process, until both answer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

from tests.conftest import free_port


@dataclass(frozen=True)
class Served:
    rest: str  # http://127.0.0.1:port
    grpc: str  # 127.0.0.1:port


@contextmanager
def serve(repository: Path) -> Iterator[Served]:
    """``oip serve`` with REST and gRPC ports, in a child process until both answer."""
    http_port, grpc_port = free_port(), free_port()
    command = [sys.executable, "-m", "handler.cli", "serve", "--port", str(http_port), "--grpc-port", str(grpc_port),
               "--no-access-log", "--model-repository", str(repository)]  # fmt: skip
    with subprocess.Popen(command, env=os.environ.copy(), stderr=subprocess.DEVNULL) as process:
        found = Served(f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}")
        try:
            grpc_client = triton_grpc.InferenceServerClient(found.grpc)
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{found.rest}/v2/health/live").status_code == 200 and grpc_client.is_server_live():
                        break
                except (httpx.TransportError, InferenceServerException):
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("oip serve --grpc-port did not start")
                time.sleep(0.1)
            yield found
        finally:
            process.terminate()
