"""The adaptive admission of handler/inference/admission.py (each model's gate, the worker's bound) and what it
needs from the rest: the dynamic batcher's queue counting the batch being formed, its loop surviving a failure,
and a dead worker's requests counted as failures (handler/protocol/statistics.py ``retire``). Rules, no server."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest

from adapters import deadline as deadlines
from adapters.errors import InternalError
from adapters.onnx.batcher import Batcher, BatchingPolicy, QueueFull, batch_key
from adapters.repository.model_config import parse_model_config
from handler.inference.admission import Admission, ModelGate, Overloaded, gate_parallelism
from handler.observability.prometheus import failure_reason
from handler.protocol.statistics import FAILURE_REASONS, Statistics, read_snapshot, retire
from handler.protocol.status import HTTP_STATUS


def _gate(run_s: float, parallel: int = 1, target_s: float = 0.1) -> ModelGate:
    gate = ModelGate("slow", parallel, target_s)
    gate.measured(run_s, 0)
    return gate


def test_an_unmeasured_model_admits_up_to_the_workers_bound_only() -> None:
    gate = ModelGate("slow", 1, 0.1)
    admission = Admission(3, lambda name: gate)
    tickets = [admission.enter("slow") for _ in range(3)]
    with pytest.raises(Overloaded) as caught:
        admission.enter("slow")
    assert "OIP_MAX_INFLIGHT" in caught.value.message and caught.value.retry_after == 1
    for ticket in tickets:
        ticket.leave(answered=False)  # failures measure nothing
    assert gate.run_s == 0 and gate.inflight == admission.inflight == 0


def test_a_slow_model_admits_one_run_behind_the_one_in_progress_and_refuses_the_rest() -> None:
    gate = _gate(0.3)
    admission = Admission(1000, lambda name: gate)
    admission.enter("slow")
    admission.enter("slow")  # one ahead: answered within two runs
    with pytest.raises(Overloaded) as caught:
        admission.enter("slow")
    assert HTTP_STATUS[caught.value.code] == 503 and "OIP_ADMISSION_TARGET_MS" in caught.value.message
    assert caught.value.retry_after == 1 and gate.refused == 1 and admission.inflight == 2  # 0.6 s to drain
    gate.run_s = 2.0  # measured slower: Retry-After follows the drain time (two runs in flight)
    with pytest.raises(Overloaded) as slower:
        admission.enter("slow")
    assert slower.value.retry_after == 4 and failure_reason(slower.value) == "REJECTED"


def test_a_fast_model_admits_what_it_answers_within_the_target() -> None:
    gate = _gate(0.0001)
    for _ in range(1000):  # a thousand runs of 0.1 ms: within two runs and 100 ms
        gate.admits(None)
        gate.inflight += 1
    gate.inflight = 1010
    with pytest.raises(Overloaded):
        gate.admits(None)


def test_a_batching_model_admits_two_batches() -> None:
    gate = _gate(0.3, parallel=8)
    gate.inflight = 15
    gate.admits(None)
    gate.inflight = 16
    with pytest.raises(Overloaded):
        gate.admits(None)


def test_a_request_whose_deadline_would_pass_in_the_queue_is_refused_with_the_deadlines_answer() -> None:
    gate = _gate(0.3)
    gate.inflight = 3  # four runs to its answer: 1.2 s
    gate.admits(deadlines.after(5.0, "the gRPC deadline"))  # its own deadline, not the target, bounds it
    with pytest.raises(deadlines.DeadlineExceeded, match="the gRPC deadline") as caught:
        gate.admits(deadlines.after(1.0, "the gRPC deadline"))
    assert failure_reason(caught.value) == "CANCELED"


def test_the_run_time_is_measured_per_run_waited_for_and_forgets_a_stall_quickly() -> None:
    gate = _gate(0.3)
    gate.measured(0.6, 1)  # one ahead: two runs, 0.3 s each
    assert gate.run_s == pytest.approx(0.3)
    gate.measured(3.0, 0)  # a stalled run
    stalled = gate.run_s
    assert 0.3 < stalled < 1.0
    for _ in range(4):
        gate.measured(0.3, 0)
    assert gate.run_s < 0.3 + (stalled - 0.3) / 10


def test_models_with_their_own_queue_policy_have_no_gate_and_batching_ones_a_wider_one() -> None:
    def parallel(text: str, batching: bool = True) -> int | None:
        return gate_parallelism(parse_model_config(text), batching)

    assert parallel("max_batch_size: 8\ndynamic_batching { }") == 8
    assert parallel("max_batch_size: 8\ndynamic_batching { preferred_batch_size: [4] }") == 4
    assert parallel("max_batch_size: 8\ndynamic_batching { }", batching=False) == 1
    assert parallel("max_batch_size: 8") == 1
    assert parallel("max_batch_size: 8\ndynamic_batching { default_queue_policy { max_queue_size: 4 } }") is None
    queued = "dynamic_batching { priority_levels: 2 "
    queued += "priority_queue_policy { key: 1 value { default_timeout_microseconds: 9 } } }"
    assert parallel(f"max_batch_size: 8\n{queued}") is None
    assert gate_parallelism(None, True) == 1


def test_max_queue_size_counts_the_batch_being_formed() -> None:
    """Triton's qa/L0_http ``test_descriptive_status_code``: a batch waiting for its delay holds the one place."""

    async def scenario() -> None:
        config = "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 1000000 "
        config += "default_queue_policy { max_queue_size: 1 } }"
        policy = BatchingPolicy.from_config(parse_model_config(config))
        assert policy is not None
        batcher = Batcher(policy, lambda wanted, feeds: [feeds["x"]], lambda: True)
        feeds = {"x": np.ones((1, 1), np.float32)}
        key = batch_key(feeds, ["y"])
        first = asyncio.ensure_future(batcher.submit(feeds, ["y"], key))
        await asyncio.sleep(0)  # one pass of the loop: the first is in the forming batch
        with pytest.raises(QueueFull):
            await batcher.submit(feeds, ["y"], key)
        assert (await first).arrays[0].tolist() == [[1.0]]

    asyncio.run(scenario())


def test_the_batchers_loop_survives_an_exception_and_keeps_batching() -> None:
    calls = []

    def inline() -> bool:  # the batcher asks before each run; the first time, it fails as a bug would
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in the loop")
        return True

    async def scenario() -> None:
        policy = BatchingPolicy.from_config(parse_model_config("max_batch_size: 8\ndynamic_batching { }"))
        assert policy is not None
        batcher = Batcher(policy, lambda wanted, feeds: [feeds["x"] * 2], inline)
        feeds = {"x": np.ones((1, 1), np.float32)}
        with pytest.raises(InternalError, match="the dynamic batcher failed"):
            await batcher.submit(feeds, ["y"], batch_key(feeds, ["y"]))
        for _ in range(2):
            outcome = await batcher.submit(feeds, ["y"], batch_key(feeds, ["y"]))
            assert outcome.arrays[0].tolist() == [[2.0]]

    asyncio.run(scenario())


def test_a_dead_workers_requests_in_progress_count_as_backend_failures(tmp_path: Path) -> None:
    statistics = Statistics(tmp_path)
    statistics.success("slow", "1", 1000, None)
    cell = statistics.pending_cell("slow", "1")
    statistics.pending(cell, 2)
    other = statistics.pending_cell("fresh", "1")  # no request to it ended in this worker
    statistics.pending(other, 1)
    statistics.failed("slow", "1", "REJECTED")
    retire(tmp_path, os.getpid())
    snapshot = read_snapshot(tmp_path)
    assert snapshot.pending() == {("slow", "1"): 0, ("fresh", "1"): 0}
    assert snapshot.failures("slow", "1") == {"REJECTED": 1, "CANCELED": 0, "BACKEND": 2, "OTHER": 0}
    assert snapshot.failures("fresh", "1")["BACKEND"] == 1
    documents = {d["name"]: d for d in snapshot.documents([("slow", "1"), ("fresh", "1")])}
    assert documents["slow"]["inference_stats"]["fail"]["count"] == 2
    assert documents["fresh"]["inference_stats"]["fail"]["count"] == 1
    assert set(FAILURE_REASONS) == {"REJECTED", "CANCELED", "BACKEND", "OTHER"}
