"""User pages speak to users: they never point into the test suite (``tests/...``), and ``oip``'s help texts name no
source file and quote no benchmark figure. Development, Architecture and Performance are for contributors and may."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_examples import USER_PAGES

ROOT = Path(__file__).resolve().parents[2]
TEST_PATH = re.compile(r"\btests/[\w./-]*")
SOURCE_PATH = re.compile(r"\b(?:handler|adapters|scripts|tests)/[\w/]*\.py\b")
BENCHMARK_FIGURE = re.compile(r"\d+\s*%|perf_analyzer|\brequests?/s\b", re.IGNORECASE)


@pytest.mark.parametrize("page", USER_PAGES)
def test_user_page_points_into_no_test(page: str) -> None:
    text = (ROOT / "docs" / f"{page}.md").read_text()
    found = [(text.count("\n", 0, m.start()) + 1, m[0]) for m in TEST_PATH.finditer(text)]
    assert not found, f"docs/{page}.md points into the tests at (line, path) {found}"


@pytest.mark.parametrize("command", ["serve", "invoke", "batch", "redrive"])
def test_help_names_no_source_file_and_no_benchmark(command: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "handler.cli", command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert not SOURCE_PATH.findall(text) and not BENCHMARK_FIGURE.findall(text), (
        SOURCE_PATH.findall(text),
        BENCHMARK_FIGURE.findall(text),
    )
