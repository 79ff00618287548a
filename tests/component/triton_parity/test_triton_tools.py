"""Triton's own tools, unchanged, over both protocols: perf_analyzer (2.51, bench/perf_analyzer.py) and PyTriton's
``ModelClient``, ``FuturesModelClient`` and ``AsyncioModelClient``. Both read the model configuration first
("rpc ModelConfig"), and perf_analyzer reads server-side statistics around its measurement windows.

PyTriton pins numpy<2, so its clients run in the ``pytriton`` tool venv (tests/tool_scripts/pytriton_clients.py)
and hand their answers back as JSON; the checks are made here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.perf_analyzer import measure, perf_analyzer
from scripts.tool_env import executable
from tests.support.servers import OipServer

DRIVER = Path(__file__).resolve().parents[2] / "tool_scripts" / "pytriton_clients.py"
A = np.arange(32, dtype=np.int32).reshape(2, 16)
B = np.full((2, 16), 3, np.int32)


@pytest.mark.integration
@pytest.mark.parametrize(("protocol", "extra"), [("http", ()), ("grpc", ()), ("grpc", ("--streaming",))])
def test_perf_analyzer_measures_simple(server: OipServer, protocol: str, extra: tuple[str, ...]) -> None:
    """``--streaming`` drives Triton's ModelStreamInfer (gRPC only)."""
    url = server.address if protocol == "http" else server.grpc
    result = measure(perf_analyzer(), url, "simple", protocol, concurrency=2, interval_ms=1000, stability=50,
                     extra=extra)  # fmt: skip
    assert result.infer_per_second > 0 and 0 < result.p50_us <= result.p99_us


def pytriton_answers(server: OipServer, protocol: str) -> dict[str, Any]:
    url = f"{protocol}://{server.address if protocol == 'http' else server.grpc}"
    done = subprocess.run([executable("pytriton", "python"), str(DRIVER), url],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module", params=["http", "grpc"])
def answers(request: pytest.FixtureRequest, server: OipServer) -> dict[str, Any]:
    return pytriton_answers(server, request.param)


def test_pytriton_model_client(answers: dict[str, Any]) -> None:
    model = answers["model"]
    assert np.array_equal(model["batch"]["OUTPUT0"], A + B) and np.array_equal(model["batch"]["OUTPUT1"], A - B)
    assert np.array_equal(model["sample"]["OUTPUT0"], A[0] + B[0])
    assert [int(v) for v in model["strings"]["OUTPUT0"][16:]] == (A[1] + B[1]).tolist()


def test_pytriton_futures_client_requests_in_flight_together(answers: dict[str, Any]) -> None:
    assert len(answers["futures"]) == 6
    assert all(np.array_equal(answer["OUTPUT0"], A + i + B) for i, answer in enumerate(answers["futures"]))


def test_pytriton_asyncio_client_requests_in_flight_together(answers: dict[str, Any]) -> None:
    assert len(answers["asyncio"]) == 6
    assert all(np.array_equal(answer["OUTPUT1"], A - B - i) for i, answer in enumerate(answers["asyncio"]))
