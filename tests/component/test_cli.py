"""``oip serve`` as a user runs it: a real process serving the demo repository (and one from MODEL_REPOSITORY)."""

# covers: handler/runtime/banner.py

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from handler.cli import build_parser
from tests.support.procfs import children
from tests.support.servers import live, oip_serve, wait_for


def test_serves_the_demo_repository_by_default() -> None:
    """With no options, as a user first runs it: the demo repository, served by the default worker count (the cores
    it may use)."""
    document = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}]}
    with oip_serve(drop=("OIP_", "MODEL_REPOSITORY", "AIP_", "SAGEMAKER_")) as server:
        cores = _cores_of(server.pid)  # one worker is the process itself; more are forked from it
        wait_for(lambda: len(children(server.pid)) == (cores if cores > 1 else 0), f"{cores} workers")
        response = httpx.post(f"{server.url}/v2/models/iris/infer", json=document)
        assert response.status_code == 200
        outputs = {o["name"]: o for o in response.json()["outputs"]}
        assert outputs["label"]["data"] == [2]  # virginica
        assert httpx.get(f"{server.url}/v2/models/tiny_image").json()["inputs"][0]["shape"] == [-1, 3, 224, 224]


def _cores_of(pid: int) -> int:
    """The cores ``pid`` may use, read here as the kernel states them: its ``Cpus_allowed_list`` in /proc, capped
    by the quota in /sys/fs/cgroup (v2 ``cpu.max``, else v1's, in microseconds a period), rounded up."""
    status = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line
    )
    allowed = 0
    for part in status["Cpus_allowed_list"].strip().split(","):
        low, _, high = part.partition("-")
        allowed += int(high or low) - int(low) + 1
    cgroup = Path("/sys/fs/cgroup")
    if (cgroup / "cpu.max").exists():
        quota, period = (cgroup / "cpu.max").read_text().split()
    elif (cgroup / "cpu" / "cpu.cfs_quota_us").exists():  # v1
        quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip().replace("-1", "max")
        period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
    else:
        return allowed
    return allowed if quota == "max" else min(allowed, max(1, -(-int(quota) // int(period))))


def test_model_repository_from_the_environment(test_repository: Path) -> None:
    env = {"MODEL_REPOSITORY": str(test_repository), "OIP_EAGER_LOAD": "1", "OIP_EXIT_ON_ERROR": "false"}
    with oip_serve(env=env, probe=live) as server:
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
