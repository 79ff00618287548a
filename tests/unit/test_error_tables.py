"""The tables that turn tritonclient's (and through it grpc's), aiohttp's and onnxruntime's exceptions into ours:
every row, the order of the rows (none hides a later one), and what no row matches staying untranslated. The
foreign exceptions are the libraries' own, raised by real calls where a real call raises them (a closed loopback
port, a real onnxruntime session)."""

# covers: adapters/triton/client.py
# covers: handler/protocol/status.py

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import grpc
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors
from tritonclient.utils import InferenceServerException

from adapters.errors import (
    InternalError,
    InvalidInput,
    ModelNotReady,
    Unsupported,
    UpstreamError,
    UpstreamTimeout,
    V2Error,
)
from adapters.onnx.backend import LOAD_ERRORS, RUN_ERRORS, OnnxBackend, run_error
from adapters.triton.client import GRPC_STATUS_ERRORS, HTTP_STATUS_ERRORS, TritonClient, error_table
from adapters.triton.settings import TritonSettings
from tests.conftest import free_port
from tests.support import onnx_models

PROTOCOLS = ("http", "grpc")


def _client(protocol: str) -> TritonClient:
    return TritonClient(TritonSettings(url="127.0.0.1:1", protocol=protocol, request_timeout=2.5, retry_after=7))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_row_of_the_triton_table_hides_a_later_one(protocol: str) -> None:
    rows = [foreign for foreign, _ in error_table(protocol)]
    for index, later in enumerate(rows):
        for earlier in rows[:index]:
            assert not issubclass(later, earlier), f"{later} can never match: {earlier} comes first"


def test_no_row_of_the_onnxruntime_table_hides_a_later_one() -> None:
    rows = [foreign for foreign, _, _ in RUN_ERRORS]
    for index, later in enumerate(rows):
        assert not any(issubclass(later, earlier) for earlier in rows[:index]), later


def test_the_onnxruntime_tables_name_public_exceptions_of_onnxruntime() -> None:
    for foreign in (*[row[0] for row in RUN_ERRORS], *LOAD_ERRORS):
        assert not foreign.__name__.startswith("_")
        assert getattr(ort_errors, foreign.__name__) is foreign


#: Every row, and statuses of no row: Triton failing.
HTTP_ROWS = [*HTTP_STATUS_ERRORS.items(), ("500", UpstreamError), ("401", UpstreamError)]


@pytest.mark.parametrize(("status", "kind"), HTTP_ROWS, ids=[status for status, _ in HTTP_ROWS])
def test_tritonclient_http_errors_by_status(status: str, kind: type[V2Error]) -> None:
    error = _client("http").translate(InferenceServerException("Triton says no", status), "inference on 'm'")
    assert type(error) is kind
    assert error is not None and "Triton says no" in error.message


GRPC_ROWS = [*GRPC_STATUS_ERRORS.items(), ("INTERNAL", UpstreamError), ("RESOURCE_EXHAUSTED", UpstreamError)]


@pytest.mark.parametrize(("name", "kind"), GRPC_ROWS, ids=[name for name, _ in GRPC_ROWS])
def test_tritonclient_grpc_errors_by_status(name: str, kind: type[V2Error]) -> None:
    assert name in grpc.StatusCode.__members__
    error = _client("grpc").translate(InferenceServerException("Triton says no", f"StatusCode.{name}"), "a call")
    assert type(error) is kind


def test_the_words_of_each_kind() -> None:
    client = _client("http")
    said = {status: client.translate(InferenceServerException("Triton says no", status), "inference on 'm'")
            for status in ("400", "404", "501", "503", "500")}  # fmt: skip
    assert {status: error.message for status, error in said.items() if error is not None} == {
        "400": "Triton says no",
        "404": "Triton says no",
        "501": "Triton says no",
        "503": "Triton at 127.0.0.1:1 is unavailable (inference on 'm'): Triton says no",
        "500": "Triton failed inference on 'm': Triton says no",
    }
    assert said["503"] is not None and said["503"].retry_after == 7
    timeout = _client("grpc").translate(InferenceServerException("Deadline Exceeded", "StatusCode.DEADLINE_EXCEEDED"),
                                        "inference on 'm'")  # fmt: skip
    assert timeout is not None and timeout.message == "Triton did not answer inference on 'm' within 2.5 s"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tritonclient_refusing_a_call_itself_is_not_translated(protocol: str) -> None:
    """No status: tritonclient refused what it was given (here a version that is not a string), nothing Triton
    answered."""
    import tritonclient.grpc.aio as triton_grpc_aio

    async def refused() -> InferenceServerException:
        async with triton_grpc_aio.InferenceServerClient(f"127.0.0.1:{free_port()}") as client:
            with pytest.raises(InferenceServerException) as failed:
                await client.get_model_metadata("m", 1)
        return failed.value

    exc = asyncio.run(refused())
    assert exc.status() is None and exc.message() == "model version must be a string"
    assert _client(protocol).translate(exc, "metadata of 'm'") is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("exc", [KeyError("x"), ValueError("x"), RuntimeError("x"), OSError(2, "No such file")])
def test_exceptions_of_no_row_are_not_translated(protocol: str, exc: Exception) -> None:
    assert _client(protocol).translate(exc, "a call") is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_timeout_is_a_timeout(protocol: str) -> None:
    assert type(_client(protocol).translate(TimeoutError(), "a call")) is UpstreamTimeout


def test_aiohttps_timeouts_are_timeouts_before_they_are_connection_errors() -> None:
    """aiohttp's ServerTimeoutError is both a TimeoutError and a ClientConnectionError: the timeout row comes first."""
    for timeout in (aiohttp.ServerTimeoutError("read"), aiohttp.ConnectionTimeoutError("connect")):
        assert isinstance(timeout, aiohttp.ClientConnectionError)
        assert type(_client("http").translate(timeout, "a call")) is UpstreamTimeout


def test_a_closed_port_is_unavailable_over_aiohttp() -> None:
    async def connect() -> BaseException:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorError) as failed:
                await session.get(f"http://127.0.0.1:{free_port()}/v2/health/ready")
        return failed.value

    error = _client("http").translate(asyncio.run(connect()), "server readiness")
    assert type(error) is ModelNotReady
    assert error.message.startswith("Triton at 127.0.0.1:1 is unavailable (server readiness): cannot connect: ")


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (aiohttp.ServerDisconnectedError(), ModelNotReady, "the connection broke"),
        (aiohttp.ClientPayloadError("Response payload is not completed"), ModelNotReady, "its answer was cut short"),
    ],
)
def test_aiohttps_failures_by_type(exc: Exception, kind: type[V2Error], words: str) -> None:
    error = _client("http").translate(exc, "a call")
    assert type(error) is kind and error.message.endswith(words)


def test_a_grpc_error_by_its_code() -> None:
    """tritonclient's gRPC client raises grpc's error (here UNAVAILABLE: nothing listens) with its code's name."""
    import tritonclient.grpc.aio as triton_grpc_aio

    async def call() -> InferenceServerException:
        async with triton_grpc_aio.InferenceServerClient(f"127.0.0.1:{free_port()}") as client:
            with pytest.raises(InferenceServerException) as failed:
                await client.is_server_ready(client_timeout=10)
        return failed.value

    failure = asyncio.run(call())
    assert failure.status() == "StatusCode.UNAVAILABLE"
    error = _client("grpc").translate(failure, "server readiness")
    assert type(error) is ModelNotReady and error.message.endswith(f"(server readiness): {failure.message()}")


# -- onnxruntime ---------------------------------------------------------------------------------------------------


def _session(node: helper.NodeProto, inputs: list[tuple[str, int]], output: int) -> ort.InferenceSession:
    graph = helper.make_graph(
        [node],
        "failing",
        [helper.make_tensor_value_info(name, element, None) for name, element in inputs],
        [helper.make_tensor_value_info("OUTPUT0", output, None)],
    )
    model = helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _raised(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> Exception:
    with pytest.raises(Exception) as failed:
        session.run(None, feeds)
    assert isinstance(failed.value, Exception)
    return failed.value


def test_an_index_out_of_range_is_the_clients_error() -> None:
    session = _session(helper.make_node("Gather", ["DATA", "INDEX"], ["OUTPUT0"]),
                       [("DATA", TensorProto.FLOAT), ("INDEX", TensorProto.INT64)], TensorProto.FLOAT)  # fmt: skip
    exc = _raised(session, {"DATA": np.ones(4, np.float32), "INDEX": np.array([7])})
    assert isinstance(exc, ort_errors.InvalidArgument)
    error = run_error(exc, "gather")
    assert type(error) is InvalidInput
    assert error.message == (
        "model 'gather' rejected the input: Non-zero status code returned while running Gather node. Name:'' "
        "Status Message: indices element out of data bounds, idx=7 must be within the inclusive range [-4,3]"
    )


def test_a_reshape_the_data_does_not_fit_is_the_models_failure() -> None:
    session = _session(helper.make_node("Reshape", ["INPUT0", "SHAPE"], ["OUTPUT0"]),
                       [("INPUT0", TensorProto.FLOAT), ("SHAPE", TensorProto.INT64)], TensorProto.FLOAT)  # fmt: skip
    exc = _raised(session, {"INPUT0": np.ones(4, np.float32), "SHAPE": np.array([3, 3])})
    assert isinstance(exc, ort_errors.Fail)
    error = run_error(exc, "reshape")
    assert type(error) is InternalError
    assert error.message.startswith("model 'reshape' failed while running: ")
    assert "The input tensor cannot be reshaped to the requested shape. Input shape:{4}, requested shape:{3,3}" in (
        error.message
    )
    assert "onnxruntime_src" not in error.message and "::" not in error.message


def test_a_kernel_throwing_is_the_models_failure() -> None:
    session = _session(helper.make_node("Cast", ["INPUT0"], ["OUTPUT0"], to=TensorProto.FLOAT),
                       [("INPUT0", TensorProto.STRING)], TensorProto.FLOAT)  # fmt: skip
    exc = _raised(session, {"INPUT0": np.array(["not a number"], dtype=object)})
    assert isinstance(exc, ort_errors.RuntimeException)
    assert type(run_error(exc, "cast")) is InternalError


@pytest.mark.parametrize(
    ("foreign", "kind", "start"),
    [
        (ort_errors.NotImplemented, Unsupported, "model 'm' cannot run this request: "),
        (ort_errors.EPFail, InternalError, "model 'm' failed while running: "),
    ],
)
def test_rows_no_cpu_session_raises_at_run_time(foreign: type[Exception], kind: type[V2Error], start: str) -> None:
    error = run_error(foreign("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : no kernel for it"), "m")
    assert type(error) is kind and error.message == f"{start}no kernel for it"


@pytest.mark.parametrize("exc", [ValueError("x"), RuntimeError("x"), TypeError("x"), ort_errors.NoSuchFile("x")])
def test_other_exceptions_at_run_time_are_not_translated(exc: Exception) -> None:
    assert run_error(exc, "m") is None


def _identity(tmp_path: Path, name: str, element: int, opset: int = 21) -> OnnxBackend:
    graph = helper.make_graph([helper.make_node("Identity", ["X"], ["Y"])], name,
                              [helper.make_tensor_value_info("X", element, [1])],
                              [helper.make_tensor_value_info("Y", element, [1])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    return OnnxBackend(name, "1", onnx_models.save(model, tmp_path, name))


@pytest.mark.parametrize(
    ("element", "reason"),
    [
        (TensorProto.UINT4, "Could not find an implementation for Identity(21) node with name ''"),  # NotImplemented
        (TensorProto.COMPLEX64, "Load model from model.onnx failed:Exception during loading: MLDataType for: "
                                "tensor(complex64) is not currently registered or supported"),  # Fail
        (TensorProto.FLOAT8E4M3FN, "tensor 'X' has type tensor(float8e4m3fn), which V2 cannot carry"),  # ours
    ],
)  # fmt: skip
def test_a_model_that_cannot_load_says_why(tmp_path: Path, element: int, reason: str) -> None:
    backend = _identity(tmp_path, "m", element)
    backend.load()
    assert backend.error == f"model 'm' version 1 failed to load: {reason}"
    assert str(tmp_path) not in backend.error
