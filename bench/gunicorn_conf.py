"""gunicorn's side of bench/bench_workers.py: uvicorn-worker's worker class with ``oip serve``'s HTTP protocol, and,
as this config file (``--config``), an arbiter that imports what ``oip serve``'s supervisor imports before forking.

Runs in the ``servers`` tool venv (gunicorn and uvicorn-worker are not dependencies of the project).
"""

# tool venv: servers

from __future__ import annotations

from typing import Any

from uvicorn_worker import UvicornWorker

from handler.cli.connections import GuardedHttpToolsProtocol


class Worker(UvicornWorker):
    """uvicorn-worker's worker with the protocol ``oip serve`` gives uvicorn, and no WebSocket protocol."""

    CONFIG_KWARGS = {"loop": "auto", "http": GuardedHttpToolsProtocol, "ws": "none"}  # noqa: RUF012


def on_starting(server: Any) -> None:
    """gunicorn's hook in the arbiter before it forks: ``oip serve``'s imports, without collection, frozen."""
    from handler.cli.serve import import_without_collection

    import_without_collection(2, GuardedHttpToolsProtocol)
