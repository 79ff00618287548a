"""REST limits against ``oip serve`` on 127.0.0.1: a request naming more inputs or outputs than allowed is refused
before anything is converted (a fraction of a CPU second of the server's, gzipped or not, without holding other
requests up), and a gzip body may hold several members but nothing after them, each member and their sum within
OIP_MAX_BODY_BYTES. The server is started with a 6 MiB limit (``--max-body-bytes``; ``oip serve``'s default is
64 MiB), which the bodies below are sized against. What the server spends is read as its CPU time, which neighbours
on the machine do not inflate, never as wall-clock time."""

# covers: handler/codecs/bounds.py

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.iris_requests import IRIS_REQUEST, iris_answers, normal_requests
from tests.support.servers import OipServer, oip_serve, wait_for

MiB = 1 << 20
#: The largest body the server under test accepts, after decompression.
LIMIT = 6 * MiB
#: 80,000 copies of one input: a 5.9 MB body (under LIMIT), 20 KB gzipped.
ENTRY = {"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}
MANY_INPUTS = ('{"inputs":[' + ",".join([json.dumps(ENTRY, separators=(",", ":"))] * 80_000) + "]}").encode()


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    # The limits, not the admission, are under test: iris's gate measures a request's time in the worker, which the
    # refused bodies' reads lengthen on a loaded machine, so its queueing target is set out of the way.
    env = {"OIP_ADMISSION_TARGET_MS": "60000"}
    with oip_serve("--max-body-bytes", str(LIMIT), workers=1, log_level="warning", env=env) as served:
        yield served


def _post(server: OipServer, body: bytes, **headers: str) -> tuple[httpx.Response, float]:
    """The answer, and the server's CPU seconds while it was made."""
    cpu = server.cpu_seconds()
    response = httpx.post(f"{server.url}/v2/models/iris/infer", content=body, headers=headers, timeout=60)
    return response, server.cpu_seconds() - cpu


def test_80000_inputs_are_refused_before_any_is_converted(server: OipServer) -> None:
    assert len(MANY_INPUTS) < LIMIT
    response, cpu = _post(server, MANY_INPUTS, **{"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json() == {"error": "the request names 80000 inputs; model 'iris' has 1 input"}
    assert cpu < 1  # 2.4 s when every input was converted first; tens of ms now


def test_gzipped_80000_inputs_are_refused_as_cheaply(server: OipServer) -> None:
    """With a request-level content type (which may map several inputs onto one), the server's cap applies."""
    body = gzip.compress(b'{"parameters":{"content_type":"pd"},' + MANY_INPUTS[1:])
    assert len(body) < 32 * 1024
    response, cpu = _post(server, body, **{"content-encoding": "gzip"})
    assert response.status_code == 400
    assert response.json() == {
        "error": "the request names 80000 inputs; at most 1024 are accepted (OIP_MAX_REQUEST_TENSORS)"
    }
    assert cpu < 1


def test_four_at_once_do_not_hold_a_normal_request_up(server: OipServer) -> None:
    cpu = server.cpu_seconds()
    with normal_requests(server.url), ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: _post(server, MANY_INPUTS)[0].status_code, range(4)))
    assert answers == [400] * 4
    assert server.cpu_seconds() - cpu < 2  # 6.4 s on the event loop when the inputs were converted


def test_a_large_json_text_is_walked_off_the_event_loop(server: OipServer) -> None:
    """6 MB of ``{}`` under a key the envelope ignores: no count bounds it, and walking it takes about a second of
    Python. Once the server has read both of two such bodies (its ``rchar`` in /proc), a normal request is answered
    while neither of them is: they are walked off the event loop."""
    body = b'{"inputs":[' + json.dumps(ENTRY).encode() + b'],"extra":[' + b",".join([b"{}"] * 2_000_000) + b"]}"
    assert len(body) < LIMIT
    before = _read_bytes(server.pid)
    with ThreadPoolExecutor(2) as pool:
        posts = [pool.submit(lambda: _post(server, body)[0].status_code) for _ in range(2)]
        wait_for(lambda: _read_bytes(server.pid) - before >= 2 * len(body), "the server read both bodies")
        assert not any(post.done() for post in posts)
        iris_answers(server.url)
        assert not any(post.done() for post in posts), "a normal request waited for the texts to be walked"
        assert [post.result() for post in posts] == [200, 200]


def _read_bytes(pid: int) -> int:
    """The bytes process ``pid`` has read (``rchar``: files and sockets alike)."""
    with open(f"/proc/{pid}/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith("rchar:"))


def test_more_inputs_or_outputs_than_the_model_has(server: OipServer) -> None:
    """Counted against the model before the data: 65 inputs (past MODEL_COUNTS_FROM) of 10,000 numbers each, for a
    one-input model. A few too many are decoded and named in the answer."""
    entry = {"shape": [2_500, 4], "datatype": "FP32", "data": [0.5] * 10_000}
    body = json.dumps({"inputs": [{"name": f"input{n}", **entry} for n in range(65)]}).encode()
    response, cpu = _post(server, body)
    assert response.status_code == 400, response.text
    assert response.json() == {"error": "the request names 65 inputs; model 'iris' has 1 input"}
    assert cpu < 1
    outputs = [{"name": f"output{n}"} for n in range(65)]
    response, _ = _post(server, json.dumps({**IRIS_REQUEST, "outputs": outputs}).encode())
    assert response.json() == {"error": "the request names 65 outputs; model 'iris' has 2 outputs"}
    response, _ = _post(server, json.dumps({"inputs": IRIS_REQUEST["inputs"] * 2}).encode())
    assert response.json() == {"error": "input 'input' is given twice"}


def test_gzip_members_each_and_together_within_the_limit(server: OipServer) -> None:
    document = json.dumps(IRIS_REQUEST).encode()
    half = len(document) // 2
    response, _ = _post(
        server, gzip.compress(document[:half]) + gzip.compress(document[half:]), **{"content-encoding": "gzip"}
    )
    assert response.status_code == 200, response.text  # two members, as RFC 1952 allows

    valid = gzip.compress(document)
    response, _ = _post(server, valid + b"trailing garbage", **{"content-encoding": "gzip"})
    assert response.status_code == 400
    assert response.json() == {"error": "gzip body has 16 bytes after its compressed data"}

    bomb = gzip.compress(bytes(512 * MiB))  # 0.5 MB that expands to 512 MiB
    peak = server.peak_rss()
    response, cpu = _post(server, valid + bomb, **{"content-encoding": "gzip"})
    assert response.status_code == 413 and "(decompressed)" in response.json()["error"]
    assert cpu < 1
    member = gzip.compress(bytes(LIMIT * 2 // 3))
    response, _ = _post(server, member, **{"content-encoding": "gzip"})
    assert response.status_code == 400, response.text  # one member is within the limit (and is no JSON)
    response, _ = _post(server, member * 2, **{"content-encoding": "gzip"})
    assert response.status_code == 413  # each member is within the limit, their sum is not
    assert "(decompressed)" in response.json()["error"]
    assert server.peak_rss() - peak < 64 * MiB  # never more than the limit decompressed


def test_memory_returns_after_failed_large_requests(server: OipServer) -> None:
    iris_answers(server.url)
    before = server.rss()
    for _ in range(10):
        assert _post(server, MANY_INPUTS)[0].status_code == 400
    # Freed once each request's handler has returned, which may be just after its answer went out; glibc keeps up
    # to 64 MiB of freed memory (OIP_MALLOC_KEEP_MB).
    wait_for(lambda: server.rss() - before < 128 * MiB, "memory did not return", timeout=10)
