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

The queue policy (priority levels, timeouts, ``max_queue_size``) is adapters/onnx/queue_policy.py's.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import math
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import numpy as np

from adapters import deadline as deadlines
from adapters.errors import InternalError
from adapters.onnx.queue_policy import BatchingPolicy, QueueFull
from adapters.types import Execution

logger = logging.getLogger(__name__)

#: Runs the model: (output names, feeds) -> output arrays, raising V2Error on failure; thread-safe.
RunModel = Callable[[Sequence[str], Mapping[str, np.ndarray]], Sequence[Any]]


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


_arrivals = itertools.count()


@dataclass(slots=True)
class _Pending:
    feeds: Mapping[str, np.ndarray]
    wanted: Sequence[str]
    key: Hashable
    size: int
    enqueued_ns: int
    future: asyncio.Future[Outcome]
    #: Where it stands in the queue: (priority level, delayed, arrival).
    order: tuple[int, bool, int] = (0, False, 0)
    #: What happens when its queue timeout passes: "reject", "delay" or nothing ("").
    on_timeout: str = ""
    deadline: deadlines.Deadline | None = None
    timer: asyncio.TimerHandle | None = None
    queued: bool = True


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
    running: bool = False  # a batch is running: every request in ``items`` waits for the next one
    batch: list[_Pending] = field(default_factory=list)  # the batch last taken out of ``items``

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
        #: The kinds of unexpected errors the dispatch loop has logged (each once).
        self._logged: set[str] = set()

    async def submit(
        self,
        feeds: Mapping[str, np.ndarray],
        wanted: Sequence[str],
        key: Hashable,
        priority: int = 0,
        timeout_us: int = 0,
        request_id: str | None = None,
    ) -> Outcome:
        """Queue one validated request (``key`` from ``batch_key``; ``priority`` and ``timeout_us``: its Triton
        parameters, 0 when not given) and wait for its share of a run. QueueFull when its level's queue is full;
        the deadline's error, or Triton's timeout, when either passes first."""
        loop = asyncio.get_running_loop()
        queue = self._queue
        if queue is None or queue.loop is not loop:
            queue = self._queue = _Queue(loop)
        deadline = deadlines.current()
        if deadline is not None:
            deadline.check()
        policy = self.policy
        level = policy.level(priority)
        rules = policy.queue(level)
        if rules.max_queue_size and _waiting(queue, level, policy.max_queue_delay_ns) >= rules.max_queue_size:
            raise QueueFull(f"[request id: {request_id or '<id_unknown>'}] Exceeds maximum queue size")
        size = next(iter(feeds.values())).shape[0]
        now = time.perf_counter_ns()
        pending = _Pending(feeds, wanted, key, size, now, loop.create_future(), (level, False, next(_arrivals)))
        timeout_ns = rules.timeout(timeout_us)
        if timeout_ns:
            pending.on_timeout = "delay" if rules.delay else "reject"
        pending.deadline = deadline
        if queue.items and queue.items[-1].order > pending.order:
            bisect.insort(queue.items, pending, key=_order)
        else:
            queue.items.append(pending)
        if timeout_ns or deadline is not None:
            _arm(queue, pending, now + timeout_ns if timeout_ns else 0)
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
        it, and the model idled between runs (bench/bench_dynamic_batching.py).

        An unexpected exception in the loop (a bug) fails the requests it held (waiting, or in the batch it was
        sending) with an internal error, is logged once per kind, and ends this loop; the next request starts a new
        one, so the model keeps batching.
        """
        try:
            await self._loop(queue)
        except Exception as exc:  # a bug: fail what it held; the next submit starts the loop again
            kind = type(exc).__name__
            if kind not in self._logged:
                self._logged.add(kind)
                logger.exception("the dynamic batcher's loop failed; the requests it held get an internal error")
            for item in (*queue.batch, *queue.items):
                if item.timer is not None:
                    item.timer.cancel()
                if not item.future.done():
                    item.future.set_exception(InternalError("the dynamic batcher failed; retry the request"))
            queue.items.clear()
            queue.batch = []

    async def _loop(self, queue: _Queue) -> None:
        finished: tuple[list[_Pending], list[Outcome | Exception]] | None = None
        try:
            while True:
                queue.items[:] = [item for item in queue.items if not item.future.done()]  # drop cancelled requests
                batch, wait_s = self._form(queue.items, time.perf_counter_ns()) if queue.items else ([], 0.0)
                if not batch:
                    queue.running = False
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
                for item in batch:
                    item.queued = False
                queue.batch = batch
                queue.running = True
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
                queue.running = False
        finally:
            queue.running = False
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
        if item.timer is not None:
            item.timer.cancel()
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


def _order(item: _Pending) -> tuple[int, bool, int]:
    return item.order


def _waiting(queue: _Queue, level: int, delay_ns: int) -> int:
    """The requests of ``level`` in the scheduler, not yet in a run (Triton's queue size): every one, a batch that is
    forming (``max_queue_delay_microseconds``) included; with no delay and the model idle, the one at the head goes
    at once and is not counted."""
    waiting = sum(1 for item in queue.items if item.order[0] == level and not item.future.done())
    return waiting if queue.running or delay_ns or not waiting else waiting - 1


def _arm(queue: _Queue, item: _Pending, timeout_at_ns: int) -> None:
    """Time ``item``'s queue timeout (``timeout_at_ns``, perf_counter ns; 0: none) and its deadline, whichever
    comes first; ``_expire`` acts when it rings."""
    moments = [timeout_at_ns / 1e9 - time.perf_counter()] if timeout_at_ns and item.queued else []
    if item.deadline is not None:
        moments.append(item.deadline.remaining())
    if moments:
        item.timer = queue.loop.call_later(max(min(moments), 0.0), _expire, queue, item, timeout_at_ns)


def _expire(queue: _Queue, item: _Pending, timeout_at_ns: int) -> None:
    """A request's timer rang: past its deadline it is answered with the deadline's error (taken out of the queue
    if it waits, its share of a running batch dropped); past its queue timeout while it waits, ``REJECT`` answers
    Triton's timeout and ``DELAY`` moves it behind its level's requests that have not timed out."""
    item.timer = None
    if item.future.done():
        return
    if item.deadline is not None and item.deadline.remaining() <= 0:
        if item.queued:
            _remove(queue, item)
        item.future.set_exception(item.deadline.error())
        return
    if item.queued and item.on_timeout and time.perf_counter_ns() >= timeout_at_ns:
        _remove(queue, item)
        if item.on_timeout == "reject":
            item.future.set_exception(deadlines.RequestTimeout(deadlines.TIMEOUT_EXPIRED))
            return
        item.on_timeout = ""
        item.order = (item.order[0], True, item.order[2])
        bisect.insort(queue.items, item, key=_order)
        queue.wake()
        timeout_at_ns = 0
    _arm(queue, item, timeout_at_ns)


def _remove(queue: _Queue, item: _Pending) -> None:
    try:
        queue.items.remove(item)
    except ValueError:
        return
    if queue.timed is item:  # the batch window it opened closes with it
        queue.disarm()
        queue.wake()
