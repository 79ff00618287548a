"""What ``oip serve`` logs when it starts serving: its addresses, processes and limits, then one line per model and
version with its state (as Triton logs its model table), and a warning when there is no model to serve.

Written once per server, by the first worker whose models are loaded (``startup.first_to_say``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from adapters.types import ModelIndexEntry
from handler.config.settings import Settings


@dataclass(frozen=True)
class Processes:
    """The worker count, and the pid an operator signals: the supervisor's, or with one worker the worker's."""

    workers: int
    pid: int


def size(count: int) -> str:
    """A byte count as an operator reads it: ``64 MiB``, ``1.5 KiB``, ``100 bytes``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            return f"{round(count / (1 << shift), 1):g} {unit}"
    return f"{count} bytes"


def seconds(value: float) -> str:
    return f"{value:g} s"


def addresses(settings: Settings, processes: Processes) -> str:
    """Where each transport listens, and the processes."""
    http = f"http://{settings.http_address}" if settings.http_address else "HTTP"
    grpc = f"gRPC on {settings.grpc_address}" if settings.grpc_address else "gRPC off (--grpc-port)"
    host = settings.metrics_host or (settings.http_address or "").rpartition(":")[0] or "127.0.0.1"
    metrics = (
        f"metrics on http://{_joined(host, settings.metrics_port)}/metrics"
        if settings.metrics_port
        else "metrics off (--metrics-port)"
    )
    plural = "s" if processes.workers != 1 else ""
    pid = "supervisor pid" if processes.workers > 1 else "pid"
    return f"serving {http}, {grpc}, {metrics}; {processes.workers} worker{plural}, {pid} {processes.pid}"


def _joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def limits(settings: Settings, inflight: int) -> str:
    """The main limits a worker holds requests to, with their options."""
    return (
        f"limits per worker: body {size(settings.max_body_bytes)} (--max-body-bytes), {inflight} inference requests "
        f"in flight (--max-inflight), {settings.max_connections} connections (--max-connections); timeouts: header "
        f"{seconds(settings.header_timeout)}, body {seconds(settings.body_timeout)}, keep-alive "
        f"{seconds(settings.keep_alive_timeout)}, drain {seconds(settings.drain_timeout)}"
    )


def model_lines(
    rows: Sequence[ModelIndexEntry], routed: Sequence[str], triton_url: str | None
) -> list[tuple[int, str]]:
    """One line per model and version with its state, a warning for one that cannot serve."""
    lines: list[tuple[int, str]] = []
    for row in rows:
        model = f"model {row.name} version {row.version}" if row.version else f"model {row.name}"
        if row.state == "UNAVAILABLE":
            lines.append((logging.WARNING, f"{model}: UNAVAILABLE: {row.reason}"))
        elif row.state == "UNLOADED":
            lines.append((logging.INFO, f"{model}: UNLOADED (loads on first use)"))
        else:
            lines.append((logging.INFO, f"{model}: {row.state}"))
    lines += [(logging.INFO, f"model {name}: forwarded to Triton at {triton_url}") for name in routed]
    return lines


def what_runs(
    settings: Settings,
    processes: Processes,
    inflight: int,
    rows: Sequence[ModelIndexEntry],
    routed: Sequence[str] = (),
    repository_options: str = "--model-repository, MODEL_REPOSITORY",
) -> list[tuple[int, str]]:
    """The start-up log's lines, each with its level."""
    lines = [(logging.INFO, addresses(settings, processes)), (logging.INFO, limits(settings, inflight))]
    triton = settings.triton.url if settings.triton is not None else None
    lines += model_lines(rows, routed, triton)
    if not rows and not routed and not (settings.triton is not None and settings.triton.proxy_all):
        lines.append(
            (
                logging.WARNING,
                f"model repository {settings.model_repository} has no model: the server is ready and every model "
                f"request answers 404 ({repository_options})",
            )
        )
    return lines
