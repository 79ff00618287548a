"""Whether this process is draining: the one drain of ``oip serve``'s worker, for every transport.

The worker's server (handler/cli/worker.py) calls ``begin_drain`` from its SIGTERM handler; from then on
``draining()`` is true (``/v2/health/ready`` answers false) and every callback given to ``on_drain`` runs on its
event loop (the gRPC server stops accepting there, handler/server.py). A process that never drains (Lambda, an
embedded app) is never draining.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

_state: dict[str, bool] = {"draining": False}
_callbacks: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []


def draining() -> bool:
    """Whether the drain has begun."""
    return _state["draining"]


def on_drain(callback: Callable[[], None]) -> None:
    """Run ``callback`` on the running event loop when the drain begins (at once if it has)."""
    loop = asyncio.get_running_loop()
    if _state["draining"]:
        loop.call_soon(callback)
    else:
        _callbacks.append((loop, callback))


def begin_drain() -> None:
    """Begin the drain; safe to call from a signal handler, and more than once."""
    if _state["draining"]:
        return
    _state["draining"] = True
    for loop, callback in _callbacks:
        if not loop.is_closed():
            loop.call_soon_threadsafe(callback)
    _callbacks.clear()
