"""Every fenced block of the user pages runs (tests/docs/test_examples.py), is the output shown for one that runs,
is a file of the repository shown whole, or is marked ``<!-- not run: why -->``; the marked ones are counted per
page and stay few."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.doc_data_blocks import checked_data_blocks
from tests.support.doc_examples import ROOT, USER_PAGES, Block, blocks, examples, moto_blocks, page_path
from tests.support.doc_reader_blocks import install_blocks, reader_blocks

#: The most blocks each page may mark as not run here. A page absent has none; lower a number when a block is made
#: to run, never raise one without a reason in the mark.
MARKED_AT_MOST = {
    "operations": 2,
    "aws-lambda": 7,
    "batch": 4,
    "serving": 1,
    "platforms": 2,
    "kubernetes": 5,
    "triton-forwarding": 3,
}


def _checked(page: Path) -> set[int]:
    """The lines of the blocks the docs tests run or compare: examples and the output shown for them, blocks
    that start ``oip serve`` (tests/docs/test_server_blocks.py), blocks that use moto (test_moto_blocks.py), the
    blocks a reader runs in a clone (test_reader_blocks.py), the installs (test_install_blocks.py) and the titled
    data blocks (test_data_blocks.py)."""
    lines = {block.line for block in blocks(page) if block.serve_commands and block.not_run is None}
    lines |= {block.line for block in moto_blocks() if block.page == page}
    lines |= {block.line for block in reader_blocks() if block.page == page}
    lines |= {block.line for block in install_blocks() if block.page == page}
    lines |= checked_data_blocks(page)
    for example in examples(page):
        lines.add(example.block.line)
        if example.output is not None:
            following = blocks(page)[[b.line for b in blocks(page)].index(example.block.line) + 1]
            lines.add(following.line)
    return lines


def _repository_file(block: Block) -> Path | None:
    title = block.title
    return ROOT / title if title and title != "Output" and (ROOT / title).is_file() else None


def marked_per_page() -> Counter[str]:
    return Counter(stem for stem in USER_PAGES for block in blocks(page_path(stem)) if block.not_run is not None)


@pytest.mark.parametrize("stem", USER_PAGES)
def test_every_block_runs_is_a_file_or_is_marked(stem: str) -> None:
    page = page_path(stem)
    checked = _checked(page)
    unaccounted = [
        block.name
        for block in blocks(page)
        if block.line not in checked and _repository_file(block) is None and block.not_run is None
    ]
    assert not unaccounted, f"blocks neither run, a repository file nor marked <!-- not run: why -->: {unaccounted}"


@pytest.mark.parametrize("stem", USER_PAGES)
def test_a_block_shown_as_a_file_is_that_file(stem: str) -> None:
    for block in blocks(page_path(stem)):
        path = _repository_file(block)
        if path is not None:
            assert block.code.strip() == path.read_text().strip(), f"{block.name} differs from {block.title}"


@pytest.mark.parametrize("stem", USER_PAGES)
def test_a_marked_block_says_why_and_does_not_also_run(stem: str) -> None:
    checked = _checked(page_path(stem))
    for block in blocks(page_path(stem)):
        if block.not_run is not None:
            assert block.not_run, f"{block.name}: the mark gives no reason"
            assert block.line not in checked, f"{block.name} runs: drop its mark"


def test_few_blocks_are_marked_not_run() -> None:
    counts = marked_per_page()
    print("blocks marked not run, per page:", dict(sorted(counts.items())), "total", sum(counts.values()))
    over = {stem: n for stem, n in counts.items() if n > MARKED_AT_MOST.get(stem, 0)}
    assert not over, f"more blocks marked not run than MARKED_AT_MOST allows: {over}"


def test_the_mark_is_read(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- not run: needs an AWS account -->\n```bash\naws s3 ls\n```\n\n```bash\nls\n```\n")
    marked, plain = blocks(page)
    assert marked.not_run == "needs an AWS account" and plain.not_run is None
