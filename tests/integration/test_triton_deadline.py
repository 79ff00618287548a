"""A request's deadline carried through to a real Triton (tritonserver 2.51 from the nvidia-pytriton wheel): a
gRPC client's deadline on ``oip serve`` reaches Triton as tritonclient's client timeout and as Triton's own
``timeout`` parameter, so Triton drops the request from its queue when nobody will read the answer. Triton's
statistics (``execution_count``) show it never ran there.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from handler.protocol.settings import DEMO_REPOSITORY
from tests import servers
from tests.conftest import free_port
from tests.integration.triton_server import IRIS_CONFIG, TritonServer, _python_model

pytestmark = pytest.mark.integration

#: One instance, one request at a time, a second per request; a request may shorten its 60 s queue timeout.
QUEUED_CONFIG = (
    IRIS_CONFIG.replace("max_batch_size: 256", "max_batch_size: 1")
    + 'parameters { key: "delay_seconds" value { string_value: "1" } }\n'
    + "dynamic_batching { default_queue_policy { default_timeout_microseconds: 60000000 "
    + "allow_timeout_override: true } }\n"
)
ROW = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    workdir = tmp_path_factory.mktemp("triton_deadline")
    root = workdir / "models"
    _python_model(root, "queued", DEMO_REPOSITORY / "iris" / "1" / "model.onnx", QUEUED_CONFIG)
    server = TritonServer(root, workdir, free_port(), free_port())
    server.start()
    yield server
    server.stop()


def _executions(triton: TritonServer) -> int:
    stats = httpx.get(f"http://{triton.http_url}/v2/models/queued/stats", timeout=10).json()
    return int(stats["model_stats"][0]["execution_count"])


def _direct(triton: TritonServer) -> None:
    client = triton_http.InferenceServerClient(triton.http_url, network_timeout=60)
    item = triton_http.InferInput("input", [1, 4], "FP32")
    item.set_data_from_numpy(ROW)
    client.infer("queued", [item])
    client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_grpc_deadline_reaches_triton_which_never_runs_the_request(triton: TritonServer, protocol: str, tmp_path):
    env = {
        "OIP_TRITON_URL": triton.grpc_url if protocol == "grpc" else triton.http_url,
        "OIP_TRITON_PROTOCOL": protocol,
        "OIP_TRITON_MODELS": "queued",
    }
    empty = tmp_path / "models"
    empty.mkdir()
    with servers.oip_serve("--model-repository", str(empty), grpc=True, workers=1, env=env) as ours:
        assert ours.grpc is not None
        before = _executions(triton)
        occupied_started = threading.Event()

        def occupy() -> None:
            occupied_started.set()
            _direct(triton)

        occupying = threading.Thread(target=occupy)
        occupying.start()
        occupied_started.wait(10)
        threading.Event().wait(0.2)  # the direct request reaches Triton first: an order, not a speed
        client = triton_grpc.InferenceServerClient(ours.grpc)
        item = triton_grpc.InferInput("input", [1, 4], "FP32")
        item.set_data_from_numpy(ROW)
        with pytest.raises(InferenceServerException) as caught:
            client.infer("queued", [item], client_timeout=0.4)
        client.close()
        assert caught.value.status() == "StatusCode.DEADLINE_EXCEEDED"
        occupying.join(60)
        _direct(triton)  # the queue is empty again: this one runs next
        assert _executions(triton) - before == 2  # the occupying request and the last one; never the one that timed out
