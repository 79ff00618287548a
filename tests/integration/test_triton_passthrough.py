"""Pass-through forwarding against a real tritonserver: the same answers, byte for byte, as the tritonclient
path (``OIP_TRITON_PASSTHROUGH=0``), the same statuses under Triton faults, and requests that need decoding
kept on the tritonclient path."""

# covers: handler/codecs/passthrough_answer.py

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import orjson
import pytest
import tritonclient.http as triton_http

from adapters.onnx.backend import OnnxBackend
from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.triton.passthrough import Forwarded, TritonPassthrough
from adapters.triton.settings import TritonSettings
from handler.config.settings import DEMO_REPOSITORY
from handler.protocol.dataplane import DataPlane
from handler.rest.app import create_app
from tests.support.servers import LiveServer, wait_for
from tests.support.triton_server import TritonServer, build_repository

pytestmark = pytest.mark.integration
ROUTES = "iris_gpu=iris, slow=slow_iris, simple, identity_bytes, pinned=iris:1"
ROWS = np.random.default_rng(0).random((3, 4)).astype(np.float32)


@dataclass
class Served:
    """Our server in front of Triton, with the number of calls its pass-through made."""

    server: LiveServer
    passthrough: TritonPassthrough | None
    calls: list[str]

    @property
    def url(self) -> str:
        return f"http://{self.server.url}"


def _serve(triton: TritonServer, passthrough: bool, **settings: object) -> Served:
    options = {
        "url": triton.http_url,
        "routes": TritonSettings.parse_routes(ROUTES),
        "request_timeout": 10.0,
        "retries": 1,
        "passthrough": passthrough,
        **settings,
    }
    repository = ModelRepository(DEMO_REPOSITORY, lambda n, v, p, c: OnnxBackend(n, v, p, c))
    router = ModelRouter(repository, TritonSettings(**options))  # type: ignore[arg-type]
    calls: list[str] = []
    if router.passthrough is not None:
        forward = router.passthrough.forward

        async def counted(model: str, version: str, body: bytes, headers: dict[str, str]) -> Forwarded:
            calls.append(model)
            return await forward(model, version, body, headers)

        router.passthrough.forward = counted  # type: ignore[method-assign]
    server = LiveServer(create_app(DataPlane(router)))
    server.start()
    return Served(server, router.passthrough, calls)


@pytest.fixture(scope="module")
def servers(triton: TritonServer) -> Iterator[tuple[Served, Served]]:
    """(pass-through, tritonclient path), both in front of the same Triton."""
    new, old = _serve(triton, True), _serve(triton, False)
    assert new.passthrough is not None and old.passthrough is None
    yield new, old
    new.server.stop()
    old.server.stop()


def _binary(inputs: list[triton_http.InferInput], outputs: list[triton_http.InferRequestedOutput] | None = None,
            request_id: str = "") -> tuple[bytes, dict[str, str]]:  # fmt: skip
    body, length = triton_http.InferenceServerClient.generate_request_body(inputs, outputs, request_id=request_id)
    return body, ({"Inference-Header-Content-Length": str(length)} if length is not None else {})


def _headers(answer: httpx.Response) -> dict[str, str | None]:
    """The headers that describe the answer (not Date)."""
    kept = ("content-type", "content-length", "content-encoding", "inference-header-content-length", "retry-after")
    return {key: answer.headers.get(key) for key in kept}


def _without_id(answer: httpx.Response) -> tuple[int, object, bytes]:
    """Status, JSON part without its id, and binary part of an answer."""
    length = answer.headers.get("inference-header-content-length")
    head = answer.content[: int(length)] if length else answer.content
    return answer.status_code, {**orjson.loads(head), "id": None}, answer.content[len(head) :]


def _input(name: str, array: np.ndarray, datatype: str, binary: bool) -> triton_http.InferInput:
    item = triton_http.InferInput(name, list(array.shape), datatype)
    item.set_data_from_numpy(array, binary_data=binary)
    return item


def _json(document: dict[str, object]) -> tuple[bytes, dict[str, str]]:
    return orjson.dumps(document), {"Content-Type": "application/json"}


IRIS_JSON = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
TEXT = np.array(["naïve".encode(), b"x", b""], dtype=object)
LARGE_TEXT = np.array([bytes(range(256)) * 400, b"y"], dtype=object)  # a body of many TCP segments
INTS = (np.arange(16, dtype=np.int32).reshape(1, 16), np.full((1, 16), 3, np.int32))
CASES: dict[str, tuple[str, tuple[bytes, dict[str, str]]]] = {
    "fp32 json": ("iris_gpu", _json({"id": "a", **IRIS_JSON})),
    "fp32 json, outputs named, classification": ("pinned", _json({
        "id": "b", **IRIS_JSON, "outputs": [{"name": "label"}, {"name": "probabilities",
                                                                "parameters": {"classification": 2}}]})),
    "fp32 binary, outputs binary": ("iris_gpu", _binary([_input("input", ROWS, "FP32", True)], request_id="c")),
    "fp32 binary in, mixed outputs": ("iris_gpu", _binary(
        [_input("input", ROWS, "FP32", True)],
        [triton_http.InferRequestedOutput("label", binary_data=False),
         triton_http.InferRequestedOutput("probabilities", binary_data=True)], request_id="d")),
    "multi-input int32, binary and json": ("simple", _binary(
        [_input("INPUT0", INTS[0], "INT32", True), _input("INPUT1", INTS[1], "INT32", False)], request_id="e")),
    "multi-input int32 json": ("simple", _binary(
        [_input("INPUT0", INTS[0], "INT32", False), _input("INPUT1", INTS[1], "INT32", False)], request_id="f")),
    "bytes binary": ("identity_bytes", _binary([_input("INPUT0", TEXT, "BYTES", True)], request_id="g")),
    "bytes binary, 100 KB body": ("identity_bytes", _binary(
        [_input("INPUT0", LARGE_TEXT, "BYTES", True)], request_id="g2")),
    "bytes json": ("identity_bytes", _json(
        {"id": "h", "inputs": [{"name": "INPUT0", "shape": [3], "datatype": "BYTES", "data": ["naïve", "x", ""]}]})),
    "triton's 400 (wrong shape)": ("iris_gpu", _json(
        {"id": "i", "inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]})),
    "unknown input": ("iris_gpu", _json(
        {"inputs": [{"name": "nope", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})),
}  # fmt: skip


@pytest.mark.parametrize("accept", ["identity", "gzip"])
@pytest.mark.parametrize("case", list(CASES))
def test_passthrough_answers_byte_identical(servers: tuple[Served, Served], case: str, accept: str) -> None:
    new, old = servers
    model, (body, headers) = CASES[case]
    headers = {**headers, "Accept-Encoding": accept}
    before = len(new.calls)
    answers = [httpx.post(f"{s.url}/v2/models/{model}/infer", content=body, headers=headers) for s in (new, old)]
    assert len(new.calls) == before + 1, "the pass-through path was not taken"
    assert answers[0].status_code == answers[1].status_code, (answers[0].text, answers[1].text)
    assert answers[0].content == answers[1].content
    assert _headers(answers[0]) == _headers(answers[1])


def test_answer_without_id_gets_one_and_names_the_local_model(servers: tuple[Served, Served]) -> None:
    new, _ = servers
    before = len(new.calls)
    answer = httpx.post(f"{new.url}/v2/models/iris_gpu/infer", json=IRIS_JSON)
    assert len(new.calls) == before + 1 and answer.status_code == 200
    document = answer.json()
    assert document["model_name"] == "iris_gpu" and document["model_version"] == "1" and len(document["id"]) == 36
    assert [o["name"] for o in document["outputs"]] == ["probabilities", "label"]
    session = ort.InferenceSession(DEMO_REPOSITORY / "iris" / "1" / "model.onnx", providers=["CPUExecutionProvider"])
    rows = np.asarray(IRIS_JSON["inputs"][0]["data"], np.float32).reshape(IRIS_JSON["inputs"][0]["shape"])
    probabilities, labels = session.run(["probabilities", "label"], {"input": rows})
    assert np.allclose(document["outputs"][0]["data"], probabilities.ravel(), rtol=1e-6, atol=1e-7)
    assert document["outputs"][1]["data"] == labels.ravel().tolist()


def test_tritonclient_through_the_passthrough_matches_triton_direct(
    servers: tuple[Served, Served], triton: TritonServer
) -> None:
    new, _ = servers
    direct = triton_http.InferenceServerClient(triton.http_url).infer("iris", [_input("input", ROWS, "FP32", True)])
    ours = triton_http.InferenceServerClient(new.server.url)
    for binary in (True, False):
        result = ours.infer("iris_gpu", [_input("input", ROWS, "FP32", binary)], request_id="z")
        for name in ("probabilities", "label"):
            assert np.array_equal(result.as_numpy(name), direct.as_numpy(name))
        assert result.get_response()["model_name"] == "iris_gpu"


NEEDS_DECODING: dict[str, tuple[bytes, dict[str, str]]] = {
    "content type": _json({"inputs": [{**IRIS_JSON["inputs"][0], "parameters": {"content_type": "np"}}]}),  # type: ignore[dict-item]
    "gzip body": (gzip.compress(orjson.dumps(IRIS_JSON)), {"Content-Encoding": "gzip"}),
    "raw binary": (ROWS[:1].tobytes(), {"Inference-Header-Content-Length": "0"}),
    "null for NaN": _json({"inputs": [{**IRIS_JSON["inputs"][0], "data": [None, 3.5, 1.4, 0.2]}]}),  # type: ignore[dict-item]
    "malformed json": (b'{"inputs": [', {"Content-Type": "application/json"}),
}


@pytest.mark.parametrize("case", list(NEEDS_DECODING))
def test_requests_needing_decoding_take_the_tritonclient_path(servers: tuple[Served, Served], case: str) -> None:
    new, old = servers
    body, headers = NEEDS_DECODING[case]
    before = len(new.calls)
    answers = [httpx.post(f"{s.url}/v2/models/iris_gpu/infer", content=body, headers=headers) for s in (new, old)]
    assert len(new.calls) == before, "a request that needs decoding was passed through"
    assert answers[0].status_code == answers[1].status_code
    assert _without_id(answers[0]) == _without_id(answers[1])  # no id in these requests: each answers a UUID


def test_slow_model_gives_504_on_both_paths(triton: TritonServer) -> None:
    served = [_serve(triton, passthrough, request_timeout=0.5) for passthrough in (True, False)]
    try:
        answers = [httpx.post(f"{s.url}/v2/models/slow/infer", json=IRIS_JSON, timeout=30) for s in served]
        assert len(served[0].calls) == 1
        assert [a.status_code for a in answers] == [504, 504]
        assert answers[0].content == answers[1].content
    finally:
        for s in served:
            s.server.stop()


def test_triton_down_gives_503_on_both_paths_then_recovers(tmp_path: Path) -> None:
    triton = TritonServer(build_repository(tmp_path / "models"), tmp_path)
    triton.start()
    served = [_serve(triton, passthrough, retries=0) for passthrough in (True, False)]

    def statuses() -> list[httpx.Response]:
        return [httpx.post(f"{s.url}/v2/models/iris_gpu/infer", json=IRIS_JSON, timeout=30) for s in served]

    try:
        assert [a.status_code for a in statuses()] == [200, 200]
        triton.stop()
        down = statuses()
        assert [a.status_code for a in down] == [503, 503], [a.text for a in down]
        assert [a.headers["retry-after"] for a in down] == ["5", "5"]
        assert all("unavailable" in a.json()["error"] for a in down)
        triton.start()
        wait_for(triton.answers_iris, "tritonserver did not answer after its restart", timeout=60)
        assert [a.status_code for a in statuses()] == [200, 200]
        assert len(served[0].calls) == 3
    finally:
        for s in served:
            s.server.stop()
        triton.close()
