"""Shadow serving on ``oip serve``: a model's candidate version (config.pbtxt's ``shadow_version``,
``adapters/repository/shadow.py``) receives a sampled copy of the requests its default version answered, and the
two answers are compared (``observability/comparison.py``) and counted (``observability/shadow_metrics.py``).

The default's answer never waits for its shadow: ``InferenceService.answer`` hands the call and the default's
result to ``offer``, which only samples and puts them on a bounded queue (``QUEUE_SIZE``; when it is full the copy is
dropped and counted ``overloaded``) and returns. One background task per worker takes the copies one at a time,
after yielding to the event loop so that the answer in hand is sent first, and runs each through the data plane
with ``shadow_timeout_ms`` as its deadline (onnxruntime stops the run then; counted ``timeout``); any error is
counted ``error`` and dropped. The task runs in a context of its own: no request's deadline, span or log keys
reach it.

A disagreeing request is logged at most once per ``DISAGREEMENT_LOG_INTERVAL_S`` per worker: a warning that names
the model, both versions, the request's id and each disagreeing output with its disagreeing elements and largest
differences, and no value of either answer (no payload reaches a log); with a request log (``RequestLogSampler``,
on Lambda), a record whose ``raw_prediction`` holds the same comparison and both answers, each output's first
``LOGGED_VALUES`` values (``shadow_record``).

On AWS Lambda nothing runs once an invocation has returned, so ``InvocationShadow`` keeps the copies on the queue
and ``run_after`` runs them when the invocation's answer is complete, before the handler returns it: the answer is
never changed, and it waits for its copies at most ``shadow_timeout_ms`` each. A copy runs only while the
invocation has ``shadow_timeout_ms`` left before its deadline, else it is counted ``skipped``; its comparison is
written as EMF metrics (``observability/shadow_emf.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio.to_thread
import numpy as np

from adapters import deadline as deadlines
from adapters.deadline import DeadlineExceeded
from adapters.repository.shadow import SHADOW_TIMEOUT_MS, ShadowPlan
from adapters.types import InferCall, InferResult, Tensor
from handler.observability.comparison import Comparison, OutputComparison, compare_outputs
from handler.observability.shadow_metrics import Key, ShadowCounters
from handler.protocol.dataplane import DataPlane
from handler.protocol.resolved_model import ResolvedModel

if TYPE_CHECKING:  # the request log's module is imported only when request logging is on
    from handler.observability.request_log import RequestLogSampler

logger = logging.getLogger(__name__)

#: Copies waiting for the shadow at most, per worker; more are dropped and counted ``overloaded``.
QUEUE_SIZE: Final = 64
#: Seconds between two logged disagreements at least, per worker.
DISAGREEMENT_LOG_INTERVAL_S: Final = 1.0
#: Values of each output a disagreement's request-log record holds.
LOGGED_VALUES: Final = 8
#: Characters of each BYTES value a disagreement's request-log record holds.
LOGGED_CHARACTERS: Final = 64


class Counts(Protocol):
    """Where a shadow counts its outcomes: ``ShadowCounters`` (``oip serve``) or ``ShadowEmf`` (Lambda)."""

    def compared(self, key: Key, comparison: Comparison) -> None: ...

    def failed(self, key: Key, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Copy:
    """One request the default answered, waiting for its shadow."""

    key: Key
    plan: ShadowPlan
    call: InferCall
    result: InferResult


class Shadow:
    """A worker's shadow: sampling, the bounded queue and the background task that runs the copies."""

    #: Whether ``offer`` starts the background task (``oip serve``); ``InvocationShadow`` runs its copies itself.
    background = True

    def __init__(self, dataplane: DataPlane, counters: Counts, request_log: RequestLogSampler | None = None) -> None:
        self.dataplane = dataplane
        self.counters = counters
        #: Where a logged disagreement's answers go; None: nowhere (the warning holds no value).
        self.request_log = request_log
        self.queue: asyncio.Queue[Copy] = asyncio.Queue(QUEUE_SIZE)
        self._task: asyncio.Task[None] | None = None
        self._logged = -DISAGREEMENT_LOG_INTERVAL_S
        #: The candidate versions loaded (the others load on first use, in a thread).
        self.loaded: set[tuple[str, str]] = set()

    def plan(self, model: ResolvedModel, result: InferResult) -> ShadowPlan | None:
        """The model's plan when its default version gave ``result``; None otherwise."""
        if model.remote:
            return None
        entry = self.dataplane.repository.entry(model.name)
        if entry.shadow is None or result.model_version != entry.default_version:
            return None
        return entry.shadow

    def offer(self, model: ResolvedModel, call: InferCall, result: InferResult) -> None:
        """Queue a sampled copy of a request the default answered; never raises, never waits."""
        try:
            plan = self.plan(model, result)
            if plan is None or (plan.rate < 1 and random.random() >= plan.rate):
                return
            key = (model.name, result.model_version, plan.version)
            try:
                self.queue.put_nowait(Copy(key, plan, call, result))
            except asyncio.QueueFull:
                self.counters.failed(key, "overloaded")
                return
            if self.background and (self._task is None or self._task.done()):
                loop = asyncio.get_running_loop()
                self._task = loop.create_task(self._work(), context=contextvars.Context())
        except Exception:  # a shadow never fails the answer
            logger.exception("shadow copy of a request to %s not queued", model.name)

    async def _work(self) -> None:
        """Take copies one at a time while there are any; a copy's failure is counted, and the loop goes on."""
        while not self.queue.empty():
            copy = self.queue.get_nowait()
            await asyncio.sleep(0)  # the answer in hand goes out first
            try:
                await self._run(copy)
            except Exception:
                logger.exception("shadow of %s version %s failed to count", copy.key[0], copy.plan.version)

    async def _run(self, copy: Copy) -> None:
        name = copy.key[0]
        try:
            target = self.dataplane.resolve(name, copy.plan.version)
            if (name, copy.plan.version) not in self.loaded:  # a candidate loads in a thread, never in the loop
                await anyio.to_thread.run_sync(target.backend.load)
                self.loaded.add((name, copy.plan.version))
            # The deadline stops onnxruntime's run itself (its watchdog); the timeout stops the wait for it.
            with deadlines.bound(deadlines.after(copy.plan.timeout_s, SHADOW_TIMEOUT_MS)):
                async with asyncio.timeout(copy.plan.timeout_s):
                    shadowed = await self.dataplane.run(target, copy.call)
        except (TimeoutError, DeadlineExceeded):
            self.counters.failed(copy.key, "timeout")
            return
        except Exception as exc:  # the candidate's own failure: counted and dropped
            logger.debug("shadow of %s version %s failed: %s", name, copy.plan.version, exc)
            self.counters.failed(copy.key, "error")
            return
        comparison = compare_outputs(copy.result.outputs, shadowed.outputs)
        self.counters.compared(copy.key, comparison)
        if not comparison.agrees:
            self._log_disagreement(copy, shadowed, comparison)

    def _log_disagreement(self, copy: Copy, shadowed: InferResult, comparison: Comparison) -> None:
        """At most once per ``DISAGREEMENT_LOG_INTERVAL_S`` per worker: a warning naming the request and its
        disagreeing outputs, no value of either answer; with a request log, both answers truncated there."""
        now = time.monotonic()
        if now - self._logged < DISAGREEMENT_LOG_INTERVAL_S:
            return
        self._logged = now
        model, version, candidate = copy.key
        logger.warning(
            "shadow disagreement: model %s version %s against %s, request id %s: %s",
            model,
            version,
            candidate,
            copy.call.id,
            "; ".join(_difference(output) for output in comparison.outputs if not output.agrees),
        )
        if self.request_log is not None:
            self.request_log.log_shadow(model, version, shadow_record(copy, shadowed, comparison))


class InvocationShadow(Shadow):
    """A Lambda function's shadow: copies wait on the queue until ``run_after`` runs them, at the end of the
    invocation whose requests they copy (module docstring)."""

    background = False

    async def run_after(self, remaining_s: Callable[[], float] | None) -> None:
        """Run the queued copies one at a time, each only while ``remaining_s()`` (the invocation's seconds left
        before its deadline; None: no deadline) is at least its timeout, else counted ``skipped``."""
        while not self.queue.empty():
            copy = self.queue.get_nowait()
            try:
                if remaining_s is not None and remaining_s() < copy.plan.timeout_s:
                    self.counters.failed(copy.key, "skipped")
                    continue
                await self._run(copy)
            except Exception:  # a shadow never fails the answer
                logger.exception("shadow of %s version %s failed to count", copy.key[0], copy.plan.version)


def invocation_shadow(dataplane: DataPlane, request_log: RequestLogSampler | None = None) -> InvocationShadow | None:
    """A Lambda function's shadow, its comparisons written as EMF metrics, its disagreements to ``request_log``
    (the function's request logging, None when it is off), its candidate versions loaded now (in the init phase,
    as the defaults are); None when no model of the repository has a ``shadow_version`` (then requests pay nothing
    for it)."""
    from handler.observability.shadow_emf import ShadowEmf

    repository = dataplane.repository
    plans = {name: entry.shadow for name in repository.names() if (entry := repository.entry(name)).shadow}
    if not plans:
        return None
    shadow = InvocationShadow(dataplane, ShadowEmf(), request_log)
    for name, plan in plans.items():
        try:
            dataplane.resolve(name, plan.version).backend.load()
        except Exception:  # a candidate that cannot load fails its copies (counted ``error``), never the init
            logger.exception("shadow version %s of %s not loaded", plan.version, name)
            continue
        shadow.loaded.add((name, plan.version))
    return shadow


def shadow_of(dataplane: DataPlane, stats_dir: str) -> Shadow:
    """A worker's ``Shadow``, its counters in ``stats_dir``; it costs a lookup per request of a model without a
    ``shadow_version``."""
    return Shadow(dataplane, ShadowCounters(stats_dir))


def shadow_record(copy: Copy, shadowed: InferResult, comparison: Comparison) -> dict[str, Any]:
    """A disagreement as its request-log record's ``raw_prediction`` holds it: the shadow version, the request's id,
    each output's ``comparison``, and both answers (``default``, ``shadow``), each output's first
    ``LOGGED_VALUES`` values."""
    return {
        "shadow_version": copy.key[2],
        "request_id": copy.call.id,
        "comparison": [
            {
                "name": output.name,
                "agrees": output.agrees,
                "elements": output.elements,
                "disagreeing": output.elements - output.agreeing,
                "max_abs": output.max_abs,
                "max_rel": output.max_rel,
                "matched": output.matched,
            }
            for output in comparison.outputs
        ],
        "default": [_truncated(tensor) for tensor in copy.result.outputs],
        "shadow": [_truncated(tensor) for tensor in shadowed.outputs],
    }


def _difference(output: OutputComparison) -> str:
    """A disagreeing output for the warning line: its name and how it differs, never a value of it."""
    if not output.matched:
        return f"{output.name} mismatched (missing, or another shape or datatype)"
    parts = [f"{output.elements - output.agreeing} of {output.elements} elements disagree"]
    if output.max_abs is not None and output.max_rel is not None:
        parts.append(f"max abs difference {output.max_abs:.3g}, max rel difference {output.max_rel:.3g}")
    return f"{output.name} " + ", ".join(parts)


def _truncated(tensor: Tensor) -> dict[str, Any]:
    """An output as a V2 response holds it, ``data`` its first ``LOGGED_VALUES`` values (each BYTES value its first
    ``LOGGED_CHARACTERS`` characters, as text), ``truncated`` whether there are more."""
    values = np.asarray(tensor.data).ravel()[:LOGGED_VALUES]
    if tensor.datatype == "BYTES":
        data: list[Any] = [_text(value)[:LOGGED_CHARACTERS] for value in values.tolist()]
    elif tensor.datatype == "BF16":
        data = values.astype(np.float32).tolist()
    else:
        data = values.tolist()
    return {
        "name": tensor.name,
        "datatype": tensor.datatype,
        "shape": list(tensor.shape),
        "data": data,
        "truncated": int(np.asarray(tensor.data).size) > LOGGED_VALUES,
    }


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
