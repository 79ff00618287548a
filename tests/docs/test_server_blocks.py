"""The user pages' blocks that start ``oip serve`` (every line of the block an ``oip serve`` command): each line
starts a server that comes up ready, on held ports instead of the page's (tests/support/doc_examples.py reads them)."""

from __future__ import annotations

import pytest

from tests.support.doc_examples import USER_PAGES, Block, blocks, page_path
from tests.support.doc_reader_blocks import needs_reader_files
from tests.support.servers import oip_serve

#: Options whose values the test replaces by held ports (or leaves to oip_serve): the page's ports may be taken.
PORT_OPTIONS = {"--host", "--port", "--grpc-port", "--metrics-port"}
#: Options oip_serve sets itself.
OWN_FLAGS = {"--access-log", "--no-access-log"}


def _server_blocks() -> list[Block]:
    return [
        block
        for stem in USER_PAGES
        for block in blocks(page_path(stem))
        if block.serve_commands and block.not_run is None and not needs_reader_files(block)
    ]


def _without_ports(args: list[str]) -> tuple[list[str], bool]:
    """The page's arguments without port options (and oip_serve's own flags), and whether it asked for gRPC."""
    kept: list[str] = []
    grpc, skip = False, False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in PORT_OPTIONS:
            grpc |= name == "--grpc-port"
            skip = "=" not in arg
        elif name not in OWN_FLAGS:
            kept.append(arg)
    return kept, grpc


@pytest.mark.parametrize("block", _server_blocks(), ids=lambda b: b.name)
def test_a_block_that_starts_oip_serve_starts_it(block: Block) -> None:
    for args in block.serve_commands:
        kept, grpc = _without_ports(args)
        with oip_serve(*kept, grpc=grpc, workers=1, access_log=None, drop=("MODEL_REPOSITORY", "AWS_", "OIP_")):
            pass  # ready (HTTP, and gRPC when asked) on entry, or oip_serve raises with the server's output


def test_the_pages_start_servers_as_shown() -> None:
    """getting-started's and serving's ``oip serve`` blocks are found (a change of convention would run none)."""
    pages = {block.page.stem for block in _server_blocks()}
    assert {"getting-started", "serving"} <= pages


def test_port_options_are_replaced() -> None:
    assert _without_ports(["--host", "0.0.0.0", "--port=8080", "--grpc-port", "8001", "--access-log", "-x"]) == (
        ["-x"],
        True,
    )
