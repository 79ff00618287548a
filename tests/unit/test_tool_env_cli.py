"""``python -m scripts.tool_env``, as the README and the AWS Lambda page tell a user to run it: ``--help`` lists the
tools, an unknown name is one usage line and exit status 2, and the SAM CLI is a tool it knows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool_env(*args: str, tools_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OIP_TOOLS_DIR=str(tools_dir))
    command = [sys.executable, "-m", "scripts.tool_env", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_help_lists_the_tools_and_where_they_go(tmp_path: Path) -> None:
    result = _tool_env("--help", tools_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert text.startswith("usage: python -m scripts.tool_env")
    # argparse wraps its help at the terminal's width, breaking a long path at its hyphens
    assert "sam, moto" in text and str(tmp_path) in "".join(text.split())
    assert list(tmp_path.iterdir()) == []  # asking for help installs nothing


def test_unknown_tool_is_one_usage_error(tmp_path: Path) -> None:
    result = _tool_env("sam-cli", tools_dir=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1].startswith("python -m scripts.tool_env: error: unknown tool 'sam-cli'")
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_pages_install_a_tool_it_knows() -> None:
    from scripts.tool_env import TOOLS

    for page in (ROOT / "README.md", ROOT / "docs" / "aws-lambda.md"):
        text = page.read_text()
        assert "python -m scripts.tool_env sam" in text and "pip install aws-sam-cli" in text, page
    assert any(requirement.startswith("aws-sam-cli==") for requirement in TOOLS["sam"].requirements)
