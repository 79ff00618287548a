"""The user pages' shell blocks addressed to moto's server on the reader's machine (``127.0.0.1:5000``) run
against a real moto server, from a directory that holds the repository's sample events (one that starts a server
and leaves it running is test_reader_blocks.py's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.test_examples import _run
from tests.support.doc_examples import MOTO_ADDRESS, ROOT, Block, Example, moto_blocks
from tests.support.doc_reader_blocks import starts_a_server
from tests.support.servers import moto_server


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.mark.parametrize(
    "block", [block for block in moto_blocks() if not starts_a_server(block)], ids=lambda b: b.name
)
def test_a_block_that_uses_moto_runs(block: Block, moto: str, tmp_path: Path) -> None:
    (tmp_path / "events").symlink_to(ROOT / "events")
    code = MOTO_ADDRESS.sub(moto, block.code)
    result = _run(Example(dataclasses.replace(block, code=code), None), (0, 0), tmp_path, {})
    assert result.returncode == 0, f"{block.name} failed:\n{code}\n{result.stderr[-3000:]}"


def test_the_batch_page_walks_through_moto() -> None:
    assert any(block.page.stem == "batch" for block in moto_blocks())
