"""Where a model's runs go, against a real ``oip serve`` (one worker, a metrics port): a model measured fast runs on
the event loop, and one run of ``SLOW_RUN_MS`` or more there sends its next run to a worker thread at once, so the
event loop answers a health request while that run is in progress (adapters/onnx/placement.py).

The model's run time is the test's to choose: a Loop of 64 x 64 MatMuls as long as its input (``[1]``: tens of
microseconds; ``[100000]``: over a second on this machine, ten times ``SLOW_RUN_MS`` on a machine ten times as fast).
Requests are ordered by what the server reports: its statistics and ``nv_inference_pending_request_count``, which the
metrics thread answers whatever the event loop is doing."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adapters.onnx.placement import SLOW_RUN_MS
from tests.support import onnx_models
from tests.support.metrics_scrape import scrape
from tests.support.servers import OipServer, oip_serve, wait_for

PENDING = "nv_inference_pending_request_count"
SIZE = 64
#: Iterations of a slow run.
SLOW = 100_000
#: Fast runs before the slow one: the estimate is then far under OIP_INLINE_RUN_MS (tests/unit/test_placement.py).
FAST_RUNS = 5


def scaling() -> onnx.ModelProto:
    """``y = x + 0 * sum(A_n)``, ``A_0 = sum(x) * C``, ``A_{i+1} = A_i @ W``, for ``n`` the length of FP32 ``x``
    (shape ``[-1]``): the answer is the input, the time ``n`` MatMuls that depend on it."""
    state = helper.make_tensor_value_info
    matrix = (SIZE, SIZE)
    step = helper.make_graph(
        [helper.make_node("MatMul", ["a_in", "W"], ["a_out"]), helper.make_node("Identity", ["go_in"], ["go_out"])],
        "step",
        [
            state("i", TensorProto.INT64, []),
            state("go_in", TensorProto.BOOL, []),
            state("a_in", TensorProto.FLOAT, matrix),
        ],
        [state("go_out", TensorProto.BOOL, []), state("a_out", TensorProto.FLOAT, matrix)],
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "first"], ["n"], axis=0),
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Mul", ["s", "C"], ["a0"]),
        helper.make_node("Loop", ["n", "", "a0"], ["an"], body=step),
        helper.make_node("ReduceSum", ["an"], ["t"], keepdims=0),
        helper.make_node("Mul", ["t", "zero"], ["z"]),
        helper.make_node("Add", ["x", "z"], ["y"]),
    ]
    weights = np.eye(SIZE) + np.random.default_rng(0).normal(0, 1e-3, (SIZE, SIZE))
    initializers = [
        numpy_helper.from_array(np.full((SIZE, SIZE), 1e-3, np.float32), "C"),
        numpy_helper.from_array(weights.astype(np.float32), "W"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(0, np.int64), "first"),
    ]
    graph = helper.make_graph(
        nodes, "scaling", [state("x", TensorProto.FLOAT, ["n"])], [state("y", TensorProto.FLOAT, ["n"])], initializers
    )
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[OipServer]:
    onnx_models.save(scaling(), tmp_path, "scaling")
    flags = ("--model-repository", str(tmp_path), "--log-level", "warning")
    with oip_serve(*flags, env={"OIP_INLINE_RUN_MS": "1"}, workers=1, metrics=True) as served:
        yield served


def _infer(server: OipServer, length: int) -> httpx.Response:
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [length], "data": [1.0] * length}]}
    return httpx.post(f"{server.url}/v2/models/scaling/infer", json=body, timeout=300)


def _pending(server: OipServer) -> float:
    return scrape(f"http://127.0.0.1:{server.metrics_port}/metrics").value(PENDING, model="scaling", version="1")


def _compute_ms(server: OipServer) -> tuple[int, float]:
    """The model's runs so far and their total compute time (ms), as its statistics say."""
    stats = httpx.get(f"{server.url}/v2/models/scaling/stats", timeout=30).json()["model_stats"][0]
    infer = stats["inference_stats"]["compute_infer"]
    return infer["count"], infer["ns"] / 1e6


def test_one_slow_run_sends_the_next_to_a_thread_and_the_event_loop_stays_free(server: OipServer) -> None:
    for _ in range(FAST_RUNS):  # measured fast: the next run is made on the event loop
        assert _infer(server, 1).status_code == 200
    runs, compute = _compute_ms(server)
    assert _infer(server, SLOW).status_code == 200  # on the event loop: nothing foretold it
    slow_runs, slow_compute = _compute_ms(server)
    assert slow_runs == runs + 1
    assert slow_compute - compute >= SLOW_RUN_MS, "the slow run was not slow enough for the test"

    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(_infer, server, SLOW)
        wait_for(lambda: _pending(server) == 1, "the slow run never showed as pending", timeout=120)
        assert httpx.get(f"{server.url}/v2/health/ready", timeout=300).status_code == 200
        assert _pending(server) == 1, "the health request waited for the slow run: it ran on the event loop"
        assert slow.result().status_code == 200
    assert _compute_ms(server)[0] == runs + 2
