"""PyTriton's three clients against a V2 server, run in the ``pytriton`` tool venv (nvidia-pytriton pins numpy<2).

    <pytriton venv>/bin/python tests/tool_scripts/pytriton_clients.py URL

``URL`` is ``http://host:port`` or ``grpc://host:port``. The script sends the requests the test names and prints one
JSON object: each answer's arrays as lists (BYTES as text), for the test to check in the product's environment.
"""
# tool venv: pytriton

from __future__ import annotations

import asyncio
import json
import sys
import warnings

import numpy as np
from pytriton.client import AsyncioModelClient, FuturesModelClient, ModelClient
from pytriton.client.warnings import NotSupportedTimeoutWarning

# PyTriton warns on every gRPC client that tritonclient.grpc has no timeout outside infer: its own remark.
warnings.simplefilter("ignore", NotSupportedTimeoutWarning)

A = np.arange(32, dtype=np.int32).reshape(2, 16)
B = np.full((2, 16), 3, np.int32)


def plain(answer: dict[str, np.ndarray]) -> dict[str, list]:
    return {
        name: [v.decode() if isinstance(v, bytes) else v for v in array.ravel().tolist()]
        if array.dtype == object
        else array.tolist()
        for name, array in answer.items()
    }


def model_client(url: str) -> dict[str, object]:
    """``infer_batch`` and ``infer_sample`` on ``simple``; ``infer_batch`` with BYTES on ``simple_string``."""
    with ModelClient(url, "simple") as client:
        batch = client.infer_batch(INPUT0=A, INPUT1=B)
        sample = client.infer_sample(INPUT0=A[0], INPUT1=B[0])
    encode = np.vectorize(lambda value: str(value).encode(), otypes=[object])
    with ModelClient(url, "simple_string") as client:
        strings = client.infer_batch(INPUT0=encode(A), INPUT1=encode(B))
    return {"batch": plain(batch), "sample": plain(sample), "strings": plain(strings)}


def futures_client(url: str) -> list[dict[str, list]]:
    """Six requests in flight together from FuturesModelClient's threads; the n-th adds n to INPUT0.

    PyTriton 0.7's FuturesModelClient builds its further clients from the first one's URL without the scheme, so
    with "grpc://" and more than one worker they speak HTTP to the gRPC port (as against Triton itself): one worker.
    """
    workers = 1 if url.startswith("grpc://") else 4
    with FuturesModelClient(url, "simple", max_workers=workers) as client:
        futures = [client.infer_batch(INPUT0=A + i, INPUT1=B) for i in range(6)]
        return [plain(future.result()) for future in futures]


def asyncio_client(url: str) -> list[dict[str, list]]:
    """Six requests in flight together from AsyncioModelClient's coroutines; the n-th adds n to INPUT1."""

    async def together() -> list[dict[str, np.ndarray]]:
        async with AsyncioModelClient(url, "simple") as client:
            return list(await asyncio.gather(*[client.infer_batch(INPUT0=A, INPUT1=B + i) for i in range(6)]))

    return [plain(answer) for answer in asyncio.run(together())]


if __name__ == "__main__":
    target = sys.argv[1]
    print(
        json.dumps(
            {"model": model_client(target), "futures": futures_client(target), "asyncio": asyncio_client(target)}
        )
    )
