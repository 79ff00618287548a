"""``sam build`` of template.yaml into a temporary directory, as the tests use it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scripts.lambda_events import tool
from scripts.tool_env import ToolError, find_python

ROOT = Path(__file__).resolve().parents[2]


def python312() -> str:
    try:
        return find_python("3.12")
    except ToolError:
        pytest.fail("python3.12 (the Lambda runtime's version) is not installed; sam build needs it")


def build(tmp_path: Path, arch: str) -> tuple[Path, Path]:
    """Build; returns (function code, dependencies layer's python/)."""
    build_dir = tmp_path / f"build-{arch}"
    # Only the template parameter says which architecture: the Makefile must follow it (no LAMBDA_ARCH).
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1", "LAMBDA_PYTHON": python312()}
    env.pop("LAMBDA_ARCH", None)
    command = [tool("sam"), "build", "--build-dir", str(build_dir), "--parameter-overrides", f"Architecture={arch}"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (build_dir / "BatchFunction" / "handler" / "batch").exists()
    return build_dir / "InferenceFunction", build_dir / "DependenciesLayer" / "python"
