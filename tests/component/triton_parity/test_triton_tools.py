"""Triton's own tools, unchanged, over both protocols: perf_analyzer (2.51, bench/perf_analyzer.py) and PyTriton's
``ModelClient``. Both read the model configuration first ("rpc ModelConfig"), and perf_analyzer reads server-side
statistics around its measurement windows.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from pytriton.client import AsyncioModelClient, FuturesModelClient, ModelClient

from bench.perf_analyzer import measure, perf_analyzer
from tests.component.triton_parity.conftest import Server


@pytest.mark.integration
@pytest.mark.parametrize(("protocol", "extra"), [("http", ()), ("grpc", ()), ("grpc", ("--streaming",))])
def test_perf_analyzer_measures_simple(server: Server, protocol: str, extra: tuple[str, ...]) -> None:
    """``--streaming`` drives Triton's ModelStreamInfer (gRPC only)."""
    url = server.http if protocol == "http" else server.grpc
    result = measure(perf_analyzer(), url, "simple", protocol, concurrency=2, interval_ms=1000, stability=50,
                     extra=extra)  # fmt: skip
    assert result.infer_per_second > 50 and 0 < result.p50_us <= result.p99_us


# PyTriton warns on every gRPC client that tritonclient.grpc has no timeout outside infer: its own remark.
@pytest.mark.filterwarnings("ignore::pytriton.client.warnings.NotSupportedTimeoutWarning")
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_pytriton_model_client(server: Server, protocol: str) -> None:
    url = f"{protocol}://{server.http if protocol == 'http' else server.grpc}"
    a, b = np.arange(32, dtype=np.int32).reshape(2, 16), np.full((2, 16), 3, np.int32)
    with ModelClient(url, "simple") as client:
        batch = client.infer_batch(INPUT0=a, INPUT1=b)
        one = client.infer_sample(INPUT0=a[0], INPUT1=b[0])
    assert np.array_equal(batch["OUTPUT0"], a + b) and np.array_equal(batch["OUTPUT1"], a - b)
    assert np.array_equal(one["OUTPUT0"], a[0] + b[0])
    with ModelClient(url, "simple_string") as client:
        encode = np.vectorize(lambda value: str(value).encode(), otypes=[object])
        strings = client.infer_batch(INPUT0=encode(a), INPUT1=encode(b))
    assert [int(v) for v in strings["OUTPUT0"][1]] == (a[1] + b[1]).tolist()


# PyTriton 0.7's FuturesModelClient builds its further clients from the first one's URL without the scheme, so
# with "grpc://" and more than one worker they speak HTTP to the gRPC port (as against Triton itself): one worker.
@pytest.mark.filterwarnings("ignore::pytriton.client.warnings.NotSupportedTimeoutWarning")
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_pytriton_futures_and_asyncio_clients(server: Server, protocol: str) -> None:
    """PyTriton's other two clients: requests in flight together, from threads and from coroutines."""
    url = f"{protocol}://{server.http if protocol == 'http' else server.grpc}"
    a, b = np.arange(32, dtype=np.int32).reshape(2, 16), np.full((2, 16), 3, np.int32)
    with FuturesModelClient(url, "simple", max_workers=4 if protocol == "http" else 1) as futures:
        answers = [future.result() for future in [futures.infer_batch(INPUT0=a + i, INPUT1=b) for i in range(6)]]
    assert all(np.array_equal(answer["OUTPUT0"], a + i + b) for i, answer in enumerate(answers))

    async def concurrently() -> list[dict[str, np.ndarray]]:
        async with AsyncioModelClient(url, "simple") as client:
            return list(await asyncio.gather(*[client.infer_batch(INPUT0=a, INPUT1=b + i) for i in range(6)]))

    results = asyncio.run(concurrently())
    assert all(np.array_equal(result["OUTPUT1"], a - b - i) for i, result in enumerate(results))
