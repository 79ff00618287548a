"""The product describes itself as it is: the README, the docs, the bench index, and the code's comments,
docstrings and test names carry no account of how it came to be (that is CHANGELOG.md's and git's job)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRECTORIES = ("handler", "adapters", "tests", "bench", "scripts")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".yaml", ".yml", ".sh", ".proto"}
DOCUMENTS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# Spelled in pieces, so that this file does not match itself.
_S = "s" + "ession"
#: What names a stretch of development rather than the product: work sessions, issue numbers, comparisons with an
#: earlier state of the code.
HISTORY = re.compile(
    rf"\b[Ss]{_S[1:]} [0-9]|\b([Tt]his|[Ll]ast|[Pp]revious) {_S}\b|\b[Ii]{'ssue'}s? #?[0-9]{{1,3}}\b"
    rf"|\bas {'before'}\b|_as_{'before'}\b|\bprevious{'ly'}\b|\bexisting {'decoder'}\b|\bbefore this {'work'}\b"
    rf"|\bthis {'change'}\b|\bthe previous (code|round|{_S})"
)
#: In the documentation also rounds of work and the code's former states.
DOCUMENT_HISTORY = re.compile(rf"{HISTORY.pattern}|\bno {'longer'}\b|\bround [0-9]|\bthe old (code|path|decoder)\b")


def _code_files() -> list[Path]:
    return sorted(
        path
        for directory in CODE_DIRECTORIES
        for path in (ROOT / directory).rglob("*")
        if path.suffix in TEXT_SUFFIXES and path.is_file() and "__pycache__" not in path.parts
    )


def _matches(path: Path, pattern: re.Pattern[str]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]


@pytest.mark.parametrize("page", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_documentation_tells_no_history(page: Path) -> None:
    assert not _matches(page, DOCUMENT_HISTORY)


def test_comments_docstrings_and_test_names_tell_no_history() -> None:
    found = [line for path in _code_files() for line in _matches(path, HISTORY)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("measured in sess" + "ion 7", True),
        ("figures of the previous sess" + "ion", True),
        ("see iss" + "ue 15's table", True),
        ("def test_fails_as_" + "before():", True),
        ("the exist" + "ing decoder", True),
        ("a session of the event loop", False),
        ("issue a request", False),
        ("before the first request", False),
    ],
)
def test_the_pattern_finds_history_and_only_history(text: str, found: bool) -> None:
    assert bool(HISTORY.search(text)) is found
