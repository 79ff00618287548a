"""The request decoder's strategies, each against the reference (orjson, pydantic, numpy), side by side in one run.

    python -m bench.bench_json_decode [--repeat N] [--http]

1. In process: each request decoded by the reference decoder (``RequestDecoder(())``), by one with only the
   strategy that request is for, and by the process's decoder (every strategy); the calls alternate, so a noisy
   machine weighs on all alike. p50 in ms and the ratio to the reference.
2. With ``--http``: the infer p50 over HTTP against two ``oip serve --workers 1`` processes, one with the process's
   decoder and one with the reference decoder, requests alternating between the two.
"""

from __future__ import annotations

import argparse
import http.client
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import orjson

from bench.common import wait_until_live
from handler.codecs.json_numeric import MIN_FAST_BYTES
from handler.codecs.request import STRATEGIES, RequestDecoder, Strategy

LIMIT = 1 << 30

_SERVE = (
    "import sys\n"
    "import handler.codecs.request as request\n"
    "from handler.cli import main\n"
    "if sys.argv[1] == 'reference': request.DECODER = request.RequestDecoder(())\n"
    "sys.exit(main(['serve', '--workers', '1', '--port', sys.argv[2], '--no-access-log', '--log-level', 'warning']))"
)


def _json(name: str, datatype: str, array: np.ndarray, nested: bool = False) -> tuple[bytes, None]:
    data = array.tolist() if nested else array.ravel().tolist()
    body = {"inputs": [{"name": name, "shape": list(array.shape), "datatype": datatype, "data": data}]}
    return orjson.dumps(body), None


def _binary(name: str, datatype: str, array: np.ndarray, request_id: str | None = None) -> tuple[bytes, int]:
    """A binary-extension body as tritonclient writes it (a leading id, one output asked for in binary)."""
    header = {
        **({"id": request_id} if request_id is not None else {}),
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": datatype,
                "parameters": {"binary_data_size": array.nbytes},
            }
        ],
        "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
    }
    head = orjson.dumps(header)
    return head + array.tobytes(), len(head)


def _alternating(functions: list[Callable[[], object]], repeat: int) -> list[float]:
    """p50 of each of ``functions`` in ms, their calls interleaved."""
    for _ in range(20):
        for function in functions:
            function()
    samples: list[list[float]] = [[] for _ in functions]
    for _ in range(repeat):
        for index, function in enumerate(functions):
            start = time.perf_counter()
            function()
            samples[index].append((time.perf_counter() - start) * 1000)
    return [statistics.median(times) for times in samples]


def in_process(repeat: int) -> None:
    rng = np.random.default_rng(0)
    image = rng.random((1, 3, 224, 224), dtype=np.float32)
    iris = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    simple = {
        "id": "simple",
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
        ],
    }
    cases: list[tuple[Strategy, str, tuple[bytes, int | None]]] = [
        (Strategy.HEADER_PLANS, "1x4 FP32 binary", _binary("input", "FP32", iris, "1")),
        (Strategy.HEADER_PLANS, "1x3x224x224 FP32 binary", _binary("image", "FP32", image, "1")),
        (Strategy.JSON_SIMD, "1x3x224x224 FP32 JSON nested", _json("image", "FP32", image, nested=True)),
        (Strategy.JSON_SIMD, "1x3x224x224 FP32 JSON flat", _json("image", "FP32", image)),
        (
            Strategy.JSON_SIMD,
            "1x150528 INT64 JSON flat",
            _json("x", "INT64", rng.integers(-(2**62), 2**62, (1, 150528))),
        ),
        (Strategy.PLAIN_ENVELOPE, "1x4 FP32 JSON", _json("input", "FP32", iris)),
        (Strategy.PLAIN_ENVELOPE, "2x 1x16 INT32 JSON", (orjson.dumps(simple), None)),
        (Strategy.PLAIN_ENVELOPE, "1x4 FP32 binary", _binary("input", "FP32", iris, "1")),
    ]
    reference, every = RequestDecoder(()), RequestDecoder(STRATEGIES)
    print("1. decode in process: p50 ms (ratio to the reference)")
    print(f"   {'strategy':15s} {'request':30s} {'reference':>9s} {'strategy':>17s} {'every strategy':>17s}")
    for strategy, label, (body, length) in cases:
        alone = RequestDecoder({strategy})
        times = _alternating(
            [lambda d=decoder, b=body, n=length: d.decode(b, n, LIMIT) for decoder in (reference, alone, every)],
            repeat if len(body) > 4096 else repeat * 25,
        )
        ref, one, all_ = times
        ratios = f"{one:9.4f} ({one / ref:4.2f}x) {all_:9.4f} ({all_ / ref:4.2f}x)"
        print(f"   {strategy.value:15s} {label:30s} {ref:9.4f} {ratios}")


def simd_threshold(repeat: int) -> None:
    """``json_simd`` forced onto texts below its threshold (``json_numeric.MIN_FAST_BYTES``), beside the plain
    envelope in both: where the crossing with orjson lies."""
    rng = np.random.default_rng(0)
    orjson_path = RequestDecoder({Strategy.PLAIN_ENVELOPE})
    simd_path = RequestDecoder({Strategy.PLAIN_ENVELOPE, Strategy.JSON_SIMD}, simd_min_bytes=0)
    print(f"   json_simd by text length (its threshold: {MIN_FAST_BYTES} bytes): p50 ms, orjson / simdjson")
    for count in (500, 2000, 4000, 8000):
        body, _ = _json("x", "FP32", rng.random(count, dtype=np.float32))
        orjson_ms, simd_ms = _alternating(
            [lambda d=decoder, b=body: d.decode(b, None, LIMIT) for decoder in (orjson_path, simd_path)], repeat * 10
        )
        print(
            f"   {len(body):8d} bytes  orjson {orjson_ms:7.4f}  simdjson {simd_ms:7.4f}  ({simd_ms / orjson_ms:4.2f}x)"
        )


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _server(kind: str) -> Iterator[http.client.HTTPConnection]:
    """``oip serve`` with the process's decoder (``every``) or the reference (``reference``); one keep-alive
    connection to it."""
    port = _port()
    with subprocess.Popen([sys.executable, "-c", _SERVE, kind, str(port)]) as process:
        try:
            wait_until_live(f"http://127.0.0.1:{port}", process, f"the {kind} server")
            yield http.client.HTTPConnection("127.0.0.1", port)
        finally:
            process.terminate()


def _post(connection: http.client.HTTPConnection, model: str, body: bytes, length: int | None) -> None:
    headers = {"Content-Type": "application/json" if length is None else "application/octet-stream"}
    if length is not None:
        headers["Inference-Header-Content-Length"] = str(length)
    connection.request("POST", f"/v2/models/{model}/infer", body=body, headers=headers)
    response = connection.getresponse()
    payload = response.read()
    assert response.status == 200, payload


def over_http(repeat: int) -> None:
    rng = np.random.default_rng(0)
    image = rng.random((1, 3, 224, 224), dtype=np.float32)
    iris = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    print("2. infer p50 over HTTP, oip serve --workers 1: ms (ratio to the reference)")
    with _server("every") as every, _server("reference") as reference:
        for label, model, (body, length), times in (
            ("1x4 FP32 JSON", "iris", _json("input", "FP32", iris), repeat * 20),
            ("1x4 FP32 binary", "iris", _binary("input", "FP32", iris, "1"), repeat * 20),
            ("1x3x224x224 FP32 JSON flat", "tiny_image", _json("image", "FP32", image), repeat),
        ):
            ours, theirs = _alternating(
                [
                    lambda b=body, n=length, m=model: _post(every, m, b, n),
                    lambda b=body, n=length, m=model: _post(reference, m, b, n),
                ],
                times,
            )
            print(f"   {label:30s} every strategy {ours:7.3f}  reference {theirs:7.3f}  ({ours / theirs:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--http", action="store_true", help="also the infer p50 over HTTP")
    args = parser.parse_args()
    in_process(args.repeat)
    simd_threshold(args.repeat)
    if args.http:
        over_http(args.repeat)


if __name__ == "__main__":
    main()
