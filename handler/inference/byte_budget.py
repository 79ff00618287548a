"""The per-process budget of request bytes in flight: bytes a request is about to bring into memory are counted
before they are read, and a request that would take the count over the budget is refused at once.

REST counts a body by its Content-Length before reading it (a body of unknown length by the body limit, then by its
size once read; a decompressed body by its size); the ``s3_tensors`` extension counts the bytes its HEADs found
before any GET. A request refused here gets 503 (gRPC ``UNAVAILABLE``) with ``Retry-After``: other requests are
holding the memory now, and will give it back. A request that finds nothing in flight is always admitted, so a
budget smaller than the largest request (``OIP_MAX_REQUEST_BYTES``) slows the server down but never refuses a
request for good.

The budget is ``OIP_MAX_INFLIGHT_BYTES``, else ``default_inflight_bytes``: a quarter of the memory this process may
use (its cgroup's ``memory.max``, else the machine's ``MemTotal``), shared evenly by the workers of ``oip serve``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType
from typing import Final

from adapters.errors import ErrorCode, V2Error

#: Seconds a refused client is told to wait before it retries (``Retry-After``).
RETRY_AFTER_S: Final = 1.0
#: The share of the memory a process may use that its request bytes in flight may take by default.
MEMORY_FRACTION: Final = 4


class BytesInFlight(V2Error):
    """Requests in flight hold as many bytes as the budget allows: 503 / UNAVAILABLE, with Retry-After."""

    code = ErrorCode.UNAVAILABLE
    retryable = True
    failure_reason = "REJECTED"


def memory_limit() -> int | None:
    """The memory this process may use: its cgroup's limit (v2 ``memory.max``, else v1 ``limit_in_bytes``), else
    the machine's ``MemTotal``; None where neither can be read."""
    total = _mem_total()
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):  # v1 writes a huge number for "no limit"
            return int(text)
        break
    return total


def _mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_inflight_bytes(memory: int | None, workers: int) -> int:
    """The budget when ``OIP_MAX_INFLIGHT_BYTES`` is unset: ``memory // MEMORY_FRACTION`` shared by ``workers``
    (1 GiB when the memory is not known)."""
    if memory is None:
        return 1 << 30
    return max(memory // MEMORY_FRACTION // max(workers, 1), 1)


class ByteBudget:
    """Counts the request bytes in flight in this process and refuses what would take them over ``limit`` (the
    inference service's, one per process, which every transport shares)."""

    __slots__ = ("inflight", "limit", "lock", "refused")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0
        #: Requests refused since the process started.
        self.refused = 0
        #: Held while the count changes: S3 reads finish in worker threads; gRPC may run on a loop of its own.
        self.lock = threading.Lock()

    def hold(self) -> Held:
        """An empty hold on the budget, which ``Held.take`` fills and leaving its ``with`` block gives back."""
        return Held(self)

    def refuse(self, size: int, what: str) -> None:
        """Count a refusal and raise its BytesInFlight (called with ``lock`` held)."""
        self.refused += 1
        raise BytesInFlight(
            f"{what} would bring {size} bytes into memory while requests in flight hold {self.inflight} of "
            f"the {self.limit} bytes this server allows (OIP_MAX_INFLIGHT_BYTES); retry shortly",
            retry_after=RETRY_AFTER_S,
        )


class Held:
    """The bytes one request holds of a ``ByteBudget``, given back when its ``with`` block ends. Its methods count
    under the budget's lock themselves: they run on every request."""

    __slots__ = ("budget", "size")

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget
        self.size = 0

    def take(self, size: int, what: str) -> None:
        """Hold ``size`` more bytes, or refuse them (BytesInFlight) when other requests hold too many already."""
        if size > 0:
            budget = self.budget
            with budget.lock:
                if budget.inflight and budget.inflight + size > budget.limit:
                    budget.refuse(size, what)
                budget.inflight += size
            self.size += size

    def count(self, size: int) -> None:
        """Hold ``size`` more bytes without refusing them (bytes already in memory, such as a decompressed body)."""
        if size > 0:
            budget = self.budget
            with budget.lock:
                budget.inflight += size
            self.size += size

    def settle(self, size: int) -> None:
        """Hold exactly ``size`` bytes from now on (no fewer than zero): a body read whose length was not known."""
        held = self.size
        if size == held:
            return
        size = max(size, 0)
        budget = self.budget
        with budget.lock:
            budget.inflight += size - held
        self.size = size

    def release(self) -> None:
        """Give every byte held back."""
        if self.size:
            budget = self.budget
            with budget.lock:
                budget.inflight -= self.size
            self.size = 0

    def __enter__(self) -> Held:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()
