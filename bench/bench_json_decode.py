"""JSON tensor decoding, simdjson path (``handler/codecs/json_numeric.py``) vs the orjson + numpy path, in one run.

    python -m bench.bench_json_decode [--repeat N]

1. Decode of a 1x3x224x224 FP32 JSON request (nested and flat ``data``) in process: simdjson against orjson, plus
   the floor ``orjson.loads`` + ``np.asarray`` and simdjson's parse alone; INT64 and the 1x4 request for scale.
2. The image JSON infer p50 over HTTP against two ``oip serve --workers 1`` processes, one with the simdjson path
   and one with it switched off (its threshold set above any body); the requests alternate between the two so that
   a noisy machine weighs on both alike. The 1x4 JSON request (under the threshold: orjson on both) as control.
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
import simdjson

from bench.common import p50_ms, wait_until_live
from handler.codecs.request import decode_infer_document, decode_infer_request, load_json_object

_SERVE = (
    "import sys, handler.codecs.json_numeric as fast; from handler.cli import main\n"
    "if sys.argv[1] == 'old': fast.MIN_FAST_BYTES = 1 << 62\n"
    "sys.exit(main(['serve', '--workers', '1', '--port', sys.argv[2], '--no-access-log', '--log-level', 'warning']))"
)


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _server(kind: str) -> Iterator[http.client.HTTPConnection]:
    """``oip serve`` with the new (``new``) or old (``old``) JSON decoder; one keep-alive connection to it."""
    port = _port()
    with subprocess.Popen([sys.executable, "-c", _SERVE, kind, str(port)]) as process:
        try:
            wait_until_live(f"http://127.0.0.1:{port}", process, f"the {kind} server")
            yield http.client.HTTPConnection("127.0.0.1", port)
        finally:
            process.terminate()


def _post(connection: http.client.HTTPConnection, model: str, body: bytes) -> None:
    connection.request("POST", f"/v2/models/{model}/infer", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    payload = response.read()
    assert response.status == 200, payload


def _alternating(new: Callable[[], object], old: Callable[[], object], repeat: int) -> tuple[float, float]:
    """p50 of ``new`` and ``old`` in ms, their calls interleaved."""
    for _ in range(5):
        new(), old()
    samples: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(repeat):
        for index, function in enumerate((new, old)):
            start = time.perf_counter()
            function()
            samples[index].append((time.perf_counter() - start) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


def _request(name: str, datatype: str, array: np.ndarray, nested: bool) -> bytes:
    data = array.tolist() if nested else array.ravel().tolist()
    return orjson.dumps({"inputs": [{"name": name, "shape": list(array.shape), "datatype": datatype, "data": data}]})


def _old_decode(body: bytes) -> object:
    return decode_infer_document(load_json_object(body), None, 1 << 30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    image = rng.random((1, 3, 224, 224), dtype=np.float32)
    iris = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)

    print("1. decode in process (p50 ms; new / old)")
    cases = {
        "image FP32 nested": _request("image", "FP32", image, True),
        "image FP32 flat": _request("image", "FP32", image, False),
        "1x150528 INT64 flat": _request("x", "INT64", rng.integers(-(2**62), 2**62, (1, 150528)), False),
        "1x4 FP32 (under the threshold)": _request("input", "FP32", iris, False),
    }
    for label, body in cases.items():
        repeat = args.repeat if len(body) > 1000 else args.repeat * 50
        new, old = _alternating(
            lambda b=body: decode_infer_request(b, None, 1 << 30), lambda b=body: _old_decode(b), repeat
        )
        print(f"   {label:32s} new {new:7.3f}  old {old:7.3f}  ratio {new / old:.2f}x")
    flat = cases["image FP32 flat"]
    floor = p50_ms(lambda: np.asarray(orjson.loads(flat)["inputs"][0]["data"], dtype=np.float32), args.repeat, 3)
    parse = p50_ms(lambda: simdjson.Parser().parse(flat), args.repeat, 3)
    print(f"   image flat: orjson.loads + np.asarray {floor:.3f}, simdjson parse alone {parse:.3f}")

    print("2. infer p50 over HTTP, oip serve --workers 1 (ms; new / old)")
    with _server("new") as fast, _server("old") as slow:
        for label, model, body, repeat in (
            ("image FP32 JSON nested", "tiny_image", cases["image FP32 nested"], args.repeat),
            ("image FP32 JSON flat", "tiny_image", flat, args.repeat),
            ("1x4 FP32 JSON (control)", "iris", cases["1x4 FP32 (under the threshold)"], args.repeat * 20),
        ):
            new, old = _alternating(
                lambda m=model, b=body: _post(fast, m, b), lambda m=model, b=body: _post(slow, m, b), repeat
            )
            print(f"   {label:32s} new {new:7.3f}  old {old:7.3f}  ratio {new / old:.2f}x")


if __name__ == "__main__":
    main()
