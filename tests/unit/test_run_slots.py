"""A model's runs in worker threads go as many at once as it has instances, the others in the order they came
(adapters/onnx/run_slots.py).

Triton's "Concurrent Model Execution" (docs/user_guide/model_execution.md): "By default, if multiple requests for
the same model arrive at the same time, Triton will serialize their execution by scheduling only one at a time [...]
Triton provides a model configuration option called instance-group that allows each model to specify how many
parallel executions of that model should be allowed."

The backend tests run a real onnxruntime session in worker threads (``inline_run_ms=0``) and hold the turns
themselves: the test takes the model's slots (its public ``slots.limiter()``) before the requests come, so which
requests wait is what the limiter reports, not how long a run takes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import numpy as np
import pytest

from adapters import deadline as deadlines
from adapters.onnx.backend import OnnxBackend, SessionSettings
from adapters.onnx.run_slots import RunSlots, instance_count
from adapters.repository.model_config import parse_model_config
from adapters.types import InferCall, Tensor
from tests.support import onnx_models, overload_models


def _config(groups: str) -> object:
    return parse_model_config(f'name: "m" platform: "onnxruntime_onnx" {groups}')


@pytest.mark.parametrize(
    ("groups", "count"),
    [
        ("", 1),
        ("instance_group [ { count: 3, kind: KIND_CPU } ]", 3),
        ("instance_group [ { count: 2, kind: KIND_CPU }, { kind: KIND_CPU } ]", 3),
        ("instance_group [ { count: 2, kind: KIND_CPU }, { count: 4, kind: KIND_CPU, passive: true } ]", 2),
        ("instance_group [ { count: 4, kind: KIND_CPU, passive: true } ]", 1),
    ],
)
def test_a_model_runs_as_many_at_once_as_its_instance_groups_count(groups: str, count: int) -> None:
    assert instance_count(_config(groups)) == count


def test_a_model_without_a_config_runs_one_at_a_time() -> None:
    assert instance_count(None) == 1


def test_each_event_loop_has_its_own_limiter_of_the_slots() -> None:
    slots = RunSlots(2)

    async def limiter() -> anyio.CapacityLimiter:
        return slots.limiter()

    async def twice() -> tuple[anyio.CapacityLimiter, anyio.CapacityLimiter]:
        return slots.limiter(), slots.limiter()

    first, again = asyncio.run(twice())
    other = asyncio.run(limiter())
    assert first is again and other is not first
    assert first.total_tokens == other.total_tokens == 2


def _backend(tmp_path: Path, groups: str) -> OnnxBackend:
    path = onnx_models.save(overload_models.slow(size=8, k=2), tmp_path, "slow", config=None)
    config = parse_model_config(overload_models.config("slow") + groups)
    backend = OnnxBackend("slow", "1", path, config, SessionSettings(inline_run_ms=0.0, intra_op_threads=1))
    backend.load()
    return backend


def _call(value: float) -> InferCall:
    data = np.array([[value]], dtype=np.float32)
    return InferCall((Tensor("x", "FP32", (1, 1), data),), id=str(value))


async def _held_requests(backend: OnnxBackend, requests: int, held: int) -> tuple[list[str], tuple[int, int]]:
    """Send ``requests`` requests while the test holds ``held`` of the model's slots (all of them: no request runs
    until the test lets go); what the limiter reports once every request has come to it (slots borrowed, requests
    waiting), and the ids in the order they were answered."""
    limiter = backend.slots.limiter()
    answered: list[str] = []

    async def one(value: float) -> None:
        result = await backend.infer(_call(value))
        answered.append(str(result.id))

    holders = [object() for _ in range(held)]
    for holder in holders:
        await limiter.acquire_on_behalf_of(holder)
    tasks = [asyncio.create_task(one(float(index))) for index in range(requests)]
    while limiter.statistics().tasks_waiting < requests and not all(task.done() for task in tasks):
        await asyncio.sleep(0)  # each request reaches the limiter within a turn or two of the loop
    seen = (int(limiter.borrowed_tokens), limiter.statistics().tasks_waiting)
    for holder in holders:
        limiter.release_on_behalf_of(holder)
    await asyncio.gather(*tasks)
    return answered, seen


def test_a_model_with_one_instance_runs_its_requests_one_at_a_time_in_the_order_they_came(tmp_path: Path) -> None:
    backend = _backend(tmp_path, "")
    answered, seen = asyncio.run(_held_requests(backend, 4, held=1))
    assert seen == (1, 4)  # the model's one slot taken: all four wait
    assert answered == ["0.0", "1.0", "2.0", "3.0"]


def test_a_model_with_two_instances_has_two_slots(tmp_path: Path) -> None:
    backend = _backend(tmp_path, "instance_group [ { count: 2, kind: KIND_CPU } ]")
    answered, seen = asyncio.run(_held_requests(backend, 4, held=2))
    assert backend.slots.total == 2
    assert seen == (2, 4)
    assert sorted(answered) == ["0.0", "1.0", "2.0", "3.0"]


def test_a_request_whose_deadline_passes_while_it_waits_for_a_slot_is_answered_then(tmp_path: Path) -> None:
    """Its deadline's answer when the deadline passes, while the test still holds the model's one slot: not at its
    turn, however late that comes."""
    backend = _backend(tmp_path, "")

    async def waited() -> None:
        limiter = backend.slots.limiter()
        holder = object()
        await limiter.acquire_on_behalf_of(holder)
        try:
            with deadlines.bound(deadlines.after(0.05, "the gRPC deadline")):
                task = asyncio.create_task(backend.infer(_call(1.0)))
            done, _ = await asyncio.wait({task}, timeout=60)  # waited for the test's slot otherwise
            assert task in done
            with pytest.raises(deadlines.DeadlineExceeded, match="the gRPC deadline"):
                task.result()
            assert limiter.borrowed_tokens == 1 and limiter.statistics().tasks_waiting == 0
        finally:
            limiter.release_on_behalf_of(holder)

    asyncio.run(waited())
