"""``oip serve`` as a user runs it: a real process serving the demo repository (and one from MODEL_REPOSITORY)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from handler.cli import build_parser
from handler.protocol.cores import available_cores
from tests.servers import children, live, oip_serve, wait_for


def test_serves_the_demo_repository_by_default() -> None:
    """With no options, as a user first runs it: the demo repository, served by the default worker count (the cores
    it may use)."""
    document = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}]}
    with oip_serve(drop=("OIP_", "MODEL_REPOSITORY", "AIP_", "SAGEMAKER_")) as server:
        cores = available_cores()  # one worker is the process itself; more are forked from it
        wait_for(lambda: len(children(server.pid)) == (cores if cores > 1 else 0), f"{cores} workers")
        response = httpx.post(f"{server.url}/v2/models/iris/infer", json=document)
        assert response.status_code == 200
        outputs = {o["name"]: o for o in response.json()["outputs"]}
        assert outputs["label"]["data"] == [2]  # virginica
        assert httpx.get(f"{server.url}/v2/models/tiny_image").json()["inputs"][0]["shape"] == [-1, 3, 224, 224]


def test_model_repository_from_the_environment(test_repository: Path) -> None:
    with oip_serve(env={"MODEL_REPOSITORY": str(test_repository), "OIP_EAGER_LOAD": "1"}, probe=live) as server:
        assert httpx.get(f"{server.url}/v2/models/simple").status_code == 200


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
    flags = [flag] if flag else []
    with oip_serve(*flags, env=env, drop=("OIP_ACCESS_LOG",), workers=1, access_log=None) as server:
        assert httpx.get(f"{server.url}/v2/models/iris/ready").status_code == 200
        child = server.child
    output = child.text()
    assert ('"GET /v2/models/iris/ready HTTP/1.1" 200' in output) == logged, output[-2000:]
