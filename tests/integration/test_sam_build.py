"""``sam build`` without Docker: the package has wheels and ELF binaries for the template's Architecture (both
x86_64 and arm64), exactly the lock's versions, bytecode for Python 3.12, stays under 150 MB unzipped, and serves
every HTTP event in events/ when imported by the runtime's Python."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from scripts.lambda_events import tool
from tests.support.lambda_build import build as _build
from tests.support.lambda_build import python312 as _python312

ROOT = Path(__file__).resolve().parents[2]
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
#: Our budget for the default package (function code + dependencies layer, x86_64), well under Lambda's limit.
PACKAGE_BUDGET = 150 * 1000 * 1000
#: ELF e_machine per Lambda architecture.
ELF_MACHINE = {"x86_64": 62, "arm64": 183}
#: glibc of the python3.12 runtime (Amazon Linux 2023).
RUNTIME_GLIBC = (2, 34)

pytestmark = pytest.mark.integration


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _wheel_tags(package: Path) -> dict[str, list[str]]:
    tags = {}
    for wheel in package.glob("*.dist-info/WHEEL"):
        tags[wheel.parent.name] = [
            line.split(":", 1)[1].strip() for line in wheel.read_text().splitlines() if line.startswith("Tag:")
        ]
    return tags


def test_package_fits_the_budget(x86_build: tuple[Path, Path]) -> None:
    # Lambda's 250 MB limit covers the function code and all its layers, unzipped; ours is 150 MB.
    size = _size(x86_build[0]) + _size(x86_build[1])
    print(f"x86_64 function + layer: {size / 1e6:.1f} MB unzipped")
    assert size <= PACKAGE_BUDGET < LAMBDA_UNZIPPED_LIMIT


def _elf_machines(root: Path) -> dict[str, int]:
    machines = {}
    for path in root.rglob("*.so*"):
        header = path.read_bytes()[:20]
        if header[:4] == b"\x7fELF":
            machines[str(path.relative_to(root))] = int.from_bytes(header[18:20], "little")
    return machines


def _check_architecture(code: Path, layer: Path, arch: str) -> None:
    machines = _elf_machines(layer)
    assert len(machines) > 10, machines  # numpy, onnxruntime, pydantic_core, orjson, ...
    wrong = {name: machine for name, machine in machines.items() if machine != ELF_MACHINE[arch]}
    assert not wrong, wrong
    platform = "x86_64" if arch == "x86_64" else "aarch64"
    for name, tags in _wheel_tags(layer).items():
        assert any(t.endswith("-none-any") or (("cp312" in t or "abi3" in t) and platform in t) for t in tags), (
            name,
            tags,
        )
    assert not _elf_machines(code)
    print(f"{arch}: needs glibc {'.'.join(map(str, _glibc_needed(layer)))}")
    assert _glibc_needed(layer) <= RUNTIME_GLIBC


def _glibc_needed(root: Path) -> tuple[int, ...]:
    """The newest GLIBC_x.y symbol version any shared object in ``root`` asks for."""
    versions = [
        tuple(map(int, match.decode().split(".")))
        for path in root.rglob("*.so*")
        for match in re.findall(rb"GLIBC_(2\.\d+(?:\.\d+)?)\x00", path.read_bytes())
    ]
    return max(versions)


def test_package_is_for_the_template_architecture(x86_build: tuple[Path, Path]) -> None:
    _check_architecture(*x86_build, "x86_64")


def test_package_has_the_locked_versions(x86_build: tuple[Path, Path]) -> None:
    locked = {}
    for line in (ROOT / "requirements-lambda.txt").read_text().splitlines():
        if "==" in line and not line.startswith(" "):
            name, version = line.split(" ", 1)[0].split("==")
            locked[name.lower().replace("_", "-")] = version
    installed = {}
    for info in x86_build[1].glob("*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[name.lower().replace("_", "-")] = version
    assert installed == locked


def test_every_module_has_python312_bytecode(x86_build: tuple[Path, Path]) -> None:
    code, layer = x86_build
    sources = [*(code / "handler").rglob("*.py"), *(code / "adapters").rglob("*.py"), *(layer / "numpy").rglob("*.py")]
    missing = [p for p in sources if not (p.parent / "__pycache__" / f"{p.stem}.cpython-312.pyc").exists()]
    assert not missing, missing[:5]


#: What Lambda hands the handler: a context with these attributes.
PROGRAM = """import json, sys, uuid
from handler.http import lambda_handler
class Context:
    function_name, function_version, memory_limit_in_mb = "oip-inference", "$LATEST", 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:oip-inference"
    aws_request_id = str(uuid.uuid4())
    log_group_name, log_stream_name = "/aws/lambda/oip-inference", "stream"
    def get_remaining_time_in_millis(self): return 30000
"""
HTTP_EVENTS = sorted(p for shape in ("http-api", "rest-api", "alb") for p in (ROOT / "events" / shape).glob("*.json"))


def test_built_package_serves_every_http_event_with_python312(x86_build: tuple[Path, Path]) -> None:
    """What was left out of the package (uvicorn, tqdm, ml_dtypes, botocore...) is never imported on Lambda."""
    code, layer = x86_build
    program = PROGRAM + "print(json.dumps([lambda_handler(json.load(open(p)), Context()) for p in sys.argv[1:]]))"
    # As on Lambda: the function code in /var/task, the layer's python/ on the path after it.
    env = {**os.environ, "PYTHONPATH": f"{code}:{layer}", "PYTHONDONTWRITEBYTECODE": "1", "OIP_TRACING": "0"}
    result = subprocess.run(
        [_python312(), "-c", program, *map(str, HTTP_EVENTS)],
        capture_output=True, text=True, env=env, cwd=code, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    responses = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(responses) == len(HTTP_EVENTS) == 21
    for event, response in zip(HTTP_EVENTS, responses, strict=True):
        assert response["statusCode"] == 200, (event, response)
        assert response["isBase64Encoded"] is event.name.endswith("binary.json"), event


def test_arm64_build_follows_the_architecture_parameter(tmp_path: Path) -> None:
    code, layer = _build(tmp_path, "arm64")
    _check_architecture(code, layer, "arm64")
    assert _size(layer) + _size(code) < LAMBDA_UNZIPPED_LIMIT


def test_lambda_arch_that_contradicts_the_template_fails_the_build(tmp_path: Path) -> None:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1", "LAMBDA_ARCH": "arm64",
           "LAMBDA_PYTHON": _python312()}  # fmt: skip
    command = [tool("sam"), "build", "--build-dir", str(tmp_path / "b"), "InferenceFunction",
               "--parameter-overrides", "Architecture=x86_64"]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode != 0
    assert "LAMBDA_ARCH=arm64 but the template's Architecture is x86_64" in result.stdout + result.stderr
