"""Core server speed, measured side by side in one run (ratios, not absolute times).

    python -m bench.bench_core [--repeat N]

1. JSON decode of a 1x3x224x224 FP32 request: ours vs the floor ``orjson.loads`` + ``np.asarray``.
2. End-to-end p50 of a 1x4 JSON infer (demo ``iris``) over loopback HTTP vs ``session.run`` alone.
3. The same image tensor sent binary vs JSON, end to end (demo ``tiny_image``).
"""

from __future__ import annotations

import argparse
import http.client
import socket

import numpy as np
import onnxruntime as ort
import orjson

from bench.common import oip_server, p50_ms
from handler.codecs.request import decode_infer_request
from handler.config.settings import DEMO_REPOSITORY


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bench_json_decode(image: np.ndarray, repeat: int) -> tuple[float, float]:
    body = orjson.dumps(
        {"inputs": [{"name": "image", "shape": list(image.shape), "datatype": "FP32", "data": image.ravel().tolist()}]}
    )
    floor = p50_ms(lambda: np.asarray(orjson.loads(body)["inputs"][0]["data"], dtype=np.float32), repeat, 3)
    ours = p50_ms(lambda: decode_infer_request(body, None, 1 << 30), repeat, 3)
    return ours, floor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    image = rng.random((1, 3, 224, 224), dtype=np.float32)

    ours, floor = bench_json_decode(image, max(args.repeat // 10, 10))
    print(f"1. JSON decode 1x3x224x224 FP32: ours {ours:.2f} ms, floor {floor:.2f} ms, ratio {ours / floor:.2f}x "
          "(target <= 2x)")  # fmt: skip

    iris = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    session = ort.InferenceSession(str(DEMO_REPOSITORY / "iris" / "1" / "model.onnx"))
    run_alone = p50_ms(lambda: session.run(None, {"input": iris}), args.repeat * 5)
    small = orjson.dumps(
        {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": iris.ravel().tolist()}]}
    )
    header = orjson.dumps({"inputs": [{"name": "image", "shape": [1, 3, 224, 224], "datatype": "FP32",
                                       "parameters": {"binary_data_size": image.nbytes}}],
                           "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}]})  # fmt: skip
    binary_body = header + image.tobytes()
    json_image = orjson.dumps({"inputs": [{"name": "image", "shape": [1, 3, 224, 224], "datatype": "FP32",
                                           "data": image.ravel().tolist()}]})  # fmt: skip
    port = _port()
    with oip_server(port):
        # The stdlib client on one keep-alive connection: the lightest client, so the figure is the server's.
        connection = http.client.HTTPConnection("127.0.0.1", port)

        def request(method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> None:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            payload = response.read()
            assert response.status == 200, payload

        def post(path: str, body: bytes, headers: dict[str, str]) -> None:
            request("POST", path, body, headers)

        http_floor = p50_ms(lambda: request("GET", "/v2/health/live"), args.repeat * 5, 50)

        json_headers = {"Content-Type": "application/json"}
        e2e = p50_ms(lambda: post("/v2/models/iris/infer", small, json_headers), args.repeat * 5, 50)
        binary_headers = {
            "Inference-Header-Content-Length": str(len(header)),
            "Content-Type": "application/octet-stream",
        }
        binary = p50_ms(lambda: post("/v2/models/tiny_image/infer", binary_body, binary_headers), args.repeat)
        json_path = p50_ms(
            lambda: post("/v2/models/tiny_image/infer", json_image, json_headers), max(args.repeat // 4, 20)
        )
    print(f"2. 1x4 JSON infer over HTTP p50 {e2e:.3f} ms vs session.run alone {run_alone:.3f} ms: "
          f"+{e2e - run_alone:.3f} ms (target < 1.5 ms); HTTP round trip alone (GET /v2/health/live) "
          f"{http_floor:.3f} ms")  # fmt: skip
    print(f"3. 1x3x224x224 FP32 binary p50 {binary:.2f} ms vs JSON p50 {json_path:.2f} ms: "
          f"{json_path / binary:.1f}x lower (target >= 3x)")  # fmt: skip


if __name__ == "__main__":
    main()
