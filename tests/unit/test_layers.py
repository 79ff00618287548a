"""The rooms of handler/ stay rooms: the import-linter contracts in pyproject.toml hold, and they do catch a
sideways import between transports and an adapter importing handler."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [str(LINT_IMPORTS)] if LINT_IMPORTS.exists() else ["lint-imports"]
    return subprocess.run(
        [*command, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(cwd)}
    )


def test_import_contracts_are_kept() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_contracts_catch_sideways_and_upward_imports(tmp_path: Path) -> None:
    for package in ("handler", "adapters"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "handler" / "rest" / "health.py").open("a") as module:
        module.write("\nfrom handler.grpc import codec  # noqa: E402\n")
    with (tmp_path / "adapters" / "types.py").open("a") as module:
        module.write("\nimport handler.config.settings  # noqa: E402\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "handler.rest.health -> handler.grpc.codec" in result.stdout
    assert "adapters.types -> handler.config.settings" in result.stdout
