"""Triton's dynamic batcher on in-process models: concurrent requests through the real app merge into one
``session.run`` and split back, with outputs bit-identical to unbatched runs, errors and ids kept per request,
shapes never mixed, Triton's statistics (one execution per merged batch, one inference per row), and batching off
without ``dynamic_batching`` or on Lambda.
"""

# covers: adapters/onnx/batcher.py
# covers: handler/protocol/merging.py

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from fastapi import FastAPI
from onnx import TensorProto, helper, numpy_helper

from adapters.errors import InvalidInput
from adapters.onnx.batcher import Batcher, batch_key
from adapters.onnx.queue_policy import BatchingPolicy
from adapters.repository.model_config import model_config_pb2
from handler.config.settings import Settings
from handler.server import build_app
from tests.conftest import make_settings
from tests.support.onnx_models import save

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HIDDEN, OUT = 16, 32, 8
IO = f"""input [ {{ name: "x" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ {OUT} ] }}, {{ name: "z" data_type: TYPE_FP32 dims: [ {OUT} ] }} ]
"""
LONG_DELAY_US = 200_000
LONE_DELAY_US = 20_000
#: An hour: a batch goes only when its rows say so (a preferred size, the largest batch, another shape). One that
#: waited the delay out instead would hang its test until pytest's timeout, however loaded the machine.
PATIENT_DELAY_US = 3_600_000_000
CONFIGS = {
    # Waits long for company: a burst forms one batch as soon as it reaches the preferred 8 rows.
    "mlp": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: {LONG_DELAY_US} "
    "preferred_batch_size: [ 8 ] }\n",
    # The same, waiting an hour: a burst reaching 8 rows must go at once.
    "patient": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: {PATIENT_DELAY_US} "
    "preferred_batch_size: [ 8 ] }\n",
    # Waiting an hour without preferred sizes: a batch goes when it holds max_batch_size (16) rows.
    "full": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: {PATIENT_DELAY_US} }}\n",
    "fast": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: 2000 }}\n",
    "lone": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: {LONE_DELAY_US} "
    "preferred_batch_size: [ 4 ] }\n",
    "plain": f"max_batch_size: 16\n{IO}",
}
SCALE_CONFIG = f"""max_batch_size: 8
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {PATIENT_DELAY_US} }}
"""


def mlp() -> onnx.ModelProto:
    """FP32 [-1, 16] -> Relu(x W1) W2 = ``y`` [-1, 8] and ``z`` = Sigmoid(y), seeded weights."""
    rng = np.random.default_rng(7)
    w1 = numpy_helper.from_array(rng.standard_normal((WIDTH, HIDDEN)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((HIDDEN, OUT)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
        helper.make_node("Sigmoid", ["y"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", WIDTH])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n", OUT]) for name in ("y", "z")],
        [w1, w2],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def scale() -> onnx.ModelProto:
    """FP32 [-1, -1] -> ``y`` = x * x + x: any row length."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["s"]), helper.make_node("Add", ["s", "x"], ["y"])],
        "scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "m"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("batching")
    for name, config in CONFIGS.items():
        save(mlp(), root, name, config=config)
    save(scale(), root, "scale", config=SCALE_CONFIG)
    return root


@pytest.fixture(scope="module")
def app(repository: Path) -> FastAPI:
    return build_app(make_settings(repository))


@pytest.fixture(scope="module")
def reference(repository: Path) -> ort.InferenceSession:
    """The same model in a session of its own: the unbatched answers."""
    return ort.InferenceSession(str(repository / "plain" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])


def _body(x: np.ndarray, request_id: str, outputs: Sequence[str] = ()) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": request_id,
        "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}],
    }
    if outputs:
        body["outputs"] = [{"name": name} for name in outputs]
    return body


def _arrays(response: httpx.Response) -> dict[str, np.ndarray]:
    return {o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"]) for o in response.json()["outputs"]}


async def _burst(app: FastAPI, model: str, bodies: Sequence[Mapping[str, Any]]) -> list[httpx.Response]:
    """Send every body at once through the app; the responses in the same order."""
    responses: list[httpx.Response | None] = [None] * len(bodies)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

        async def send(index: int) -> None:
            responses[index] = await client.post(f"/v2/models/{model}/infer", json=bodies[index])

        async with anyio.create_task_group() as group:
            for index in range(len(bodies)):
                group.start_soon(send, index)
    return [r for r in responses if r is not None]


def _statistics(app: FastAPI, model: str) -> dict[str, Any]:
    """The model's entry of the statistics extension's answer."""

    async def get() -> dict[str, Any]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return (await client.get(f"/v2/models/{model}/stats")).json()["model_stats"][0]

    return anyio.run(get)


def _stats(app: FastAPI, model: str) -> tuple[int, int, dict[int, int]]:
    """inference_count, execution_count and executions per batch size, as the statistics route reports them."""
    document = _statistics(app, model)
    batches = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in document["batch_stats"]}
    return int(document["inference_count"]), int(document["execution_count"]), batches


def _delta(after: tuple[int, int, dict[int, int]], before: tuple[int, int, dict[int, int]]) -> tuple[Any, ...]:
    batches = {size: n - before[2].get(size, 0) for size, n in after[2].items() if n != before[2].get(size, 0)}
    return after[0] - before[0], after[1] - before[1], batches


def _rows(rng: np.random.Generator, batch: int = 1, width: int = WIDTH) -> np.ndarray:
    return rng.standard_normal((batch, width)).astype(np.float32)


def test_policy_is_read_from_config_pbtxt() -> None:
    config = model_config_pb2().ModelConfig()
    assert BatchingPolicy.from_config(config) is None
    config.max_batch_size = 16
    assert BatchingPolicy.from_config(config) is None
    config.dynamic_batching.SetInParent()
    assert BatchingPolicy.from_config(config) == BatchingPolicy(16)
    config.dynamic_batching.max_queue_delay_microseconds = 500
    config.dynamic_batching.preferred_batch_size.extend([8, 4])
    assert BatchingPolicy.from_config(config) == BatchingPolicy(16, 500_000, (4, 8))
    config.max_batch_size = 0
    assert BatchingPolicy.from_config(config) is None


def test_a_burst_runs_as_one_execution(app: FastAPI, reference: ort.InferenceSession) -> None:
    rng = np.random.default_rng(1)
    inputs = [_rows(rng) for _ in range(8)]
    before = _stats(app, "patient")
    responses = anyio.run(_burst, app, "patient", [_body(x, f"r{i}") for i, x in enumerate(inputs)])
    assert [r.status_code for r in responses] == [200] * 8
    assert [r.json()["id"] for r in responses] == [f"r{i}" for i in range(8)]
    for x, response in zip(inputs, responses, strict=True):
        y, z = reference.run(["y", "z"], {"x": x})
        assert np.array_equal(_arrays(response)["y"], y) and np.array_equal(_arrays(response)["z"], z)
    # Eight rows reach the preferred size: one execution of batch 8, sent without waiting out the hour's delay.
    assert _delta(_stats(app, "patient"), before) == (8, 1, {8: 1})


def test_merged_outputs_are_bit_identical_to_unbatched_runs(app: FastAPI, reference: ort.InferenceSession) -> None:
    """Each round's requests hold 16 rows between them (2 to 8 requests of any size): the batch goes when the
    sixteenth row arrives, one execution of 16 per round, whatever the machine's load."""
    rng = np.random.default_rng(2)
    before = _stats(app, "full")
    for round_ in range(25):
        count = int(rng.integers(2, 9))
        sizes = 1 + rng.multinomial(16 - count, [1 / count] * count)
        inputs = [_rows(rng, int(size)) * np.float32(10.0 ** rng.integers(-3, 4)) for size in sizes]
        responses = anyio.run(_burst, app, "full", [_body(x, f"{round_}-{i}") for i, x in enumerate(inputs)])
        for index, (x, response) in enumerate(zip(inputs, responses, strict=True)):
            assert response.status_code == 200, response.text
            assert response.json()["id"] == f"{round_}-{index}"
            y, z = reference.run(["y", "z"], {"x": x})
            got = _arrays(response)
            assert got["y"].view(np.uint32).tolist() == y.view(np.uint32).tolist()
            assert got["z"].view(np.uint32).tolist() == z.view(np.uint32).tolist()
    assert _delta(_stats(app, "full"), before) == (25 * 16, 25, {16: 25})


def test_a_bad_request_in_a_burst_fails_alone(app: FastAPI, reference: ort.InferenceSession) -> None:
    rng = np.random.default_rng(3)
    inputs = [_rows(rng) for _ in range(10)]
    bodies = [_body(x, f"ok{i}") for i, x in enumerate(inputs)]
    bodies[3] = _body(_rows(rng, width=WIDTH - 1), "bad-shape")
    bodies[5] = {**_body(inputs[5], "bad-type"), "inputs": [{**bodies[5]["inputs"][0], "datatype": "FP64"}]}
    before = _stats(app, "patient")
    responses = anyio.run(_burst, app, "patient", bodies)
    assert [r.status_code for r in responses] == [200, 200, 200, 400, 200, 400, 200, 200, 200, 200]
    assert "shape" in responses[3].json()["error"] and "datatype" in responses[5].json()["error"]
    good = (0, 1, 2, 4, 6, 7, 8, 9)
    for index in good:
        assert responses[index].json()["id"] == f"ok{index}"
        assert np.array_equal(_arrays(responses[index])["y"], reference.run(["y"], {"x": inputs[index]})[0])
    # The eight good requests reach the preferred size and run together; the two bad ones never queued.
    assert _delta(_stats(app, "patient"), before) == (8, 1, {8: 1})


def test_different_shapes_or_outputs_are_not_mixed(app: FastAPI, reference: ort.InferenceSession) -> None:
    rng = np.random.default_rng(4)
    narrow, wide = [_rows(rng, 1, 3) for _ in range(4)], [_rows(rng, 2, 5) for _ in range(4)]

    async def two_groups() -> list[httpx.Response]:
        first = [_body(x, f"n{i}") for i, x in enumerate(narrow)]
        second = [_body(x, f"w{i}") for i, x in enumerate(wide)]
        results: list[list[httpx.Response]] = []

        async def later() -> None:
            with anyio.fail_after(60):
                while _queued(app, "scale") < len(narrow):  # the narrow rows wait: 4 of 8, an hour's delay
                    await anyio.sleep(0.001)
            results.append(await _burst(app, "scale", second))

        async with anyio.create_task_group() as group:
            group.start_soon(later)
            results.append(await _burst(app, "scale", first))
        return [response for batch in results for response in batch]

    before = _stats(app, "scale")
    responses = anyio.run(two_groups)
    by_id = {r.json()["id"]: _arrays(r)["y"] for r in responses}
    for prefix, inputs in (("n", narrow), ("w", wide)):
        for index, x in enumerate(inputs):
            assert np.array_equal(by_id[f"{prefix}{index}"], x * x + x)
    # The first wide request closes the narrow batch (Triton sends it at once); the wide ones run together once
    # their rows fill the largest batch (8).
    assert _delta(_stats(app, "scale"), before) == (12, 2, {4: 1, 8: 1})

    # Requests asking for different outputs do not merge either: two executions of four.
    inputs = [_rows(rng) for _ in range(8)]
    bodies = [_body(x, f"o{i}", ["y"] if i < 4 else ["z"]) for i, x in enumerate(inputs)]
    before = _stats(app, "fast")
    responses = anyio.run(_burst, app, "fast", bodies)
    for index, (x, response) in enumerate(zip(inputs, responses, strict=True)):
        name = "y" if index < 4 else "z"
        assert list(_arrays(response)) == [name]
        assert np.array_equal(_arrays(response)[name], reference.run([name], {"x": x})[0])
    inferences, executions, _ = _delta(_stats(app, "fast"), before)
    assert inferences == 8 and executions >= 2


def test_a_lone_request_waits_out_the_delay_and_runs_alone(app: FastAPI) -> None:
    """Alone, a request waits out the delay, as in Triton, and runs as a batch of one: the statistics count its
    queue time and one execution per request. (How little more than the delay it waits: bench/.)"""
    rng = np.random.default_rng(5)

    async def one_at_a_time() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            for index in range(20):
                response = await client.post("/v2/models/lone/infer", json=_body(_rows(rng), str(index)))
                assert response.status_code == 200

    queued_before = _queue_stats(app, "lone")
    before = _stats(app, "lone")
    anyio.run(one_at_a_time)
    assert _delta(_stats(app, "lone"), before) == (20, 20, {1: 20})
    count, ns = (after - earlier for after, earlier in zip(_queue_stats(app, "lone"), queued_before, strict=True))
    assert count == 20 and ns >= 20 * LONE_DELAY_US * 1000 * 0.95, ns


def _queue_stats(app: FastAPI, model: str) -> tuple[int, int]:
    """The statistics' queue count and nanoseconds."""
    queue = _statistics(app, model)["inference_stats"]["queue"]
    return int(queue["count"]), int(queue["ns"])


def _queued(app: FastAPI, model: str) -> int:
    """How many requests wait in the model's batcher (its queue's own list; no statistic counts them)."""
    batcher = app.state.dataplane.router.backend(model, None)._batcher
    return len(batcher._queue.items) if batcher._queue is not None else 0


def test_no_dynamic_batching_in_config_means_one_execution_per_request(app: FastAPI) -> None:
    assert app.state.dataplane.router.backend("plain", None).dynamic_batching is None
    assert app.state.dataplane.router.backend("mlp", None).dynamic_batching == BatchingPolicy(16, 200_000_000, (8,))
    rng = np.random.default_rng(6)
    before = _stats(app, "plain")
    responses = anyio.run(_burst, app, "plain", [_body(_rows(rng), str(i)) for i in range(8)])
    assert [r.status_code for r in responses] == [200] * 8
    assert _delta(_stats(app, "plain"), before) == (8, 8, {1: 8})


LAMBDA_SCRIPT = """
import functools, json
import anyio, httpx
import handler.http

async def main():
    body = {"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=handler.http.app), base_url="http://l") as client:
        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(functools.partial(client.post, "/v2/models/mlp/infer", json=body))
        stats = (await client.get("/v2/models/mlp/stats")).json()["model_stats"][0]
    print(json.dumps([handler.http.settings.dynamic_batching, stats["inference_count"], stats["execution_count"]]))

anyio.run(main)
"""


def test_lambda_http_entry_point_turns_batching_off(repository: Path) -> None:
    env = {**os.environ, "MODEL_REPOSITORY": str(repository), "OIP_WARM_UP": "0", "OIP_DYNAMIC_BATCHING": "1"}
    run = subprocess.run(
        [sys.executable, "-c", LAMBDA_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == [False, 8, 8]


def test_a_failed_merged_run_falls_back_to_one_run_per_request() -> None:
    runs: list[list[int]] = []

    def run(wanted: Sequence[str], feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        x = feeds["x"]
        runs.append([len(x)])
        if np.isnan(x).any():
            raise InvalidInput("NaN in the input")
        return [x * 2]

    batcher = Batcher(BatchingPolicy(8, 50_000_000, (4,)), run, inline=lambda: True)
    inputs = [np.full((1, 2), i, np.float32) for i in range(4)]
    inputs[2] = np.full((1, 2), np.nan, np.float32)
    outcomes: list[Any] = [None] * 4

    async def main() -> None:
        async def one(index: int) -> None:
            feeds = {"x": inputs[index]}
            try:
                outcomes[index] = await batcher.submit(feeds, ["y"], batch_key(feeds, ["y"]))
            except InvalidInput as exc:
                outcomes[index] = exc

        async with anyio.create_task_group() as group:
            for index in range(4):
                group.start_soon(one, index)

    anyio.run(main)
    assert runs == [[4], [1], [1], [1], [1]]  # the merged run failed, then each ran alone
    assert isinstance(outcomes[2], InvalidInput)
    for index in (0, 1, 3):
        assert np.array_equal(outcomes[index].arrays[0], inputs[index] * 2)
        assert outcomes[index].execution.batch_size == 1 and outcomes[index].execution.leads


def test_a_run_is_answered_once_the_next_batch_has_started_in_its_thread() -> None:
    """A model run in a worker thread does not idle while the event loop answers the previous run: the next batch
    starts first (answering first kept the loop on the GIL while the worker thread waited for it, 2-4 ms a run)."""
    events: list[str] = []
    b_queued, a_answered = threading.Event(), threading.Event()

    def run(wanted: Sequence[str], feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        first = feeds["x"][0, 0] == 0
        assert (b_queued if first else a_answered).wait(10)  # B waits in the queue; A is answered while B runs
        return [feeds["x"] + 1]

    batcher = Batcher(BatchingPolicy(8, 0, ()), run, inline=lambda: False)
    execute = batcher._execute

    def traced(batch: Any, *rest: Any) -> Any:
        events.append(f"{'A' if batch[0].feeds['x'][0, 0] == 0 else 'B'} starts")
        return execute(batch, *rest)

    batcher._execute = traced  # type: ignore[method-assign]

    async def main() -> None:
        async def one(name: str) -> None:
            feeds = {"x": np.full((1, 2), 0 if name == "A" else 1, np.float32)}
            outcome = await batcher.submit(feeds, ["y"], batch_key(feeds, ["y"]))
            assert np.array_equal(outcome.arrays[0], feeds["x"] + 1)
            events.append(f"{name} answered")
            if name == "A":
                a_answered.set()

        async with anyio.create_task_group() as group:
            group.start_soon(one, "A")
            with anyio.fail_after(60):
                while not events:  # A runs
                    await anyio.sleep(0.001)
                group.start_soon(one, "B")
                while batcher._queue is None or not batcher._queue.items:  # B waits for the next batch
                    await anyio.sleep(0.001)
            b_queued.set()

    anyio.run(main)
    assert events == ["A starts", "B starts", "A answered", "B answered"]


def test_a_window_closed_by_its_timer_on_uvloop_merges_its_requests_without_spinning() -> None:
    """Under uvloop (what ``oip serve`` runs) timers have millisecond resolution: the dispatcher arms one timer per
    batch window instead of re-arming it for the rest of the delay after every arrival (a sub-millisecond rest
    rounded to 0 and spun the loop until the delay was over). Arrivals spread over the window still merge into
    one run, outputs split back per request, another shape is not mixed in, and the dispatcher wakes about once
    per arrival, per timer and per run. (That the requests of one window merge is the burst tests' point: here the
    arrivals' spacing is up to the machine, so they may take more windows than the two they are sent for.)"""
    uvloop = pytest.importorskip("uvloop")
    runs: list[tuple[int, ...]] = []

    def run(wanted: Sequence[str], feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        runs.append(feeds["x"].shape)
        return [feeds["x"] * 3 + 1]

    batcher = Batcher(BatchingPolicy(16, 4_000_000, (16,)), run, inline=lambda: True)
    forms = 0
    form = batcher._form

    def counted(items: Any, now_ns: int) -> Any:
        nonlocal forms
        forms += 1
        return form(items, now_ns)

    batcher._form = counted  # type: ignore[method-assign]
    rng = np.random.default_rng(8)
    inputs = [rng.standard_normal((int(rng.integers(1, 3)), 4)).astype(np.float32) for _ in range(7)]
    other = rng.standard_normal((1, 6)).astype(np.float32)

    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()

        async def one(x: np.ndarray) -> Any:
            feeds = {"x": x}
            return await batcher.submit(feeds, ["y"], batch_key(feeds, ["y"]))

        def arrive() -> list[Any]:  # sub-millisecond spacing, which the loop's own timers cannot give
            futures = []
            for x in inputs:
                futures.append(asyncio.run_coroutine_threadsafe(one(x), loop))
                time.sleep(0.00055)  # the last ones land in the window's last millisecond
            return [future.result() for future in futures]

        found = await asyncio.to_thread(arrive)
        return [*found, await one(other)]

    outcomes = uvloop.run(main())
    # Every same-shape row ran, in runs of that shape alone; the other shape ran alone, after them.
    assert sum(shape[0] for shape in runs[:-1]) == sum(len(x) for x in inputs)
    assert all(shape[1] == 4 for shape in runs[:-1]) and runs[-1] == (1, 6)
    for x, outcome in zip([*inputs, other], outcomes, strict=True):
        assert outcome.arrays[0].view(np.uint32).tolist() == (x * 3 + 1).view(np.uint32).tolist()
    # A dispatcher that spun until its window's end would form hundreds of times; one that does not, a few per
    # arrival, per timer (one a run) and per run.
    assert forms <= 2 * (len(inputs) + 1) + 3 * len(runs) + 4, (forms, runs)


def test_onnxruntime_threads_do_not_spin_between_runs_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.onnx.backend import SessionSettings

    assert SessionSettings().allow_spinning is False
    monkeypatch.delenv("OIP_ORT_ALLOW_SPINNING", raising=False)
    assert Settings.from_env().ort_allow_spinning is False
    monkeypatch.setenv("OIP_ORT_ALLOW_SPINNING", "1")
    assert Settings.from_env().ort_allow_spinning is True
