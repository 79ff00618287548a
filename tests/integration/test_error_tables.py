"""Foreign errors as a client meets them, row by row of the tables that translate them (adapters/triton/client.py,
adapters/onnx/backend.py): the status and message our REST API, our gRPC API and our gRPC stream answer.

Triton's rows against a real tritonserver (the pytriton tool venv's) with a model that fails with the error code its
request names, a slow model, and a model Triton does not have; forwarded over both Triton protocols. The transport's
rows against loopback ports: one where nothing listens, and servers that hang up, cut their answer short or do
not speak HTTP. onnxruntime's rows against ONNX models that fail at run time. An exception no row matches (a bug)
is 500 / INTERNAL with a generic message and an error id, whose log record has the exception.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from onnx import TensorProto, helper
from tritonclient.grpc import service_pb2, service_pb2_grpc

from adapters.onnx.backend import OnnxBackend
from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.triton.settings import TritonSettings
from adapters.types import InferCall, InferResult
from handler.protocol.dataplane import DataPlane
from tests.support import buggy_backend, onnx_models
from tests.support.in_process import InProcessServers
from tests.support.servers import HeldPort
from tests.support.triton_server import TritonServer, build_repository, python_model

pytestmark = pytest.mark.integration

FAILING_MODEL = Path(__file__).with_name("triton_models") / "failing_model.py"
FAILING_CONFIG = """max_batch_size: 0
input [ { name: "CODE", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
"""
ROUTES = "fails, slow=slow_iris, missing=not_on_triton, iris_gpu=iris"
REQUEST_TIMEOUT = 1.0  # slow_iris sleeps 2 s
GENERIC = re.compile(r"internal server error \(error id ([0-9a-f]{16})\); the server log has the details")


# -- our server: REST and gRPC over one data plane, as ``oip serve --grpc-port`` runs them ----------------------------


#: Where our REST API (``rest``: http://127.0.0.1:port) and gRPC API (``grpc``: 127.0.0.1:port) listen.
Ours = InProcessServers


def serve(repository: Path, triton: TritonSettings | None = None) -> InProcessServers:
    """Our REST API and gRPC API (on one event loop and data plane) over the ONNX models of ``repository`` and the
    Triton models of ``triton``; started by ``with``."""
    router = ModelRouter(ModelRepository(repository, lambda n, v, p, c: OnnxBackend(n, v, p, c)), triton)
    return InProcessServers(DataPlane(router))


@dataclass(frozen=True)
class Answers:
    """What one request gets through each of our transports."""

    rest_status: int
    rest_error: str
    rest_retry_after: str | None
    grpc_code: grpc.StatusCode
    grpc_details: str
    stream_error: str


def _rest_tensor(name: str, datatype: str, data: list[Any]) -> dict[str, Any]:
    return {"name": name, "shape": [len(data)], "datatype": datatype, "data": data}


def _grpc_request(model: str, inputs: list[dict[str, Any]]) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name=model)
    for tensor in inputs:
        added = request.inputs.add(name=tensor["name"], datatype=tensor["datatype"], shape=tensor["shape"])
        if tensor["datatype"] == "BYTES":
            added.contents.bytes_contents.extend(item.encode() for item in tensor["data"])
        elif tensor["datatype"] == "INT64":
            added.contents.int64_contents.extend(tensor["data"])
        else:
            added.contents.fp32_contents.extend(tensor["data"])
    return request


def infer_everywhere(ours: Ours, model: str, inputs: list[dict[str, Any]]) -> Answers:
    """One inference request, through our REST API, gRPC ModelInfer and gRPC ModelStreamInfer: each must fail."""
    response = httpx.post(f"{ours.rest}/v2/models/{model}/infer", json={"inputs": inputs}, timeout=30)
    assert response.status_code != 200, response.text
    request = _grpc_request(model, inputs)
    with grpc.insecure_channel(ours.grpc) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as failed:
            stub.ModelInfer(request, timeout=30)
        (streamed,) = list(stub.ModelStreamInfer(iter([request]), timeout=30))
    assert not streamed.HasField("infer_response")
    return Answers(
        response.status_code,
        response.json()["error"],
        response.headers.get("retry-after"),
        failed.value.code(),
        failed.value.details(),
        streamed.error_message,
    )


def metadata_everywhere(ours: Ours, model: str) -> tuple[int, str, grpc.StatusCode, str]:
    """Model metadata through REST and gRPC: (REST status, its error, gRPC code, its details); each must fail."""
    response = httpx.get(f"{ours.rest}/v2/models/{model}", timeout=30)
    assert response.status_code != 200, response.text
    with grpc.insecure_channel(ours.grpc) as channel, pytest.raises(grpc.RpcError) as failed:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelMetadata(
            service_pb2.ModelMetadataRequest(name=model), timeout=30
        )
    return response.status_code, response.json()["error"], failed.value.code(), failed.value.details()


def assert_same_message(answers: Answers, message: str) -> None:
    assert answers.rest_error == answers.grpc_details == answers.stream_error == message


# -- Triton's rows ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def failing_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """tritonserver with the forwarding tests' models and ``fails``, which answers the error code it is sent."""
    workdir = tmp_path_factory.mktemp("triton-errors")
    repository = build_repository(workdir / "models")
    python_model(repository, "fails", FAILING_MODEL, FAILING_CONFIG)
    server = TritonServer(repository, workdir)  # on ports held for it
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def empty_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("no-local-models")


def _triton_settings(url: str, protocol: str, **overrides: Any) -> TritonSettings:
    routes = TritonSettings.parse_routes(ROUTES)
    options: dict[str, Any] = {"request_timeout": REQUEST_TIMEOUT, "retries": 1, "backoff": 0.01, **overrides}
    return TritonSettings(url=url, protocol=protocol, routes=routes, **options)


@dataclass(frozen=True)
class Forwarding:
    ours: Ours
    protocol: str
    triton_url: str


@pytest.fixture(scope="module", params=["http", "grpc"])
def forwarding(request: pytest.FixtureRequest, failing_triton: TritonServer, empty_repository: Path) -> Iterator[
    Forwarding
]:  # fmt: skip
    """Our server forwarding to the failing Triton over ``OIP_TRITON_PROTOCOL`` http (REST inference passes
    through; gRPC's goes through tritonclient) or grpc."""
    url = failing_triton.http_url if request.param == "http" else failing_triton.grpc_url
    with serve(empty_repository, _triton_settings(url, request.param)) as ours:
        yield Forwarding(ours, request.param, url)


def _code(code: str) -> list[dict[str, Any]]:
    return [_rest_tensor("CODE", "BYTES", [code])]


#: Triton's error code (what ``fails`` answers) -> our REST status and gRPC code, one answer whichever protocol
#: forwards: Triton's HTTP statuses (HTTP_STATUS_ERRORS) and gRPC codes (GRPC_STATUS_ERRORS) agree row by row.
TRITON_ROWS = {
    "INVALID_ARG": (400, grpc.StatusCode.INVALID_ARGUMENT),
    "UNKNOWN": (400, grpc.StatusCode.INVALID_ARGUMENT),
    "ALREADY_EXISTS": (400, grpc.StatusCode.INVALID_ARGUMENT),
    "CANCELLED": (400, grpc.StatusCode.INVALID_ARGUMENT),
    "NOT_FOUND": (404, grpc.StatusCode.NOT_FOUND),
    "UNSUPPORTED": (501, grpc.StatusCode.UNIMPLEMENTED),
}


@pytest.mark.parametrize("triton_code", list(TRITON_ROWS))
def test_tritons_word_on_the_request_passes_on(forwarding: Forwarding, triton_code: str) -> None:
    answers = infer_everywhere(forwarding.ours, "fails", _code(triton_code))
    assert (answers.rest_status, answers.grpc_code) == TRITON_ROWS[triton_code]
    assert_same_message(answers, f"failed as asked: {triton_code}")
    assert answers.rest_retry_after is None


def test_triton_unavailable_is_503_with_retry_after(forwarding: Forwarding) -> None:
    answers = infer_everywhere(forwarding.ours, "fails", _code("UNAVAILABLE"))
    assert (answers.rest_status, answers.grpc_code) == (503, grpc.StatusCode.UNAVAILABLE)
    message = f"Triton at {forwarding.triton_url} is unavailable (inference on 'fails'): failed as asked: UNAVAILABLE"
    assert_same_message(answers, message)
    assert answers.rest_retry_after == "5"


def test_tritons_own_failure_is_502(forwarding: Forwarding) -> None:
    answers = infer_everywhere(forwarding.ours, "fails", _code("INTERNAL"))
    assert (answers.rest_status, answers.grpc_code) == (502, grpc.StatusCode.UNKNOWN)
    assert_same_message(answers, "Triton failed inference on 'fails': failed as asked: INTERNAL")


def test_a_model_triton_does_not_have_is_404_in_tritons_words(forwarding: Forwarding) -> None:
    message = "Request for unknown model: 'not_on_triton' is not found"
    assert metadata_everywhere(forwarding.ours, "missing") == (404, message, grpc.StatusCode.NOT_FOUND, message)
    answers = infer_everywhere(forwarding.ours, "missing", _code("NOT_FOUND"))
    assert (answers.rest_status, answers.grpc_code) == (404, grpc.StatusCode.NOT_FOUND)
    assert_same_message(answers, message)


def test_no_answer_within_the_timeout_is_504(forwarding: Forwarding) -> None:
    """Over HTTP, the timeout's own TimeoutError row; over gRPC, the call's deadline: DEADLINE_EXCEEDED's row."""
    answers = infer_everywhere(forwarding.ours, "slow", [{"name": "input", "shape": [1, 4], "datatype": "FP32",
                                                          "data": [5.1, 3.5, 1.4, 0.2]}])  # fmt: skip
    assert (answers.rest_status, answers.grpc_code) == (504, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert_same_message(answers, f"Triton did not answer inference on 'slow_iris' within {REQUEST_TIMEOUT} s")


def test_forwarded_inferences_leave_the_configured_headers_alone(forwarding: Forwarding) -> None:
    """tritonclient's HTTP client adds its binary body's header length to the headers dict it is given: a binary
    inference through tritonclient, then a pass-through one, both answer (the second sends no stale header)."""
    document = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
    request = _grpc_request("iris_gpu", document["inputs"])
    with grpc.insecure_channel(forwarding.ours.grpc) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for _ in range(2):
            assert stub.ModelInfer(request, timeout=30).model_name == "iris_gpu"
            response = httpx.post(f"{forwarding.ours.rest}/v2/models/iris_gpu/infer", json=document, timeout=30)
            assert response.status_code == 200, response.text


# -- the transport's rows: loopback ports ---------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_nothing_listening_is_503_and_not_ready(protocol: str, empty_repository: Path) -> None:
    nothing = HeldPort()  # bound, never listening, and given to no one else: connections are refused
    port = nothing.port
    with nothing, serve(empty_repository, _triton_settings(f"127.0.0.1:{port}", protocol, connect_timeout=1)) as ours:
        answers = infer_everywhere(ours, "fails", _code("INVALID_ARG"))
        status, error, code, details = metadata_everywhere(ours, "fails")
        ready = httpx.get(f"{ours.rest}/v2/health/ready", timeout=30)
        model_ready = httpx.get(f"{ours.rest}/v2/models/fails/ready", timeout=30)
        with grpc.insecure_channel(ours.grpc) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            grpc_ready = stub.ServerReady(service_pb2.ServerReadyRequest(), timeout=30).ready
            grpc_model_ready = stub.ModelReady(service_pb2.ModelReadyRequest(name="fails"), timeout=30).ready
    assert (answers.rest_status, answers.grpc_code, status, code) == (
        503, grpc.StatusCode.UNAVAILABLE, 503, grpc.StatusCode.UNAVAILABLE
    )  # fmt: skip
    assert answers.rest_retry_after == "5"
    prefix = f"Triton at 127.0.0.1:{port} is unavailable (inference on 'fails'): "
    assert answers.rest_error.startswith(prefix)
    assert answers.grpc_details.startswith(prefix) and answers.stream_error.startswith(prefix)
    assert error.startswith(f"Triton at 127.0.0.1:{port} is unavailable (metadata of 'fails'): ") and details == error
    if protocol == "http":
        assert answers.rest_error == f"{prefix}cannot connect: Connect call failed ('127.0.0.1', {port})"
    else:
        assert answers.rest_error.startswith(f"{prefix}failed to connect to all addresses")
    assert (ready.status_code, model_ready.status_code, grpc_ready, grpc_model_ready) == (400, 400, False, False)


class Misbehaving:
    """A loopback TCP server that reads each request's head, then answers ``reply`` (nothing: hangs up) and closes."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.url = f"127.0.0.1:{self.socket.getsockname()[1]}"
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(5)
                head = b""
                try:
                    while b"\r\n\r\n" not in head and (chunk := connection.recv(65536)) and len(head) < 1 << 20:
                        head += chunk
                    connection.sendall(self.reply)
                except OSError:
                    pass

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        self.socket.close()


#: What a server that is not a working Triton does -> (its reply, our REST status, our gRPC code, the words).
MISBEHAVIOURS = {
    "hangs up": (b"", 503, grpc.StatusCode.UNAVAILABLE, "the connection broke"),
    "cuts its answer short": (
        b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model_name"',
        503,
        grpc.StatusCode.UNAVAILABLE,
        "its answer was cut short",
    ),
    "does not speak HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n", 502, grpc.StatusCode.UNKNOWN, "its answer is not HTTP"),
}


@pytest.mark.parametrize("behaviour", list(MISBEHAVIOURS))
def test_aiohttp_failures_over_the_http_protocol(behaviour: str, empty_repository: Path) -> None:
    reply, status, code, words = MISBEHAVIOURS[behaviour]
    server = Misbehaving(reply)
    try:
        with serve(empty_repository, _triton_settings(server.url, "http")) as ours:
            answers = infer_everywhere(ours, "fails", _code("INVALID_ARG"))
    finally:
        server.close()
    assert (answers.rest_status, answers.grpc_code) == (status, code)
    what = "inference on 'fails'"
    if status == 503:
        assert_same_message(answers, f"Triton at {server.url} is unavailable ({what}): {words}")
    else:
        assert_same_message(answers, f"Triton failed {what}: {words}")


def test_a_server_that_is_not_grpc_is_unavailable_over_the_grpc_protocol(empty_repository: Path) -> None:
    server = Misbehaving(b"SSH-2.0-OpenSSH_9.6\r\n")
    try:
        with serve(empty_repository, _triton_settings(server.url, "grpc")) as ours:
            answers = infer_everywhere(ours, "fails", _code("INVALID_ARG"))
    finally:
        server.close()
    assert (answers.rest_status, answers.grpc_code) == (503, grpc.StatusCode.UNAVAILABLE)
    assert answers.rest_error.startswith(f"Triton at {server.url} is unavailable (inference on 'fails'): ")
    assert "Failed parsing HTTP/2" in answers.rest_error


def test_a_health_probe_that_gets_no_answer_is_not_ready(empty_repository: Path) -> None:
    """A port that accepts and never answers: the probe's wait (the TimeoutError row), over both protocols."""
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel completes the handshakes; nobody reads
    url = f"127.0.0.1:{silent.getsockname()[1]}"
    try:
        for protocol in ("http", "grpc"):
            with serve(empty_repository, _triton_settings(url, protocol, connect_timeout=0.5)) as ours:
                assert httpx.get(f"{ours.rest}/v2/health/ready", timeout=30).status_code == 400
                with grpc.insecure_channel(ours.grpc) as channel:
                    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
                    assert not stub.ServerReady(service_pb2.ServerReadyRequest(), timeout=30).ready
    finally:
        silent.close()


# -- onnxruntime's rows ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def failing_onnx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ours]:
    """ONNX models that fail at run time for some inputs: an index out of range, a reshape to a shape the data does
    not fit (both given by an input), a string that is not a number cast to FP32."""
    root = tmp_path_factory.mktemp("failing-onnx")
    vector = helper.make_tensor_value_info
    models = {
        "gather": ([helper.make_node("Gather", ["DATA", "INDEX"], ["OUTPUT0"])],
                   [vector("DATA", TensorProto.FLOAT, ["n"]), vector("INDEX", TensorProto.INT64, ["k"])]),
        "reshape": ([helper.make_node("Reshape", ["INPUT0", "SHAPE"], ["OUTPUT0"])],
                    [vector("INPUT0", TensorProto.FLOAT, ["n"]), vector("SHAPE", TensorProto.INT64, [2])]),
        "cast": ([helper.make_node("Cast", ["INPUT0"], ["OUTPUT0"], to=TensorProto.FLOAT)],
                 [vector("INPUT0", TensorProto.STRING, ["n"])]),
    }  # fmt: skip
    for name, (nodes, inputs) in models.items():
        output = vector("OUTPUT0", TensorProto.FLOAT, None)
        graph = helper.make_graph(nodes, name, inputs, [output])
        onnx_models.save(helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8), root, name)
    with serve(root) as ours:
        yield ours


ONNX_ROWS = {
    "index out of range: InvalidArgument": (
        "gather",
        [_rest_tensor("DATA", "FP32", [1.0, 2.0, 3.0, 4.0]), _rest_tensor("INDEX", "INT64", [7])],
        400,
        grpc.StatusCode.INVALID_ARGUMENT,
        "model 'gather' rejected the input: Non-zero status code returned while running Gather node. Name:'' Status "
        "Message: indices element out of data bounds, idx=7 must be within the inclusive range [-4,3]",
    ),
    "impossible reshape: Fail": (
        "reshape",
        [_rest_tensor("INPUT0", "FP32", [1.0, 2.0, 3.0, 4.0]), _rest_tensor("SHAPE", "INT64", [3, 3])],
        500,
        grpc.StatusCode.INTERNAL,
        "model 'reshape' failed while running: Non-zero status code returned while running Reshape node. Name:'' "
        "Status Message: The input tensor cannot be reshaped to the requested shape. Input shape:{4}, requested "
        "shape:{3,3}",
    ),
    "a kernel throwing: RuntimeException": (
        "cast",
        [_rest_tensor("INPUT0", "BYTES", ["not a number"])],
        500,
        grpc.StatusCode.INTERNAL,
        "model 'cast' failed while running: Non-zero status code returned while running Cast node. Name:'' Status "
        "Message: stod",
    ),
}


@pytest.mark.parametrize("row", list(ONNX_ROWS))
def test_onnxruntime_errors_at_run_time(failing_onnx: Ours, row: str) -> None:
    model, inputs, status, code, message = ONNX_ROWS[row]
    answers = infer_everywhere(failing_onnx, model, inputs)
    assert (answers.rest_status, answers.grpc_code) == (status, code)
    assert_same_message(answers, message)


def test_the_same_models_answer_inputs_they_fit(failing_onnx: Ours) -> None:
    inputs = [_rest_tensor("INPUT0", "FP32", [1.0, 2.0, 3.0, 4.0]), _rest_tensor("SHAPE", "INT64", [2, 2])]
    response = httpx.post(f"{failing_onnx.rest}/v2/models/reshape/infer", json={"inputs": inputs}, timeout=30)
    assert response.status_code == 200 and response.json()["outputs"][0]["shape"] == [2, 2]


# -- what no row matches: 500 / INTERNAL, generic, with an error id ------------------------------------------------


class BuggyBackend(buggy_backend.BuggyBackend):
    """A backend with a bug in each call: exceptions no table translates, readiness included."""

    async def ready(self) -> bool:
        raise ZeroDivisionError("secret readiness detail")

    async def infer(self, call: InferCall) -> InferResult:
        raise AttributeError("'NoneType' object has no attribute 'secret'")


def _logged(caplog: pytest.LogCaptureFixture, message: str) -> str:
    """The exception logged under the error id of ``message``, which must be the generic one."""
    found = GENERIC.fullmatch(message)
    assert found is not None, message
    (record,) = [r for r in caplog.records if found[1] in r.getMessage()]
    assert record.exc_info is not None
    return repr(record.exc_info[1])


def test_a_bug_is_500_and_internal_with_an_error_id_on_every_transport(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("buggy", "buggy_metadata"):
        onnx_models.save(onnx_models.identity("FP32", [1]), tmp_path, name)
    dataplane = DataPlane(ModelRepository(tmp_path, BuggyBackend))
    with InProcessServers(dataplane) as ours, caplog.at_level(logging.ERROR):
        answers = infer_everywhere(ours, "buggy", [_rest_tensor("x", "FP32", [1.0])])
        status, error, code, details = metadata_everywhere(ours, "buggy_metadata")
        model_ready = httpx.get(f"{ours.rest}/v2/models/buggy/ready", timeout=30)
        with grpc.insecure_channel(ours.grpc) as channel, pytest.raises(grpc.RpcError) as grpc_ready:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelReady(
                service_pb2.ModelReadyRequest(name="buggy"), timeout=30
            )
    assert (answers.rest_status, answers.grpc_code, status, code) == (
        500, grpc.StatusCode.INTERNAL, 500, grpc.StatusCode.INTERNAL
    )  # fmt: skip
    assert (model_ready.status_code, grpc_ready.value.code()) == (500, grpc.StatusCode.INTERNAL)
    messages = [answers.rest_error, answers.grpc_details, answers.stream_error, error, details,
                model_ready.json()["error"], grpc_ready.value.details()]  # fmt: skip
    for message in messages:
        assert "secret" not in message and "Error" not in message
        assert "secret" in _logged(caplog, message)
    assert len(set(messages)) == len(messages)  # an error id per failure


def test_tritonclient_failing_in_a_way_no_row_knows_is_a_bug(
    empty_repository: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Triton URL written with a scheme: tritonclient's HTTP client fails to build itself (it refuses the URL, by
    raising an exception its module never imported). No row matches: 500 / INTERNAL with an error id."""
    settings = _triton_settings("http://127.0.0.1:1", "http", passthrough=False)
    with serve(empty_repository, settings) as ours, caplog.at_level(logging.ERROR):
        answers = infer_everywhere(ours, "fails", _code("INVALID_ARG"))
        status, error, code, details = metadata_everywhere(ours, "fails")
    assert (answers.rest_status, answers.grpc_code, status, code) == (
        500, grpc.StatusCode.INTERNAL, 500, grpc.StatusCode.INTERNAL
    )  # fmt: skip
    for message in (answers.rest_error, answers.grpc_details, answers.stream_error, error, details):
        assert "scheme" not in message and "raise_error" not in message
        assert "raise_error" in _logged(caplog, message) or "scheme" in _logged(caplog, message)
