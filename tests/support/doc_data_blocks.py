"""The user pages' blocks that are no command but are checked by using them as a reader would, chosen by their fence's
``title`` (tests/docs/test_data_blocks.py checks every block a title names, so a title is a promise):

- ``config.pbtxt``: a model configuration (or a fragment of iris's) that a served model loads with;
- ``prometheus.yml``: a Prometheus configuration that ``promtool check config`` accepts and that scrapes
  ``oip serve``;
- ``PromQL``: a query that a real Prometheus scraping ``oip serve`` answers;
- ``Request`` and ``Response``: a request body the server answers with the response body shown;
- ``IAM policy``: the policy statement the template grants;
- ``Start-up log``: the lines ``oip serve`` writes as it starts, in order, with the command the page gives;
- ``Version resource``: the resource ``oip serve`` shows for a version configured with the block's labels and
  scaling, once it has served a prediction;
- ``RolloutChecks``: the rollout hooks' checks, which pass on a function serving a model of the shape they send;
- ``pyproject.toml of my_package``: a package whose entry point makes the page's codec known once installed.

Getting-started's repository layout (a tree drawn with ``└──``) is the one tests/docs/test_reader_blocks.py serves.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.doc_examples import USER_PAGES, Block, blocks, page_path

#: A package's pyproject.toml declaring a codec entry point (content-types).
PACKAGE_TITLE = "pyproject.toml of my_package"
CHECKED_TITLES = (
    "config.pbtxt",
    "prometheus.yml",
    "PromQL",
    "Request",
    "Response",
    "IAM policy",
    "Start-up log",
    "Version resource",
    "RolloutChecks",
    PACKAGE_TITLE,
)


def titled(title: str) -> list[Block]:
    """The blocks of the user pages whose fence has ``title="<title>"``, unmarked."""
    return [
        block
        for stem in USER_PAGES
        for block in blocks(page_path(stem))
        if block.title == title and block.not_run is None
    ]


def layout_blocks(page: Path) -> list[Block]:
    """A directory tree drawn with ``├──``/``└──`` on getting-started (its repository layout)."""
    return [block for block in blocks(page) if page.stem == "getting-started" and "└──" in block.code]


def checked_data_blocks(page: Path) -> set[int]:
    """The lines of the page's blocks that test_data_blocks.py and the layout test check."""
    lines = {block.line for title in CHECKED_TITLES for block in titled(title) if block.page == page}
    return lines | {block.line for block in layout_blocks(page) if block.not_run is None}
