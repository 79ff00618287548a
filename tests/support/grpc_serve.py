"""``oip serve`` with REST and gRPC ports, as a user starts it: one worker in a child process, until both are live."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import live, oip_serve


@dataclass(frozen=True)
class Served:
    rest: str  # http://127.0.0.1:port
    grpc: str  # 127.0.0.1:port


@contextmanager
def serve(repository: Path, *options: str) -> Iterator[Served]:
    """``oip serve --workers 1 [options]`` with REST and gRPC ports over ``repository``, until both answer as live."""
    with oip_serve("--model-repository", str(repository), *options, grpc=True, workers=1, probe=live) as server:
        assert server.grpc is not None
        yield Served(server.url, server.grpc)
