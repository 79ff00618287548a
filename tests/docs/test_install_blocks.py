"""The user pages' ``pip install`` blocks, as a new user runs them: in a new venv (never the one running the tests),
from a clone of the repository, one after the other in page order, each leaving an ``oip`` that runs. The packages
come from the index pip is configured with, as on a fresh machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_reader_blocks import clone_view, install_blocks

#: A new venv downloads every dependency: minutes, not the default test timeout.
INSTALL_TIMEOUT = 900


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_the_install_blocks_install_an_oip_that_runs(tmp_path: Path) -> None:
    blocks = install_blocks()
    assert any(block.page.stem == "getting-started" for block in blocks), "getting-started's install is found"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (tmp_path / "clone").mkdir()
    clone = clone_view(tmp_path / "clone")
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"VIRTUAL_ENV": str(venv)}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"  # the venv's pip and oip, as once activated
    for block in blocks:
        installed = subprocess.run(
            ["bash", "-e", "-c", block.code],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
        assert installed.returncode == 0, f"{block.name}:\n{installed.stderr[-3000:]}"
        runs = subprocess.run([str(venv / "bin" / "oip"), "serve", "--help"], capture_output=True, text=True)
        assert runs.returncode == 0 and "usage: oip serve" in runs.stdout, (block.name, runs.stderr[-2000:])
