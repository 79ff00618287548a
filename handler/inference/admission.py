"""Admission: each worker works on at most a bounded number of inference requests and refuses the rest at once.

A request over the bound is answered 503 (gRPC UNAVAILABLE) with ``Retry-After`` before any of its work starts,
whichever transport it came by (one count per process: ``admission``), so a burst does not queue without bound and
a load balancer can send it elsewhere. Health, metadata, statistics and metrics never pass here: they stay answered
while inference is saturated.

The bound is ``OIP_MAX_INFLIGHT``, else ``default_inflight``: 64 requests per core the worker may use plus two of the
largest dynamic batch a model of the repository forms (one batch running, the next one filling), with dynamic
batching on. It is a safety bound, generous enough for a fast model's ordinary concurrency (a few ms of waiting
each), that keeps a burst from piling up memory and waiting without end; a model's own bound is its queue policy's
``max_queue_size`` (adapters/onnx/batcher.py), and a slow model's is best set with ``OIP_MAX_INFLIGHT`` from its run
time and the wait a client accepts.
"""

from __future__ import annotations

from typing import Any, Final

from adapters.errors import ErrorCode, V2Error

#: Seconds a refused client is told to wait before it retries (``Retry-After``).
RETRY_AFTER_S: Final = 1.0


class Overloaded(V2Error):
    """The worker is working on as many inference requests as it admits: 503 / UNAVAILABLE, with Retry-After."""

    code = ErrorCode.UNAVAILABLE
    retryable = True


def largest_dynamic_batch(configs: list[Any]) -> int:
    """The largest ``max_batch_size`` among parsed config.pbtxt files that ask for ``dynamic_batching``; 0 for none."""
    sizes = [
        int(config.max_batch_size)
        for config in configs
        if config is not None and int(config.max_batch_size) > 0 and config.HasField("dynamic_batching")
    ]
    return max(sizes, default=0)


def default_inflight(cores: int, largest_batch: int) -> int:
    """The bound when ``OIP_MAX_INFLIGHT`` is unset: 64 per core, plus two batches of the largest dynamic batch."""
    return 64 * max(cores, 1) + 2 * max(largest_batch, 0)


class Admission:
    """Counts the inference requests in flight in this process and refuses those over ``limit``."""

    __slots__ = ("inflight", "limit", "refused")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0
        #: Requests refused since the process started.
        self.refused = 0

    def enter(self) -> None:
        """Count one request in, or refuse it (Overloaded) when ``limit`` are in flight already."""
        if self.inflight >= self.limit:
            self.refused += 1
            raise Overloaded(
                f"the server is working on as many inference requests as it admits ({self.limit}, "
                f"OIP_MAX_INFLIGHT); retry after {RETRY_AFTER_S:g} s",
                retry_after=RETRY_AFTER_S,
            )
        self.inflight += 1

    def leave(self) -> None:
        """Count one admitted request out."""
        self.inflight -= 1


#: The process's admissions by limit: every transport's inference service in a worker (REST, gRPC) shares one.
_admissions: dict[int, Admission] = {}


def admission(limit: int) -> Admission:
    """This process's admission for ``limit`` requests in flight, shared by every inference service built with it."""
    found = _admissions.get(limit)
    if found is None:
        found = _admissions[limit] = Admission(limit)
    return found
