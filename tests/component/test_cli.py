"""``oip serve`` as a user runs it: a real process serving the demo repository (and one from MODEL_REPOSITORY)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from handler.cli import build_parser
from tests.conftest import free_port


@contextmanager
def serve(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``oip serve`` in a child process until it answers, yield its URL, then stop it."""
    port = free_port()
    command = [sys.executable, "-m", "handler.cli", "serve", "--port", str(port), "--no-access-log", *args]
    url = f"http://127.0.0.1:{port}"
    with subprocess.Popen(command, env={**os.environ, **(env or {})}, stderr=subprocess.PIPE) as process:
        try:
            _wait_live(process, url)
            yield url
        finally:
            process.terminate()


def _wait_live(process: subprocess.Popen, url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"oip serve exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            if httpx.get(f"{url}/v2/health/live", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("oip serve did not start")
        time.sleep(0.1)


def test_serves_the_demo_repository_by_default() -> None:
    with serve() as url:
        document = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}]}
        response = httpx.post(f"{url}/v2/models/iris/infer", json=document)
        assert response.status_code == 200
        outputs = {o["name"]: o for o in response.json()["outputs"]}
        assert outputs["label"]["data"] == [2]  # virginica
        assert httpx.get(f"{url}/v2/models/tiny_image").json()["inputs"][0]["shape"] == [-1, 3, 224, 224]


def test_model_repository_from_the_environment(test_repository: Path) -> None:
    with serve(env={"MODEL_REPOSITORY": str(test_repository), "OIP_EAGER_LOAD": "1"}) as url:
        assert httpx.get(f"{url}/v2/models/simple").status_code == 200


def test_parser_defaults() -> None:
    args = build_parser().parse_args(["serve", "--model-repository", "/x", "--host", "0.0.0.0", "--port", "9"])
    assert (args.model_repository, args.host, args.port) == ("/x", "0.0.0.0", 9)
    with pytest.raises(SystemExit):
        build_parser().parse_args([])


@pytest.mark.parametrize(
    ("env", "flag", "logged"),
    [({}, None, False), ({"OIP_ACCESS_LOG": "1"}, None, True), ({}, "--access-log", True),
     ({"OIP_ACCESS_LOG": "1"}, "--no-access-log", False)],
)  # fmt: skip
def test_a_line_per_request_only_when_asked(env: dict[str, str], flag: str | None, logged: bool) -> None:
    """Off by default, as in Triton (the line cost 10-30 % of perf_analyzer's throughput); OIP_ACCESS_LOG=1 or
    --access-log turns it on, and the flag wins over the environment."""
    port = free_port()
    command = [sys.executable, "-m", "handler.cli", "serve", "--port", str(port), "--workers", "1"]
    environment = {k: v for k, v in os.environ.items() if k != "OIP_ACCESS_LOG"} | env
    with subprocess.Popen(
        [*command, *([flag] if flag else [])], env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    ) as process:
        try:
            _wait_live(process, f"http://127.0.0.1:{port}")
            assert httpx.get(f"http://127.0.0.1:{port}/v2/models/iris/ready").status_code == 200
        finally:
            process.terminate()
        output = process.communicate(timeout=30)[0].decode()
    assert ('"GET /v2/models/iris/ready HTTP/1.1" 200' in output) == logged, output[-2000:]
