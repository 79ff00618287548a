"""Real external servers for integration tests: moto's standalone S3/SQS server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import servers
from tests.support.aws import AWS_TEST_ENV

__all__ = ["AWS_TEST_ENV"]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """moto's standalone server (S3, SQS, ... over HTTP), shared by the session: name what a test creates there
    with ``tests.support.servers.unique_name``. Fails the test if it cannot start."""
    with servers.moto_server() as url:
        yield url


@pytest.fixture
def aws_env(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point boto3 at the moto server with dummy credentials."""
    for key, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return moto_server


@pytest.fixture(scope="session")
def triton(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A real tritonserver on 127.0.0.1 (HTTP and gRPC); fails the test if it cannot start."""
    from tests.support.triton_server import TritonServer, build_repository

    workdir = tmp_path_factory.mktemp("triton")
    server = TritonServer(build_repository(workdir / "models"), workdir)
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def x86_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``sam build`` for x86_64 (the template's default): (function code, dependencies layer's python/)."""
    from tests.support.lambda_build import build

    return build(tmp_path_factory.mktemp("sam"), "x86_64")
