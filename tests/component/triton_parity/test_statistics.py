"""Triton's statistics extension over REST and gRPC, driven by tritonclient (sync and aio).

"GET v2/models[/${MODEL_NAME}[/versions/${MODEL_VERSION}]]/stats" / "rpc ModelStatistics(...)": "per-model
(per-version) statistics which provide aggregate information about all activity occurring for a specific model
(version)". "inference_count": "if a client sends a single inference request with batch size 64,
"inference_count" will be incremented by 64".
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.grpc.aio as triton_grpc_aio
import tritonclient.http as triton_http
from google.protobuf import json_format
from tritonclient.utils import InferenceServerException

from tests.support.servers import OipServer

PHASES = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss")


def _simple_inputs(module: Any, batch: int) -> list[Any]:
    inputs = []
    for name, value in (("INPUT0", np.arange(16)), ("INPUT1", np.ones(16))):
        item = module.InferInput(name, [batch, 16], "INT32")
        item.set_data_from_numpy(np.tile(value.astype(np.int32), (batch, 1)))
        inputs.append(item)
    return inputs


def _counts(document: dict[str, Any]) -> dict[str, Any]:
    """Everything but durations and timestamps: what the same requests must change identically."""
    stats = document["inference_stats"]
    return {
        "inference_count": int(document.get("inference_count", 0)),
        "execution_count": int(document.get("execution_count", 0)),
        **{phase: int(stats.get(phase, {}).get("count", 0)) for phase in PHASES},
        "batches": {
            int(b["batch_size"]): int(b["compute_infer"].get("count", 0)) for b in document.get("batch_stats", [])
        },
    }


def _rest_stats(server: OipServer, model: str) -> dict[str, Any]:
    return triton_http.InferenceServerClient(server.address).get_inference_statistics(model)["model_stats"][0]


def _grpc_stats(server: OipServer, model: str) -> dict[str, Any]:
    message = triton_grpc.InferenceServerClient(server.grpc).get_inference_statistics(model)
    return json_format.MessageToDict(message, preserving_proto_field_name=True)["model_stats"][0]


def _delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    delta = {k: after[k] - before[k] for k in after if k != "batches"}
    delta["batches"] = {b: n - before["batches"].get(b, 0) for b, n in after["batches"].items()}
    delta["batches"] = {b: n for b, n in delta["batches"].items() if n}  # sizes other tests ran: unchanged here
    return delta


def _send(client: Any, module: Any) -> None:
    """Two requests of batch 3, one of batch 1, and one the model refuses (wrong datatype)."""
    for batch in (3, 3, 1):
        client.infer("simple", _simple_inputs(module, batch))
    bad = module.InferInput("INPUT0", [1, 16], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 16), np.float32))
    with pytest.raises(InferenceServerException):
        client.infer("simple", [bad, _simple_inputs(module, 1)[1]])


def test_same_requests_give_the_same_deltas_over_rest_and_grpc(server: OipServer) -> None:
    before = _counts(_rest_stats(server, "simple"))
    assert _counts(_grpc_stats(server, "simple")) == before
    _send(triton_http.InferenceServerClient(server.address), triton_http)
    middle = _counts(_rest_stats(server, "simple"))
    _send(triton_grpc.InferenceServerClient(server.grpc), triton_grpc)
    after = _counts(_grpc_stats(server, "simple"))
    assert _counts(_rest_stats(server, "simple")) == after
    over_rest, over_grpc = _delta(middle, before), _delta(after, middle)
    assert over_rest == over_grpc
    assert over_rest["inference_count"] == 7 and over_rest["execution_count"] == 3
    assert over_rest["success"] == 3 and over_rest["fail"] == 1 and over_rest["compute_infer"] == 3
    assert over_rest["batches"] == {1: 1, 3: 2}


def test_document_has_triton_shape_and_real_durations(server: OipServer) -> None:
    client = triton_http.InferenceServerClient(server.address)
    client.infer("simple", _simple_inputs(triton_http, 2))
    stats = _rest_stats(server, "simple")
    assert stats["name"] == "simple" and stats["version"] == "1"
    assert abs(stats["last_inference"] - time.time() * 1000) < 60_000
    inference = stats["inference_stats"]
    assert set(inference) >= {"success", "fail", "queue", "compute_input", "compute_infer", "compute_output"}
    assert inference["success"]["ns"] >= inference["compute_infer"]["ns"] > 0
    batch = {b["batch_size"]: b for b in stats["batch_stats"]}[2]
    assert set(batch) == {"batch_size", "compute_input", "compute_infer", "compute_output"}


def test_all_models_and_one_version(server: OipServer) -> None:
    every = httpx.get(f"{server.url}/v2/models/stats").json()["model_stats"]
    names = {(s["name"], s["version"]) for s in every}
    assert {("simple", "1"), ("image_classifier", "1"), ("reshaped", "1")} <= names
    over_grpc = triton_grpc.InferenceServerClient(server.grpc).get_inference_statistics("", as_json=True)
    assert {(s["name"], s["version"]) for s in over_grpc["model_stats"]} == names
    one = httpx.get(f"{server.url}/v2/models/simple/versions/1/stats").json()["model_stats"]
    assert [(s["name"], s["version"]) for s in one] == [("simple", "1")]


@pytest.mark.parametrize("path", ["absent/stats", "simple/versions/9/stats"])
def test_unknown_model_or_version_is_not_found(server: OipServer, path: str) -> None:
    answer = httpx.get(f"{server.url}/v2/models/{path}")
    assert answer.status_code == 404 and "error" in answer.json()
    name, _, rest = path.partition("/")
    version = rest.split("/")[1] if rest.startswith("versions") else ""
    with pytest.raises(InferenceServerException) as info:
        triton_grpc.InferenceServerClient(server.grpc).get_inference_statistics(name, version)
    assert info.value.status() == str(grpc.StatusCode.NOT_FOUND)
    assert info.value.message() == answer.json()["error"]


def test_aio_grpc_client_reads_statistics(server: OipServer) -> None:
    async def main() -> tuple[int, int]:
        client = triton_grpc_aio.InferenceServerClient(server.grpc)
        try:
            before = await client.get_inference_statistics("simple", as_json=True)
            await client.infer("simple", _simple_inputs(triton_grpc, 4))
            after = await client.get_inference_statistics("simple", as_json=True)
        finally:
            await client.close()
        counts = [int(stats["model_stats"][0].get("inference_count", 0)) for stats in (before, after)]
        return counts[0], counts[1]

    before, after = anyio.run(main)
    assert after - before == 4
