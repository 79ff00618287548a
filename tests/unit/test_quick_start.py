"""The README's quick start is what CI runs: its test command appears in .ci/run as written, inside a virtual
environment that .ci/run creates for the run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "the quick start has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_two_commands_serve_then_test() -> None:
    serve, test = quick_start_commands()
    assert serve.startswith("pip install -e . ") and serve.endswith("oip serve")
    assert "'.[dev]'" in test and test.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_in_a_venv_of_its_own() -> None:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    test = quick_start_commands()[1]
    assert test in lines
    made = next(i for i, line in enumerate(lines) if re.match(r"python3? -m venv ", line))
    activated = next(i for i, line in enumerate(lines) if re.match(r"source .*/bin/activate", line))
    assert made < activated < lines.index(test)
