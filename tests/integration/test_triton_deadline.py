"""A request's deadline carried through to a real Triton (tritonserver 2.51 from the nvidia-pytriton wheel): a
gRPC client's deadline on ``oip serve`` reaches Triton as tritonclient's client timeout and as Triton's own
``timeout`` parameter, so Triton drops the request from its queue when nobody will read the answer. Triton's
statistics (``execution_count``) show it never ran there.

Triton's one model instance is held by a Python-backend model that waits for a file the test writes
(triton_models/held_model.py); the test knows the held request runs when the model writes its ``started`` file.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from tests.support import servers
from tests.support.triton_server import TritonServer, python_model

pytestmark = pytest.mark.integration

HELD_MODEL = Path(__file__).with_name("triton_models") / "held_model.py"
#: One instance, one request at a time; a request may shorten its 60 s queue timeout.
QUEUED_CONFIG = """max_batch_size: 1
input [ { name: "x", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
parameters { key: "hold_directory" value { string_value: "%s" } }
dynamic_batching { default_queue_policy { default_timeout_microseconds: 60000000 allow_timeout_override: true } }
"""
ROW = np.array([[2.5]], np.float32)


@pytest.fixture(scope="module")
def hold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hold")


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory, hold: Path) -> Iterator[TritonServer]:
    workdir = tmp_path_factory.mktemp("triton_deadline")
    python_model(workdir / "models", "queued", HELD_MODEL, QUEUED_CONFIG % hold)
    server = TritonServer(workdir / "models", workdir)  # on ports held for it
    server.start()
    yield server
    server.close()


def _executions(triton: TritonServer) -> int:
    stats = httpx.get(f"http://{triton.http_url}/v2/models/queued/stats", timeout=60).json()
    return int(stats["model_stats"][0]["execution_count"])


def _direct(triton: TritonServer) -> list[list[float]]:
    client = triton_http.InferenceServerClient(triton.http_url, network_timeout=3600)
    item = triton_http.InferInput("x", [1, 1], "FP32")
    item.set_data_from_numpy(ROW)
    try:
        return client.infer("queued", [item]).as_numpy("y").tolist()
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_grpc_deadline_reaches_triton_which_never_runs_the_request(
    triton: TritonServer, hold: Path, protocol: str, tmp_path: Path
) -> None:
    env = {
        "OIP_TRITON_URL": triton.grpc_url if protocol == "grpc" else triton.http_url,
        "OIP_TRITON_PROTOCOL": protocol,
        "OIP_TRITON_MODELS": "queued",
    }
    empty = tmp_path / "models"
    empty.mkdir()
    (hold / "release").unlink(missing_ok=True)
    started = len(list(hold.glob("started-*")))
    with servers.oip_serve("--model-repository", str(empty), grpc=True, workers=1, env=env) as ours:
        assert ours.grpc is not None
        before = _executions(triton)
        with ThreadPoolExecutor(1) as pool:
            occupying = pool.submit(_direct, triton)
            servers.wait_for(lambda: len(list(hold.glob("started-*"))) > started, "the held request running in Triton")
            client = triton_grpc.InferenceServerClient(ours.grpc)
            item = triton_grpc.InferInput("x", [1, 1], "FP32")
            item.set_data_from_numpy(ROW)
            with pytest.raises(InferenceServerException) as caught:
                client.infer("queued", [item], client_timeout=0.4)
            client.close()
            assert caught.value.status() == "StatusCode.DEADLINE_EXCEEDED"
            assert not occupying.done()  # Triton's one instance was held all the while
            (hold / "release").touch()
            assert occupying.result() == [[2.5]]
        assert _direct(triton) == [[2.5]]  # the queue is empty again: this one runs next
        assert _executions(triton) - before == 2  # the held request and the last one; never the one that timed out
