"""BYTES data for a model input of another datatype is refused by its datatype before any element is parsed: inline
in the binary extension, as the first request of a header and as one whose header the decoder has kept."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import httpx
import pytest

from tests.support.iris_requests import iris_answers
from tests.support.servers import OipServer, oip_serve

#: Elements of the BYTES tensor: parsed one by one, they cost the server about a second of CPU.
ELEMENTS = 2_000_000
#: Server CPU one refusal may cost, and /proc's unit of CPU time (a measured difference may be one off).
BUDGET_S = 0.050
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    with oip_serve(workers=1, log_level="warning") as served:
        yield served


def _bytes_request() -> tuple[bytes, dict[str, str]]:
    """``iris``'s FP32 input sent as ELEMENTS empty BYTES elements in the binary extension."""
    data = bytes(4 * ELEMENTS)  # each element: a 4-byte length of 0
    tensor = {"name": "input", "shape": [ELEMENTS], "datatype": "BYTES", "parameters": {"binary_data_size": len(data)}}
    header = json.dumps({"inputs": [tensor]}).encode()
    headers = {"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"}
    return header + data, headers


def test_bytes_for_an_fp32_input_are_refused_before_parsing(server: OipServer) -> None:
    body, headers = _bytes_request()
    with httpx.Client(timeout=60) as client:
        for attempt in range(3):  # the decoder keeps a header's plan from its second sending on
            before = server.cpu_seconds()
            answer = client.post(f"{server.url}/v2/models/iris/infer", content=body, headers=headers)
            spent = server.cpu_seconds() - before
            assert answer.status_code == 400, answer.text[:300]
            assert answer.json() == {"error": "input 'input' has datatype BYTES but the model expects FP32"}
            assert spent <= BUDGET_S + TICK_S + 1e-9, f"attempt {attempt}: {spent:.3f} s of server CPU"
    iris_answers(server.url)
