"""``MetricsEndpoint``: what ``oip serve`` hands its workers of the Prometheus endpoint (handler/cli/serve.py binds
it; handler/cli/worker.py and workers.py pass it on)."""

from __future__ import annotations

import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricsEndpoint:
    """The Prometheus endpoint's listening socket, and the directory of the statistics counters it reads."""

    sock: socket.socket
    stats_dir: str
