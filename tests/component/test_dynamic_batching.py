"""Triton's dynamic batcher on in-process models: concurrent requests through the real app merge into one
``session.run`` and split back, with outputs bit-identical to unbatched runs, errors and ids kept per request,
shapes never mixed, Triton's statistics (one execution per merged batch, one inference per row), and batching off
without ``dynamic_batching`` or on Lambda.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
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
from adapters.onnx.batcher import Batcher, BatchingPolicy, batch_key
from adapters.repository.model_config import model_config_pb2
from handler.protocol.settings import Settings
from handler.server import build_app
from tests.conftest import make_settings
from tests.onnx_models import save

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HIDDEN, OUT = 16, 32, 8
IO = f"""input [ {{ name: "x" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ {OUT} ] }}, {{ name: "z" data_type: TYPE_FP32 dims: [ {OUT} ] }} ]
"""
LONG_DELAY_US = 200_000
LONE_DELAY_US = 20_000
#: So long that a batch which waited it out could not be mistaken for one sent at once, however loaded the machine.
PATIENT_DELAY_US = 60_000_000
CONFIGS = {
    # Waits long for company: a burst forms one batch as soon as it reaches the preferred 8 rows.
    "mlp": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: {LONG_DELAY_US} "
    "preferred_batch_size: [ 8 ] }\n",
    # The same, waiting a minute: a burst reaching 8 rows must go at once (the test would take a minute if not).
    "patient": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: {PATIENT_DELAY_US} "
    "preferred_batch_size: [ 8 ] }\n",
    "fast": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: 2000 }}\n",
    "lone": f"max_batch_size: 16\n{IO}dynamic_batching {{ max_queue_delay_microseconds: {LONE_DELAY_US} "
    "preferred_batch_size: [ 4 ] }\n",
    "plain": f"max_batch_size: 16\n{IO}",
}
SCALE_CONFIG = f"""max_batch_size: 8
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {LONG_DELAY_US} }}
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


def _stats(app: FastAPI, model: str) -> tuple[int, int, dict[int, int]]:
    """inference_count, execution_count and executions per batch size, as the statistics route reports them."""

    async def get() -> dict[str, Any]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return (await client.get(f"/v2/models/{model}/stats")).json()["model_stats"][0]

    document = anyio.run(get)
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
    started = time.perf_counter()
    responses = anyio.run(_burst, app, "patient", [_body(x, f"r{i}") for i, x in enumerate(inputs)])
    elapsed = time.perf_counter() - started
    assert [r.status_code for r in responses] == [200] * 8
    assert [r.json()["id"] for r in responses] == [f"r{i}" for i in range(8)]
    for x, response in zip(inputs, responses, strict=True):
        y, z = reference.run(["y", "z"], {"x": x})
        assert np.array_equal(_arrays(response)["y"], y) and np.array_equal(_arrays(response)["z"], z)
    # Eight rows reach the preferred size: one execution of batch 8, sent without waiting out the delay.
    assert _delta(_stats(app, "patient"), before) == (8, 1, {8: 1})
    assert elapsed < PATIENT_DELAY_US / 1e6 / 2  # not waited out: model loading and a busy machine fit in this


def test_merged_outputs_are_bit_identical_to_unbatched_runs(app: FastAPI, reference: ort.InferenceSession) -> None:
    rng = np.random.default_rng(2)
    before = _stats(app, "fast")
    rows = 0
    for round_ in range(25):
        inputs = [_rows(rng, int(rng.integers(1, 4))) for _ in range(int(rng.integers(2, 7)))]
        inputs = [x * np.float32(10.0 ** rng.integers(-3, 4)) for x in inputs]
        rows += sum(len(x) for x in inputs)
        responses = anyio.run(_burst, app, "fast", [_body(x, f"{round_}-{i}") for i, x in enumerate(inputs)])
        for index, (x, response) in enumerate(zip(inputs, responses, strict=True)):
            assert response.status_code == 200, response.text
            assert response.json()["id"] == f"{round_}-{index}"
            y, z = reference.run(["y", "z"], {"x": x})
            got = _arrays(response)
            assert got["y"].view(np.uint32).tolist() == y.view(np.uint32).tolist()
            assert got["z"].view(np.uint32).tolist() == z.view(np.uint32).tolist()
    inferences, executions, batches = _delta(_stats(app, "fast"), before)
    assert inferences == rows == sum(size * n for size, n in batches.items())
    assert executions == sum(batches.values()) < 25 * 2  # merged: fewer executions than requests
    assert max(batches) > 3  # some execution held rows of several requests


def test_a_bad_request_in_a_burst_fails_alone(app: FastAPI, reference: ort.InferenceSession) -> None:
    rng = np.random.default_rng(3)
    inputs = [_rows(rng) for _ in range(8)]
    bodies = [_body(x, f"ok{i}") for i, x in enumerate(inputs)]
    bodies[3] = _body(_rows(rng, width=WIDTH - 1), "bad-shape")
    bodies[5] = {**_body(inputs[5], "bad-type"), "inputs": [{**bodies[5]["inputs"][0], "datatype": "FP64"}]}
    before = _stats(app, "mlp")
    responses = anyio.run(_burst, app, "mlp", bodies)
    assert [r.status_code for r in responses] == [200, 200, 200, 400, 200, 400, 200, 200]
    assert "shape" in responses[3].json()["error"] and "datatype" in responses[5].json()["error"]
    for index in (0, 1, 2, 4, 6, 7):
        assert responses[index].json()["id"] == f"ok{index}"
        assert np.array_equal(_arrays(responses[index])["y"], reference.run(["y"], {"x": inputs[index]})[0])
    # The six good requests wait out the delay (six is not a preferred size) and run together.
    assert _delta(_stats(app, "mlp"), before) == (6, 1, {6: 1})


def test_different_shapes_or_outputs_are_not_mixed(app: FastAPI, reference: ort.InferenceSession) -> None:
    rng = np.random.default_rng(4)
    narrow, wide = [_rows(rng, 1, 3) for _ in range(4)], [_rows(rng, 1, 5) for _ in range(4)]

    async def two_groups() -> list[httpx.Response]:
        first = [_body(x, f"n{i}") for i, x in enumerate(narrow)]
        second = [_body(x, f"w{i}") for i, x in enumerate(wide)]
        results: list[list[httpx.Response]] = []

        async def later() -> None:
            await anyio.sleep(0.02)  # well inside the 200 ms delay: the narrow rows are still queued
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
    # The first wide request closes the narrow batch (Triton sends it at once); the wide ones then run together.
    assert _delta(_stats(app, "scale"), before) == (8, 2, {4: 2})

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


def test_a_lone_request_waits_at_most_the_delay(app: FastAPI) -> None:
    rng = np.random.default_rng(5)

    async def timed() -> list[float]:
        samples = []
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            for index in range(20):
                body = _body(_rows(rng), str(index))
                started = time.perf_counter()
                response = await client.post("/v2/models/lone/infer", json=body)
                samples.append(time.perf_counter() - started)
                assert response.status_code == 200
        return samples

    samples = anyio.run(timed)
    delay = LONE_DELAY_US / 1e6
    # Alone it waits out the delay, as in Triton, and not much more: delay + one tiny run + slack for a shared
    # machine (the median: one descheduled sample must not fail the run; bench/ measures the tail).
    assert min(samples) >= delay * 0.95
    assert statistics.median(samples) < delay + 0.05, samples


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
            while not events:
                await anyio.sleep(0.001)
            group.start_soon(one, "B")
            await anyio.sleep(0.01)
            b_queued.set()

    anyio.run(main)
    assert events == ["A starts", "B starts", "A answered", "B answered"]


def test_a_window_closed_by_its_timer_on_uvloop_merges_its_requests_without_spinning() -> None:
    """Under uvloop (what ``oip serve`` runs) timers have millisecond resolution: the dispatcher arms one timer per
    batch window instead of re-arming it for the rest of the delay after every arrival (a sub-millisecond rest
    rounded to 0 and spun the loop until the delay was over). Arrivals spread over the window still merge into
    one run, outputs split back per request, another shape is not mixed in, and the dispatcher wakes about once
    per arrival and per timer."""
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
    # Same-shape requests ran together (one window, or two if the machine delayed the arrivals past the delay);
    # the other shape ran alone, after them.
    assert sum(shape[0] for shape in runs[:-1]) == sum(len(x) for x in inputs) and len(runs) <= 3
    assert all(shape[1] == 4 for shape in runs[:-1]) and runs[-1] == (1, 6)
    for x, outcome in zip([*inputs, other], outcomes, strict=True):
        assert outcome.arrays[0].view(np.uint32).tolist() == (x * 3 + 1).view(np.uint32).tolist()
    assert forms <= 2 * (len(inputs) + 1) + 4, forms  # per arrival, per timer, per run: no spinning


def test_onnxruntime_threads_do_not_spin_between_runs_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.onnx.backend import SessionSettings

    assert SessionSettings().allow_spinning is False
    monkeypatch.delenv("OIP_ORT_ALLOW_SPINNING", raising=False)
    assert Settings.from_env().ort_allow_spinning is False
    monkeypatch.setenv("OIP_ORT_ALLOW_SPINNING", "1")
    assert Settings.from_env().ort_allow_spinning is True
