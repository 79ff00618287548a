"""One version, known without the package's metadata: the Lambda package and the container copy the code rather
than install it, and server metadata must say the same version there as where pip installed it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import handler

ROOT = Path(__file__).resolve().parents[2]


def test_installed_metadata_reads_the_same_version() -> None:
    assert version("oip-serverless") == handler.__version__


def test_server_metadata_from_copied_code_has_the_version(tmp_path: Path) -> None:
    """As `sam build` lays the function out: handler/ and adapters/ copied, no dist-info for oip-serverless."""
    for room in ("handler", "adapters", "proto"):
        shutil.copytree(ROOT / room, tmp_path / room, ignore=shutil.ignore_patterns("__pycache__"))
    program = (
        "import importlib.metadata as m, sys\n"
        "real = m.version\n"
        "def version(name):  # as on Lambda: no dist-info for oip-serverless\n"
        "    if name == 'oip-serverless': raise m.PackageNotFoundError(name)\n"
        "    return real(name)\n"
        "m.version = version\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import handler; assert handler.__file__.startswith(sys.path[0]), handler.__file__\n"
        "from handler.runtime.container import build_dataplane\n"
        "from handler.config.settings import Settings\n"
        f"dataplane = build_dataplane(Settings.from_env(model_repository={str(tmp_path / 'models')!r}))\n"
        "print(dataplane.server_metadata('rest')['version'])\n"
    )
    (tmp_path / "models").mkdir()
    found = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == handler.__version__
