"""One real ``oip serve`` (REST and gRPC ports) over the Triton-style repository, for every parity test.

One worker process, as one Triton process: statistics are counted per process, and Triton's tools (perf_analyzer)
read them on connections of their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http

from tests.support import parity_repository as repository
from tests.support.servers import OipServer, oip_serve


@pytest.fixture(scope="session")
def parity_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return repository.build(tmp_path_factory.mktemp("triton_repository"))


@pytest.fixture(scope="session")
def server(parity_repository: Path) -> Iterator[OipServer]:
    with oip_serve("--model-repository", str(parity_repository), grpc=True, workers=1) as served:
        yield served


@pytest.fixture
def rest(server: OipServer) -> triton_http.InferenceServerClient:
    return triton_http.InferenceServerClient(server.address)


@pytest.fixture
def grpc_client(server: OipServer) -> triton_grpc.InferenceServerClient:
    return triton_grpc.InferenceServerClient(server.grpc)
