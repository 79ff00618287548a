"""How a model's requests queue for its dynamic batcher (adapters/onnx/batcher.py): ``BatchingPolicy`` from
config.pbtxt's ``dynamic_batching`` and each priority level's ``QueuePolicy``. Triton's queue policy
(``ModelQueuePolicy``, docs/user_guide/model_configuration.md "Queue Policy"), as Triton 2.51
answers it: a request over its level's ``max_queue_size`` (every request of the level waiting in the scheduler, a
batch that is forming included, not the batch running) is refused at once, 503 / UNAVAILABLE
``[request id: <id>] Exceeds maximum queue size``. A request waits at most its level's
``default_timeout_microseconds``, or its own ``timeout`` parameter where ``allow_timeout_override`` lets it (only
shorter than a default timeout; with no default, any); then ``REJECT`` answers ``Request timeout expired`` (503) at
that moment, not once the running batch ends, and ``DELAY`` moves it behind the requests of its level that have
not timed out. Requests are taken by priority level (1 first, ``priority`` 0 or above ``priority_levels`` meaning
``default_priority_level``), then delayed or not, then in arrival order. A request whose deadline
(adapters/deadline.py) passes while it waits is answered at that moment and never runs; one whose deadline
passes while its batch runs is answered at that moment too, and its share of the run is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.errors import ErrorCode, V2Error


class QueueFull(V2Error):
    """A request over its queue's ``max_queue_size``: refused at once (503 / UNAVAILABLE), in Triton's words."""

    code = ErrorCode.UNAVAILABLE
    #: Triton's reason in ``nv_inference_request_failure``: refused by the scheduler.
    failure_reason = "REJECTED"


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """One priority level's ``ModelQueuePolicy``: its timeout (ns, 0: none), what a timeout does, its bound."""

    delay: bool = False  # timeout_action DELAY (else REJECT)
    timeout_ns: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0  # 0: unbounded

    @classmethod
    def from_config(cls, policy: Any) -> QueuePolicy:
        """From a parsed ``ModelQueuePolicy`` message."""
        return cls(
            int(policy.timeout_action) == 1,  # ModelQueuePolicy.TimeoutAction: REJECT = 0, DELAY = 1
            int(policy.default_timeout_microseconds) * 1000,
            bool(policy.allow_timeout_override),
            max(int(policy.max_queue_size), 0),
        )

    def timeout(self, requested_us: int) -> int:
        """How long (ns) a request asking for ``requested_us`` (0: nothing) may wait; 0 for no limit."""
        requested = requested_us * 1000
        if requested and self.allow_timeout_override and (not self.timeout_ns or requested < self.timeout_ns):
            return requested
        return self.timeout_ns


@dataclass(frozen=True, slots=True)
class BatchingPolicy:
    """A model's ``dynamic_batching`` settings (delay in ns; preferred sizes within ``max_batch_size``) and its
    queue policy: priority levels (1 the first; 0 levels: one), the default level and each level's policy."""

    max_batch_size: int
    max_queue_delay_ns: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    priority_levels: int = 0
    default_priority: int = 0
    default_queue: QueuePolicy = QueuePolicy()
    queues: tuple[tuple[int, QueuePolicy], ...] = ()  # per-level policies (priority_queue_policy)

    @property
    def largest(self) -> int:
        """The largest batch formed from several requests: Triton's largest preferred size, else the maximum."""
        return self.preferred_batch_sizes[-1] if self.preferred_batch_sizes else self.max_batch_size

    def level(self, requested: int) -> int:
        """The priority level of a request asking for ``requested``: Triton's default for 0 or one above the
        levels there are."""
        if requested == 0 or requested > self.priority_levels:
            return self.default_priority
        return requested

    def queue(self, level: int) -> QueuePolicy:
        """The queue policy of a priority level."""
        for key, policy in self.queues:
            if key == level:
                return policy
        return self.default_queue

    @classmethod
    def from_config(cls, config: Any) -> BatchingPolicy | None:
        """The policy of a parsed config.pbtxt, or None when it does not ask for dynamic batching."""
        if config is None or int(config.max_batch_size) <= 0 or not config.HasField("dynamic_batching"):
            return None
        dynamic, largest = config.dynamic_batching, int(config.max_batch_size)
        preferred = sorted({int(size) for size in dynamic.preferred_batch_size if 0 < int(size) <= largest})
        levels = int(dynamic.priority_levels)
        default = min(max(int(dynamic.default_priority_level), 1), levels) if levels else 0
        by_level = dynamic.priority_queue_policy
        queues = tuple(sorted((int(level), QueuePolicy.from_config(policy)) for level, policy in by_level.items()))
        return cls(
            largest,
            int(dynamic.max_queue_delay_microseconds) * 1000,
            tuple(preferred),
            levels,
            default,
            QueuePolicy.from_config(dynamic.default_queue_policy),
            queues,
        )
