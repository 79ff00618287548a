"""``sam build`` without Docker: the package has wheels for the Lambda platform, bytecode for Python 3.12,
fits Lambda's 250 MB unzipped limit, and serves events when imported by the runtime's Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts.lambda_events import tool

ROOT = Path(__file__).resolve().parents[2]
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024

pytestmark = pytest.mark.integration


def _python312() -> str:
    for candidate in [
        shutil.which("python3.12"),
        *map(str, sorted(Path.home().glob(".pyenv/versions/3.12.*/bin/python3.12"))),
    ]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    pytest.fail("python3.12 (the Lambda runtime's version) is not installed; sam build needs it")


def _build(tmp_path: Path, arch: str) -> tuple[Path, Path]:
    """Build; returns (function code, dependencies layer's python/)."""
    build_dir = tmp_path / f"build-{arch}"
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1", "LAMBDA_ARCH": arch,
           "LAMBDA_PYTHON": _python312()}  # fmt: skip
    command = [tool("sam"), "build", "--build-dir", str(build_dir), "--parameter-overrides", f"Architecture={arch}"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (build_dir / "BatchFunction" / "handler" / "batch.py").is_file()
    return build_dir / "InferenceFunction", build_dir / "DependenciesLayer" / "python"


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _wheel_tags(package: Path) -> dict[str, list[str]]:
    tags = {}
    for wheel in package.glob("*.dist-info/WHEEL"):
        tags[wheel.parent.name] = [
            line.split(":", 1)[1].strip() for line in wheel.read_text().splitlines() if line.startswith("Tag:")
        ]
    return tags


@pytest.fixture(scope="module")
def x86_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _build(tmp_path_factory.mktemp("sam"), "x86_64")


def test_package_fits_lambda(x86_build: tuple[Path, Path]) -> None:
    # Lambda's 250 MB limit covers the function code and all its layers, unzipped.
    size = _size(x86_build[0]) + _size(x86_build[1])
    print(f"x86_64 function + layer: {size / 1e6:.0f} MB unzipped")
    assert size < LAMBDA_UNZIPPED_LIMIT


def test_wheels_are_for_the_lambda_platform(x86_build: tuple[Path, Path]) -> None:
    for name, tags in _wheel_tags(x86_build[1]).items():
        assert any(t.endswith("-none-any") or (("cp312" in t or "abi3" in t) and "x86_64" in t) for t in tags), (
            name,
            tags,
        )


def test_every_module_has_python312_bytecode(x86_build: tuple[Path, Path]) -> None:
    code, layer = x86_build
    sources = [*(code / "handler").rglob("*.py"), *(code / "adapters").rglob("*.py"), *(layer / "numpy").rglob("*.py")]
    missing = [p for p in sources if not (p.parent / "__pycache__" / f"{p.stem}.cpython-312.pyc").exists()]
    assert not missing, missing[:5]


def test_built_package_serves_an_event_with_python312(x86_build: tuple[Path, Path]) -> None:
    code, layer = x86_build
    event = (ROOT / "events" / "http-api" / "infer-binary.json").read_text()
    program = (
        "import json, sys; from handler.http import lambda_handler; "
        "from handler.lambda_context import LocalLambdaContext; "
        "r = lambda_handler(json.loads(sys.stdin.read()), LocalLambdaContext()); print(json.dumps(r))"
    )
    # As on Lambda: the function code in /var/task, the layer's python/ on the path after it.
    env = {**os.environ, "PYTHONPATH": f"{code}:{layer}", "PYTHONDONTWRITEBYTECODE": "1", "OIP_TRACING": "0"}
    result = subprocess.run(
        [_python312(), "-c", program], input=event, capture_output=True, text=True, env=env, cwd=code, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    response = json.loads(result.stdout.strip().splitlines()[-1])
    assert response["statusCode"] == 200 and response["isBase64Encoded"] is True


def test_arm64_package_has_aarch64_wheels(tmp_path: Path) -> None:
    code, package = _build(tmp_path, "arm64")
    binary = {
        name: tags for name, tags in _wheel_tags(package).items() if not all(t.endswith("-none-any") for t in tags)
    }
    assert binary, "no platform wheels"
    for name, tags in binary.items():
        assert any("aarch64" in t for t in tags), (name, tags)
    assert _size(package) + _size(code) < LAMBDA_UNZIPPED_LIMIT
