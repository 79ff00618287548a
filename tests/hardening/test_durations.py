"""No duration a client gives breaks the run watchdog (adapters/onnx/watchdog.py), the one thread that stops every
onnxruntime run at its deadline: ``timeout = 2**63`` over REST and gRPC is clamped (adapters/deadline.py), an
exception in the watchdog's loop is logged once and survived, and afterwards a 50 ms ``timeout`` still stops a
slow run (a 503 in Triton's words, counted as a failure in the model's statistics, the model's run count
unchanged)."""

# covers: adapters/onnx/watchdog.py
# covers: handler/protocol/transport_deadlines.py

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import onnxruntime as ort
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from adapters import deadline as deadlines
from adapters.onnx.watchdog import WATCHDOG, Watchdog
from tests.support import overload_models, servers
from tests.support.servers import OipServer

TIMEOUT_EXPIRED = "Request timeout expired"
#: Past threading.TIMEOUT_MAX once microseconds become seconds; and past an unsigned 64-bit integer's range.
HUGE = (2**63, 2**64 - 1)


class Unsettable:
    """Run options whose ``terminate`` cannot be set: the watchdog's loop fails on them."""

    __slots__ = ()


def _fired(options: Any) -> bool:
    """True once the watchdog has set ``options.terminate`` (AssertionError if it never does)."""
    return servers.wait_for(lambda: bool(options.terminate), "the watchdog set terminate", timeout=30)


def test_the_watchdog_survives_an_exception_in_its_loop_and_keeps_stopping_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watchdog = Watchdog()
    with caplog.at_level(logging.ERROR, logger="adapters.onnx.watchdog"):
        watchdog.watch(Unsettable(), time.monotonic())  # due at once: setting its flag raises in the loop
        watchdog.watch(Unsettable(), time.monotonic())
        later = ort.RunOptions()
        watch = watchdog.watch(later, time.monotonic() + 0.05)
        assert _fired(later) and watch.fired
    assert watchdog.failures == 2
    logged = [record for record in caplog.records if "run watchdog" in record.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None  # logged once, with its traceback


class Stopping:
    """Run options whose ``terminate`` ends the thread that sets it (SystemExit, which no ``except Exception``
    catches), and names that thread."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None

    @property
    def terminate(self) -> bool:
        return False

    @terminate.setter
    def terminate(self, value: bool) -> None:
        self.thread = threading.current_thread()
        raise SystemExit


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the SystemExit above
def test_a_watchdog_whose_thread_ended_starts_another_on_the_next_run() -> None:
    watchdog = Watchdog()
    stopping = Stopping()
    watchdog.watch(stopping, time.monotonic())  # due at once: its thread ends on it
    servers.wait_for(lambda: stopping.thread is not None and not stopping.thread.is_alive(),
                     "the watchdog's thread ended", timeout=30)  # fmt: skip
    later = ort.RunOptions()
    watchdog.watch(later, time.monotonic() + 0.05)
    assert _fired(later)


def test_a_forked_child_has_a_watchdog_of_its_own() -> None:
    WATCHDOG.watch(ort.RunOptions(), time.monotonic() + 3600)  # the parent's thread runs; a child has none of it
    child = os.fork()
    if child == 0:  # the child: its runs are stopped at their deadlines by a thread of its own
        options = ort.RunOptions()
        WATCHDOG.watch(options, time.monotonic() + 0.05)
        try:
            _fired(options)
        finally:  # never back into pytest: the child's status is the verdict
            os._exit(0 if options.terminate else 1)
    try:  # a child stuck on a lock never exits: the wait is bounded, and such a child killed
        (code,) = servers.wait_for(lambda: _exited(child), "the forked child exited", timeout=60)
    except AssertionError:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        raise
    assert code == 0  # its run was stopped


def _exited(pid: int) -> tuple[int] | None:
    """``(exit code,)`` of child ``pid`` once it has exited; None while it runs."""
    done, status = os.waitpid(pid, os.WNOHANG)
    return (os.waitstatus_to_exitcode(status),) if done else None


@pytest.mark.parametrize(
    "at", [math.inf, math.nan, 1e300, time.monotonic() + 2**63 / 1e6], ids=["inf", "nan", "1e300", "2**63 us on"]
)
def test_a_deadline_the_clock_cannot_wait_for_is_watched_as_the_longest_one(at: float) -> None:
    watchdog = Watchdog()
    watchdog.watch(ort.RunOptions(), at)
    soon = ort.RunOptions()
    watchdog.watch(soon, time.monotonic() + 0.05)
    assert _fired(soon)
    assert watchdog.failures == 0


def test_client_durations_are_clamped_to_a_day() -> None:
    for value in HUGE:
        assert deadlines.request_timeout_us({"timeout": value}) == deadlines.MAX_TIMEOUT_US == 86_400_000_000
    assert deadlines.request_timeout_us({"timeout": 50_000}) == 50_000
    for seconds in (1e30, math.inf, math.nan):
        remaining = deadlines.after(seconds, "the gRPC deadline").remaining()
        assert 0 < remaining <= deadlines.MAX_DURATION_S


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OipServer]:
    models = {"plain": overload_models.config("plain", 0)}
    root = overload_models.repository(tmp_path_factory.mktemp("durations"), models, k=800)
    with servers.oip_serve("--model-repository", str(root), "--log-level", "warning", grpc=True, workers=1) as served:
        yield served


BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}


def _rest(server: OipServer, timeout_us: int) -> httpx.Response:
    body = {**BODY, "parameters": {"timeout": timeout_us}}
    return httpx.post(f"{server.url}/v2/models/plain/infer", json=body, timeout=120)


def _grpc(server: OipServer, timeout_us: int, deadline: float | None = None) -> Any:
    """``ModelInfer`` with ``timeout`` as a ``uint64_param`` (tritonclient sends an int64 one), within
    ``deadline`` seconds (the ``grpc-timeout`` header) when given; the answer, or the ``grpc.RpcError``."""
    assert server.grpc is not None
    request = service_pb2.ModelInferRequest(model_name="plain")
    request.parameters["timeout"].uint64_param = timeout_us
    tensor = request.inputs.add(name="x", datatype="FP32", shape=[1, 1])
    tensor.contents.fp32_contents.append(1.0)
    with grpc.insecure_channel(server.grpc) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            return stub.ModelInfer(request, timeout=deadline)
        except grpc.RpcError as error:
            return error


def _statistics(server: OipServer) -> dict[str, Any]:
    return httpx.get(f"{server.url}/v2/models/plain/stats", timeout=10).json()["model_stats"][0]


def test_a_huge_timeout_leaves_later_timeouts_working(server: OipServer) -> None:
    for value in HUGE:  # each runs to its end: a day is longer than the run
        answer = _rest(server, value)
        assert answer.status_code == 200, answer.text
        assert list(_grpc(server, value).outputs[0].shape) == [1, 1]
    before = _statistics(server)
    answer = _rest(server, 50_000)
    assert (answer.status_code, answer.json()) == (503, {"error": TIMEOUT_EXPIRED})
    refused = _grpc(server, 50_000)
    assert (refused.code(), refused.details()) == (grpc.StatusCode.UNAVAILABLE, TIMEOUT_EXPIRED)
    after = _statistics(server)
    assert after["inference_stats"]["fail"]["count"] == before["inference_stats"]["fail"]["count"] + 2
    assert after["inference_count"] == before["inference_count"]  # neither run was let finish


def test_a_grpc_deadline_past_a_day_is_a_day(server: OipServer) -> None:
    """A deadline of ten million seconds (115 days) runs to the end, and later deadlines still stop runs."""
    assert list(_grpc(server, 0, deadline=1e7).outputs[0].shape) == [1, 1]
    assert _grpc(server, 50_000, deadline=1e7).code() == grpc.StatusCode.UNAVAILABLE
    assert _grpc(server, 0, deadline=0.05).code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert _rest(server, 50_000).status_code == 503


@pytest.mark.parametrize("priority", [-1, "high", 2**64])
def test_priority_is_checked_without_dynamic_batching_too(server: OipServer, priority: Any) -> None:
    body = {**BODY, "parameters": {"priority": priority}}
    answer = httpx.post(f"{server.url}/v2/models/plain/infer", json=body, timeout=120)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("Unable to parse 'priority': expected an unsigned integer")
