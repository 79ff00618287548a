"""``RunSlots``: how many runs of one model version go at once in worker threads, the others waiting their turn.

Triton runs a model's requests on its instances, each instance one request (or one dynamic batch) at a time, and the
model's ``instance_group`` says how many instances there are. A model here that runs in worker threads follows the
same rule: at most ``instance_count(config)`` of its runs at once, the others waiting in the order they came. Runs
that share the CPU all finish late together, so a request admitted behind others would wait for every run, those
admitted after it included, and take longer than the runs ahead of it and its own (what the model's gate in
handler/inference/admission.py expects at its admission); one after the other, each is answered as its turn ends. A
request with a deadline (adapters/deadline.py) waits for its turn until the deadline at most, and is answered the
deadline's error then. Runs on the event loop's thread (a fast model, or every run on Lambda) are one at a time
already, and so are a dynamic batcher's (adapters/onnx/batcher.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from adapters.deadline import Deadline


def instance_count(config: Any) -> int:
    """The runs of a model that may go at once (a parsed config.pbtxt, or None): the ``count`` of each of its
    ``instance_group``s that takes requests (not ``passive``), a group without a count counting one; 1 with none."""
    if config is None:
        return 1
    counts = [max(int(group.count), 1) for group in config.instance_group if not group.passive]
    return max(sum(counts), 1)


class RunSlots:
    """``total`` runs at once; ``limiter()`` is the running event loop's ``anyio.CapacityLimiter`` for them, made on
    the loop's first use (a limiter belongs to one loop; a process serves from one)."""

    __slots__ = ("_limiter", "_loop", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limiter: anyio.CapacityLimiter | None = None

    def limiter(self) -> anyio.CapacityLimiter:
        loop = asyncio.get_running_loop()
        limiter = self._limiter
        if limiter is None or self._loop is not loop:
            limiter = self._limiter = anyio.CapacityLimiter(self.total)
            self._loop = loop
        return limiter

    @asynccontextmanager
    async def taken(self, deadline: Deadline | None) -> AsyncIterator[None]:
        """One slot, held for the block, waited for until ``deadline`` at most (None: for as long as it takes): past
        it, the deadline's error."""
        limiter = self.limiter()
        with anyio.move_on_after(deadline.remaining() if deadline is not None else None) as waiting:
            await limiter.acquire()
        if deadline is not None and waiting.cancelled_caught:
            raise deadline.error()
        try:
            yield
        finally:
            limiter.release()
