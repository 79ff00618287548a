"""Triton's queue policy as config.pbtxt states it, the request parameters ``timeout`` and ``priority``, the
deadline's answers, and the admission bound: the rules, without a server."""

# covers: adapters/deadline.py

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from adapters import deadline as deadlines
from adapters.errors import InvalidInput
from adapters.onnx.batcher import Batcher, batch_key
from adapters.onnx.queue_policy import BatchingPolicy, QueueFull, QueuePolicy
from adapters.repository.model_config import parse_model_config
from handler.inference.admission import Admission, Overloaded, default_inflight, largest_dynamic_batch
from handler.protocol.status import GRPC_STATUS, HTTP_STATUS
from handler.protocol.transport_deadlines import lambda_deadline


def _policy(text: str) -> BatchingPolicy:
    policy = BatchingPolicy.from_config(parse_model_config(f"max_batch_size: 8\n{text}"))
    assert policy is not None
    return policy


def test_the_queue_policy_is_read_as_triton_documents_it() -> None:
    policy = _policy(
        """dynamic_batching {
          priority_levels: 3 default_priority_level: 2
          default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 max_queue_size: 7 }
          priority_queue_policy { key: 1 value { allow_timeout_override: true max_queue_size: 2 } }
        }"""
    )
    assert policy.default_queue == QueuePolicy(delay=True, timeout_ns=5_000_000, max_queue_size=7)
    assert policy.queue(1) == QueuePolicy(allow_timeout_override=True, max_queue_size=2)
    assert policy.queue(3) is policy.default_queue
    # priority 0, or one beyond the levels, is the default level (Triton's InferenceRequest::SetPriority)
    assert [policy.level(p) for p in (0, 1, 2, 3, 4)] == [2, 1, 2, 3, 2]
    assert _policy("dynamic_batching { }").level(5) == 0


def test_a_request_may_only_shorten_its_timeout_and_only_where_allowed() -> None:
    allowed = QueuePolicy(timeout_ns=1_000_000, allow_timeout_override=True)
    assert allowed.timeout(500) == 500_000 and allowed.timeout(5000) == 1_000_000 and allowed.timeout(0) == 1_000_000
    assert QueuePolicy(timeout_ns=1_000_000).timeout(500) == 1_000_000
    assert QueuePolicy(allow_timeout_override=True).timeout(500) == 500_000  # no default: any timeout shortens it


@pytest.mark.parametrize("value", [-1, 1.5, "10", True])
def test_timeout_and_priority_must_be_unsigned_integers(value: object) -> None:
    for read, key in ((deadlines.request_timeout_us, "timeout"), (deadlines.request_priority, "priority")):
        with pytest.raises(InvalidInput, match=f"Unable to parse '{key}'"):
            read({key: value})
    assert deadlines.request_timeout_us({}) == 0 and deadlines.request_priority({"priority": 3}) == 3


def test_a_deadline_answers_504_but_the_requests_own_timeout_tritons_503() -> None:
    passed = deadlines.after(-1, "the gRPC deadline")
    with pytest.raises(deadlines.DeadlineExceeded) as caught:
        passed.check()
    assert (HTTP_STATUS[caught.value.code], GRPC_STATUS[caught.value.code]) == (504, "DEADLINE_EXCEEDED")
    own = deadlines.after(-1, deadlines.TIMEOUT).error()
    assert (HTTP_STATUS[own.code], own.message) == (503, "Request timeout expired")
    with pytest.raises(deadlines.DeadlineExceeded), deadlines.bound(passed):
        pass
    later, sooner = deadlines.after(60, "a"), deadlines.after(30, "b")
    with deadlines.bound(later), deadlines.bound(sooner) as inner:
        assert inner is sooner and deadlines.current() is sooner
    assert deadlines.current() is None


class Context:
    def __init__(self, left_ms: int) -> None:
        self.left_ms = left_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.left_ms


def test_the_lambda_deadline_leaves_the_margin_before_the_functions_timeout() -> None:
    deadline = lambda_deadline(Context(10_000), 500)
    assert deadline is not None and 9.0 < deadline.remaining() <= 9.5
    assert lambda_deadline(object(), 500) is None  # a context without the method: no deadline


def test_admission_refuses_over_its_limit_with_retry_after_and_lets_go() -> None:
    admission = Admission(2)
    admission.enter()
    admission.enter()
    with pytest.raises(Overloaded) as caught:
        admission.enter()
    assert caught.value.retry_after == 1.0 and HTTP_STATUS[caught.value.code] == 503 and admission.refused == 1
    admission.leave()
    admission.enter()
    assert admission.inflight == 2


def test_the_default_bound_grows_with_cores_and_the_largest_dynamic_batch() -> None:
    configs = [
        parse_model_config("max_batch_size: 64\ndynamic_batching { }"),
        parse_model_config("max_batch_size: 256"),  # no dynamic batching: requests do not wait to merge
        None,
    ]
    assert largest_dynamic_batch(configs) == 64
    assert default_inflight(2, 64) == 128 + 128 and default_inflight(4, 0) == 256


def _run_until(release: threading.Event, ran: list[int], started: threading.Event):
    """A model run that says it started, then waits for the test's word."""

    def run(wanted, feeds):  # type: ignore[no-untyped-def]
        started.set()
        release.wait()
        ran.append(len(next(iter(feeds.values()))))
        return [next(iter(feeds.values()))]

    return run


def test_the_batcher_refuses_over_max_queue_size_and_drops_requests_whose_deadline_passes() -> None:
    async def scenario() -> None:
        release, ran, started = threading.Event(), [], threading.Event()
        policy = _policy("dynamic_batching { default_queue_policy { max_queue_size: 1 } }")
        policy = BatchingPolicy(1, default_queue=policy.default_queue)
        batcher = Batcher(policy, _run_until(release, ran, started), lambda: False)
        feeds = {"x": np.ones((1, 1), np.float32)}
        key = batch_key(feeds, ["y"])
        first = asyncio.ensure_future(batcher.submit(feeds, ["y"], key))
        await asyncio.to_thread(started.wait)  # the first is running: the queue is empty
        # Two more at once, whichever arrives first: one takes the queue's one place, the other is refused; the
        # deadline passes while the queued one waits (the run is held).
        with deadlines.bound(deadlines.after(1.0, "the gRPC deadline")):
            names = ("a", "b")
            more = [asyncio.ensure_future(batcher.submit(feeds, ["y"], key, request_id=name)) for name in names]
        answers = dict(zip(names, await asyncio.gather(*more, return_exceptions=True), strict=True))
        refused = {name: answer for name, answer in answers.items() if isinstance(answer, QueueFull)}
        assert len(refused) == 1, answers
        (name, error), (other,) = next(iter(refused.items())), set(names) - set(refused)
        assert str(error) == f"[request id: {name}] Exceeds maximum queue size"
        assert isinstance(answers[other], deadlines.DeadlineExceeded), answers
        release.set()
        await first
        assert ran == [1]  # the request whose deadline passed in the queue never ran

    asyncio.run(scenario())
