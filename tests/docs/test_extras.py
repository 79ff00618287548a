"""The extras the pages name for a client bring that client: the extra a page installs (``pip install -e '.[x]'``)
in the lines before an ``import tritonclient.http`` (or ``.grpc``) block declares ``tritonclient[http]`` (or
``[grpc]``) in pyproject.toml, and the getting-started table lists exactly the extras pyproject declares."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.support.doc_examples import PAGES, ROOT, blocks
from tests.support.doc_markdown import CODE, table_rows

EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
CLIENT_IMPORT = re.compile(r"^import tritonclient\.(http|grpc)\b", re.M)
NAMED_EXTRA = re.compile(r"pip install -e '\.\[([\w,-]+)\]'")


def _client_blocks() -> list[tuple[str, str, str]]:
    """(page:line, client, the prose just before the block) for every block importing a tritonclient client."""
    found = []
    for page in PAGES:
        if page.parent.name != "docs" or page.stem in {"development", "architecture", "performance"}:
            continue
        lines = page.read_text().splitlines()
        for block in blocks(page):
            match = CLIENT_IMPORT.search(block.code)
            if match:
                before = lines[max(0, block.line - 12) : block.line - 1]
                found.append((f"{page.name}:{block.line}", match[1], "\n".join(before)))
    return found


CLIENT_BLOCKS = _client_blocks()


def test_some_pages_import_a_client() -> None:
    assert any(client == "http" for _, client, _ in CLIENT_BLOCKS)


@pytest.mark.parametrize(("where", "client", "prose"), CLIENT_BLOCKS, ids=[where for where, _, _ in CLIENT_BLOCKS])
def test_the_extra_named_before_a_client_import_brings_that_client(where: str, client: str, prose: str) -> None:
    named = [extra for extras in NAMED_EXTRA.findall(prose) for extra in extras.split(",")]
    if where.startswith("getting-started"):
        assert named, f"{where}: say which extra brings tritonclient.{client}"
    for extra in named:
        assert extra in EXTRAS, (where, extra)
        requirements = " ".join(EXTRAS[extra])
        assert re.search(rf"tritonclient\[[^\]]*\b{client}\b", requirements), (where, extra, EXTRAS[extra])


def test_the_extras_table_lists_the_declared_extras() -> None:
    page = ROOT / "docs" / "getting-started.md"
    listed = {name for row in table_rows(page.read_text()) for name in CODE.findall(row[0])}
    assert listed >= set(EXTRAS), set(EXTRAS) - listed
