"""Triton's dynamic batcher for in-process models: concurrent requests merged into one run and split back.

As Triton documents it (docs/user_guide/batcher.md, model_config.proto ``ModelDynamicBatching``) and its
scheduler does it (``DynamicBatchScheduler::GetDynamicBatch``): requests join the batch in arrival order; a batch
goes as soon as it reaches the largest preferred size it can form, or when the next request would take it over
the largest preferred size (``max_batch_size`` without preferred sizes), or has other shapes than the batch;
else once the oldest request has waited ``max_queue_delay_microseconds``. With no delay, whatever is queued when
the model is free goes at once. The model runs one batch at a time (one instance), so requests arriving
meanwhile queue for the next one. Requests merge only when their inputs concatenate (same names, datatypes and
non-batch dimensions) and they ask for the same outputs. If a merged run fails, each of its requests runs alone,
so errors stay with the request that caused them. ``preserve_ordering`` needs nothing: every request has its own
response.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import numpy as np

from adapters.errors import InternalError
from adapters.types import Execution

#: Runs the model: (output names, feeds) -> output arrays, raising V2Error on failure; thread-safe.
RunModel = Callable[[Sequence[str], Mapping[str, np.ndarray]], Sequence[Any]]


@dataclass(frozen=True, slots=True)
class BatchingPolicy:
    """A model's ``dynamic_batching`` settings (delay in ns; preferred sizes within ``max_batch_size``)."""

    max_batch_size: int
    max_queue_delay_ns: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()

    @property
    def largest(self) -> int:
        """The largest batch formed from several requests: Triton's largest preferred size, else the maximum."""
        return self.preferred_batch_sizes[-1] if self.preferred_batch_sizes else self.max_batch_size

    @classmethod
    def from_config(cls, config: Any) -> BatchingPolicy | None:
        """The policy of a parsed config.pbtxt, or None when it does not ask for dynamic batching."""
        if config is None or int(config.max_batch_size) <= 0 or not config.HasField("dynamic_batching"):
            return None
        dynamic, largest = config.dynamic_batching, int(config.max_batch_size)
        preferred = sorted({int(size) for size in dynamic.preferred_batch_size if 0 < int(size) <= largest})
        return cls(largest, int(dynamic.max_queue_delay_microseconds) * 1000, tuple(preferred))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one request gets back from a run: its own slice of each output, and the execution it was part of."""

    arrays: tuple[Any, ...]
    execution: Execution


def batch_key(feeds: Mapping[str, np.ndarray], wanted: Sequence[str]) -> Hashable | None:
    """What requests must share to merge (output names, each input's name, dtype and non-batch dims), or None
    when the request cannot be merged at all (inputs with different or empty batch dimensions)."""
    sizes = {array.shape[0] if array.ndim else 0 for array in feeds.values()}
    if len(sizes) != 1 or 0 in sizes:
        return None
    return tuple(wanted), tuple(sorted((name, array.dtype.str, array.shape[1:]) for name, array in feeds.items()))


@dataclass(slots=True)
class _Pending:
    feeds: Mapping[str, np.ndarray]
    wanted: Sequence[str]
    key: Hashable
    size: int
    enqueued_ns: int
    future: asyncio.Future[Outcome]


@dataclass(slots=True)
class _Queue:
    """The requests waiting on one event loop, the task that dispatches them, and what it waits on (a future that
    an arrival or the delay's timer resolves: no task or Event per arrival, unlike ``asyncio.wait_for``)."""

    loop: asyncio.AbstractEventLoop
    items: list[_Pending] = field(default_factory=list)
    waiter: asyncio.Future[None] | None = None
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    timed: _Pending | None = None  # the request whose delay the timer counts

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def ring(self) -> None:
        self.timer = None
        self.wake()

    def arm(self, head: _Pending, wait_s: float) -> None:
        """Time ``head``'s delay unless a timer already does; whole milliseconds, rounded up, at least one."""
        if self.timer is not None and self.timed is head:
            return
        self.disarm()
        self.timed = head
        self.timer = self.loop.call_later(max(math.ceil(wait_s * 1000), 1) / 1000, self.ring)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.timed = None


class Batcher:
    """Merges concurrent requests for one model into runs of ``run``, following ``policy``.

    ``inline()`` says whether a run is quick enough to make on the event loop's thread; otherwise it runs in a
    worker thread and the loop keeps accepting requests meanwhile.
    """

    def __init__(self, policy: BatchingPolicy, run: RunModel, inline: Callable[[], bool]) -> None:
        self.policy = policy
        self._run = run
        self._inline = inline
        self._queue: _Queue | None = None

    async def submit(self, feeds: Mapping[str, np.ndarray], wanted: Sequence[str], key: Hashable) -> Outcome:
        """Queue one validated request (``key`` from ``batch_key``) and wait for its share of a run."""
        loop = asyncio.get_running_loop()
        queue = self._queue
        if queue is None or queue.loop is not loop:
            queue = self._queue = _Queue(loop)
        size = next(iter(feeds.values())).shape[0]
        pending = _Pending(feeds, wanted, key, size, time.perf_counter_ns(), loop.create_future())
        queue.items.append(pending)
        queue.wake()
        if queue.task is None or queue.task.done():
            queue.task = loop.create_task(self._dispatch(queue))
        return await pending.future

    def _form(self, items: list[_Pending], now_ns: int) -> tuple[list[_Pending], float]:
        """The batch to send now (Triton's rules), or none and how long to wait (s) for more requests."""
        head, policy = items[0], self.policy
        batch: list[_Pending] = []
        total, closed, best = 0, False, 0
        for item in items:
            if batch and (item.key != head.key or total + item.size > policy.largest):
                closed = True
                break
            batch.append(item)
            total += item.size
            if total in policy.preferred_batch_sizes:
                best = len(batch)
        if best:
            return batch[:best], 0.0
        waited = now_ns - head.enqueued_ns
        if closed or total >= policy.largest or waited >= policy.max_queue_delay_ns:
            return batch, 0.0
        return [], (policy.max_queue_delay_ns - waited) / 1e9

    async def _dispatch(self, queue: _Queue) -> None:
        """Send batches as ``_form`` finds them; in between, sleep until an arrival or the head's delay is up.

        One timer per batch window, armed when its first request has to wait and re-armed only if it rang early,
        in whole milliseconds rounded up (uvloop's, libuv's resolution). Re-arming it for the rest of the delay
        after every arrival, as ``asyncio.wait_for`` did, rounded a sub-millisecond rest down to 0 and spun the
        event loop until the delay was over, and cost a task per arrival. A batch may so go up to a millisecond
        after its delay, never before.

        A run's requests are answered once the next batch, if one is ready, has started in its worker thread:
        answering them first kept the event loop on the GIL for their responses while the worker thread waited for
        it, and the model idled 2-4 ms between runs (bench/bench_dynamic_batching.py).
        """
        finished: tuple[list[_Pending], list[Outcome | Exception]] | None = None
        try:
            while True:
                queue.items[:] = [item for item in queue.items if not item.future.done()]  # drop cancelled requests
                batch, wait_s = self._form(queue.items, time.perf_counter_ns()) if queue.items else ([], 0.0)
                if not batch:
                    _answer(finished)
                    finished = None
                    if not queue.items:
                        return
                    queue.arm(queue.items[0], wait_s)
                    queue.waiter = queue.loop.create_future()
                    try:
                        await queue.waiter
                    finally:
                        queue.waiter = None
                    continue
                queue.disarm()
                del queue.items[: len(batch)]
                if self._inline():
                    _answer(finished)
                    finished = (batch, self._execute(batch))
                    continue
                started = queue.loop.create_future()
                running = queue.loop.create_task(anyio.to_thread.run_sync(self._execute, batch, _signal(started)))
                try:
                    await asyncio.wait((started, running), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    _answer(finished)
                    finished = None
                finished = (batch, await running)
        finally:
            _answer(finished)
            queue.disarm()

    def _execute(self, batch: list[_Pending], started: Callable[[], None] = lambda: None) -> list[Outcome | Exception]:
        started()
        if len(batch) > 1:
            try:
                return list(self._merged(batch))
            except Exception:  # each runs alone below, so the error lands on the request that causes it
                pass
        return [self._alone(item) for item in batch]

    def _alone(self, item: _Pending) -> Outcome | Exception:
        try:
            started = time.perf_counter_ns()
            arrays = tuple(self._run(item.wanted, item.feeds))
            return Outcome(arrays, Execution(item.size, 0, time.perf_counter_ns() - started, 0))
        except Exception as exc:
            return exc

    def _merged(self, batch: list[_Pending]) -> list[Outcome]:
        started = time.perf_counter_ns()
        feeds = {name: np.concatenate([item.feeds[name] for item in batch]) for name in batch[0].feeds}
        run_started = time.perf_counter_ns()
        arrays = [np.asarray(array) for array in self._run(batch[0].wanted, feeds)]
        run_ended = time.perf_counter_ns()
        sizes = [item.size for item in batch]
        total = sum(sizes)
        if any(array.ndim == 0 or array.shape[0] != total for array in arrays):
            raise InternalError("an output's first dimension is not the batch: the model cannot be batched")
        bounds = np.cumsum(sizes[:-1])
        parts = [np.split(array, bounds) for array in arrays]
        split_ns = time.perf_counter_ns() - run_ended
        return [
            Outcome(
                tuple(part[index] for part in parts),
                Execution(total, run_started - started, run_ended - run_started, split_ns, item.size, index == 0),
            )
            for index, item in enumerate(batch)
        ]


def _answer(finished: tuple[list[_Pending], list[Outcome | Exception]] | None) -> None:
    """Resolve each request of a finished run (if any) with its outcome; cancelled ones are skipped."""
    for item, outcome in zip(*(finished or ((), ())), strict=True):
        if item.future.done():
            continue
        if isinstance(outcome, Outcome):
            item.future.set_result(outcome)
        else:
            item.future.set_exception(outcome)


def _signal(started: asyncio.Future[None]) -> Callable[[], None]:
    """What a worker thread calls as it starts a run: resolves ``started`` on its event loop."""
    loop = started.get_loop()

    def resolve() -> None:
        if not started.done():
            started.set_result(None)

    def signal() -> None:
        loop.call_soon_threadsafe(resolve)

    return signal
