"""Triton forwarding overhead and client cold start, side by side in one run, against a real tritonserver
(from the nvidia-pytriton wheel) on 127.0.0.1.

    python -m bench.bench_triton [--repeat 200]

- Import cost of each asyncio tritonclient in a fresh process (median of 5).
- p50 of tritonclient.http calling Triton directly vs calling our server, which forwards over HTTP as a
  pass-through (the default: the same bytes, adapters/triton/passthrough.py) or through tritonclient's HTTP
  client (``OIP_TRITON_PASSTHROUGH=0``), or with the gRPC asyncio client: a small 1x4 JSON request and a
  1x3x224x224 FP32 binary request.
- p50 of the forwarding call alone (``DataPlane.infer`` on a routed model, no HTTP in front), per client.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import tritonclient.http as triton_http

from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.triton.settings import TritonSettings
from adapters.types import InferCall, Tensor
from bench.common import oip_server, p50_ms
from handler.config.settings import DEMO_REPOSITORY
from handler.protocol.dataplane import DataPlane
from tests.conftest import free_port
from tests.support.triton_server import TritonServer, _python_model, build_repository

IMAGE_CONFIG = """max_batch_size: 0
input [ { name: "image", data_type: TYPE_FP32, dims: [ -1, 3, 224, 224 ] } ]
output [ { name: "probabilities", data_type: TYPE_FP32, dims: [ -1, 10 ] } ]
"""


def import_cost(module: str) -> float:
    samples = []
    for _ in range(5):
        code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
        samples.append(
            float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        )
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    for module in ("tritonclient.grpc.aio", "tritonclient.http.aio"):
        print(f"import {module}: {import_cost(module):.0f} ms")

    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        repository = build_repository(workdir / "models")
        _python_model(repository, "tiny_image", DEMO_REPOSITORY / "tiny_image" / "1" / "model.onnx", IMAGE_CONFIG)
        triton = TritonServer(repository, workdir, free_port(), free_port())
        triton.start()
        try:
            run(triton, args.repeat)
        finally:
            triton.stop()


def _request(model: str, name: str, array: np.ndarray, binary: bool):  # type: ignore[no-untyped-def]
    item = triton_http.InferInput(name, list(array.shape), "FP32")
    item.set_data_from_numpy(array, binary_data=binary)
    return model, [item], [triton_http.InferRequestedOutput("probabilities", binary_data=binary)]


def run(triton: TritonServer, repeat: int) -> None:
    small = np.random.default_rng(0).random((1, 4)).astype(np.float32)
    image = np.random.default_rng(1).random((1, 3, 224, 224)).astype(np.float32)
    cases = {
        "1x4 FP32 JSON": ("iris", "input", small, False),
        "1x3x224x224 FP32 binary": ("tiny_image", "image", image, True),
    }
    direct = triton_http.InferenceServerClient(triton.http_url)
    results: dict[str, dict[str, float]] = {name: {} for name in cases}
    for name, (model, tensor, array, binary) in cases.items():
        request = _request(model, tensor, array, binary)
        results[name]["Triton direct"] = p50_ms(lambda r=request: direct.infer(r[0], r[1], outputs=r[2]), repeat)
    variants = {"http, pass-through": ("http", "1"), "http, tritonclient": ("http", "0"), "grpc": ("grpc", "0")}
    for label, (protocol, passthrough) in variants.items():
        url = triton.grpc_url if protocol == "grpc" else triton.http_url
        env = {"OIP_TRITON_URL": url, "OIP_TRITON_PROTOCOL": protocol, "OIP_TRITON_PROXY": "1",
               "OIP_TRITON_PASSTHROUGH": passthrough, "MODEL_REPOSITORY": tempfile.mkdtemp()}  # fmt: skip
        port = free_port()
        with oip_server(port, env):  # our server in its own process, as deployed
            ours = triton_http.InferenceServerClient(f"127.0.0.1:{port}")
            for name, (model, tensor, array, binary) in cases.items():
                request = _request(model, tensor, array, binary)
                results[name][f"via oip ({label})"] = p50_ms(
                    lambda r=request, client=ours: client.infer(r[0], r[1], outputs=r[2]), repeat
                )
            ours.close()
    loop = asyncio.new_event_loop()
    for protocol in ("http", "grpc"):
        url = triton.grpc_url if protocol == "grpc" else triton.http_url
        local = ModelRepository(Path(tempfile.mkdtemp()), lambda *_: None)  # type: ignore[arg-type,return-value]
        dataplane = DataPlane(ModelRouter(local, TritonSettings(url=url, protocol=protocol, proxy_all=True)))
        for name, (model, tensor, array, _) in cases.items():
            call = InferCall((Tensor(tensor, "FP32", array.shape, array),))
            results[name][f"forward call alone ({protocol})"] = p50_ms(
                lambda c=call, m=model, d=dataplane: loop.run_until_complete(d.infer(m, None, c)), repeat
            )
        loop.run_until_complete(dataplane.router.client.close())  # type: ignore[union-attr]
    for name, row in results.items():
        base = row["Triton direct"]
        cells = ", ".join(
            f"{k} {v:.2f} ms" + ("" if k == "Triton direct" else f" (+{v - base:.2f})") for k, v in row.items()
        )
        print(f"{name}: {cells}")


if __name__ == "__main__":
    main()
