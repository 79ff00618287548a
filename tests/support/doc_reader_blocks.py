"""The user pages' shell and Python blocks that neither address the local server nor use moto's alone: commands a
reader types in a clone of the repository (``oip invoke``, ``oip batch``, the tool venvs), calls to a deployment
whose address comes from the environment (``$API_URL``, ``os.environ["INGRESS"]``), and blocks that start a server
and leave it running (``oip serve``, ``moto_server``).

They run in a clone view (a directory whose entries link to the repository's top level, so that what a block writes
stays there), with the inputs the pages say are the reader's own made for them (``READER_FILES``), and the
variables that stand for a deployment pointing at a local ``oip serve`` and moto's server.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np

from tests.support.doc_examples import (
    MOTO_ADDRESS,
    ROOT,
    RUNNABLE_LANGUAGES,
    USER_PAGES,
    Block,
    blocks,
    examples,
    page_path,
)

#: A command that starts a server and runs until stopped: ``oip serve`` (after variable assignments) or moto's.
SERVER_LINE = re.compile(r"^(?:[A-Z][A-Z0-9_]*=(?:'[^']*'|\"[^\"]*\"|\S+)\s+)*(?:oip serve\b|\S*/moto_server\b)")
#: The layout getting-started shows for a repository of one's own (checked against its text block).
LAYOUT = ("my-models/", "my-models/churn/", "my-models/churn/config.pbtxt", "my-models/churn/1/",
          "my-models/churn/1/model.onnx")  # fmt: skip
#: The inputs the pages name as the reader's own, by name.
READER_FILES = ("rows.jsonl", "images.npy", "x64.npy", "x.bin", *LAYOUT)
#: A deployment's variables in the pages, and what they stand for here: ``{http}`` the local server's address.
DEPLOYMENT_VARIABLES = {
    "API_URL": "http://{http}",
    "INGRESS": "{http}",
    "SERVICE_HOSTNAME": "iris.default.example.com",
}
AWS_VARIABLES = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def _command_lines(block: Block) -> list[str]:
    return [line for line in block.code.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def starts_a_server(block: Block) -> bool:
    """Whether the block's last command starts a server that runs until stopped."""
    lines = _command_lines(block)
    return RUNNABLE_LANGUAGES.get(block.language) == "bash" and bool(lines) and bool(SERVER_LINE.match(lines[-1]))


def server_lines(block: Block) -> list[str]:
    """The commands to start one by one: each line when every line starts a server, else the block whole."""
    lines = _command_lines(block)
    return lines if all(SERVER_LINE.match(line) for line in lines) else [block.code]


def needs_reader_files(block: Block) -> bool:
    """Whether an ``oip serve`` block serves the reader's own repository (a folder or a bucket), not the demo."""
    return any(re.search(r"--model-repository\s+(\./my-models|s3://)", line) for line in _command_lines(block))


def _is_moto_only(block: Block) -> bool:
    return bool(MOTO_ADDRESS.search(block.code)) and "moto_server" not in block.code and not starts_a_server(block)


def installs(block: Block) -> bool:
    """Whether every command of the block is a ``pip install`` (tests/docs/test_install_blocks.py runs those in a
    new venv, never in the one running the tests)."""
    lines = _command_lines(block)
    return (
        RUNNABLE_LANGUAGES.get(block.language) == "bash"
        and bool(lines)
        and all(line.startswith("pip install ") for line in lines)
    )


def install_blocks() -> list[Block]:
    """The unmarked ``pip install`` blocks of the user pages, in page order."""
    return [
        block for stem in USER_PAGES for block in blocks(page_path(stem)) if installs(block) and block.not_run is None
    ]


def reader_blocks() -> list[Block]:
    """Every unmarked shell or Python block of the user pages that no other docs test runs."""
    found = []
    for stem in USER_PAGES:
        page = page_path(stem)
        run_elsewhere = {example.block.line for example in examples(page)}
        for block in blocks(page):
            if block.language not in RUNNABLE_LANGUAGES or block.not_run is not None or block.line in run_elsewhere:
                continue
            if (block.serve_commands and not needs_reader_files(block)) or _is_moto_only(block) or installs(block):
                continue
            found.append(block)
    return found


def layout_paths(block: Block) -> list[str]:
    """The paths of a directory tree drawn with ``├──``/``└──`` (a name's column gives its depth; text after two
    spaces is a comment)."""
    paths: list[str] = []
    stack: list[tuple[int, str]] = []
    for line in block.code.splitlines():
        found = re.search(r"[^\s│├└─]", line)
        if not found:
            continue
        column, name = found.start(), re.split(r"\s{2,}", line[found.start() :])[0].strip()
        while stack and stack[-1][0] >= column:
            stack.pop()
        path = "".join(part for _, part in stack) + name
        stack.append((column, name))
        paths.append(path)
    return paths


def make_reader_files(directory: Path) -> None:
    """The reader's inputs: V2 requests for iris, images for tiny_image, float64 rows, one raw FP32 image batch,
    and a model repository in getting-started's layout (iris's model as ``churn``)."""
    row = '{"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}'
    (directory / "rows.jsonl").write_text(f"{row}\n" * 3)
    rng = np.random.default_rng(0)
    np.save(directory / "images.npy", rng.random((4, 3, 224, 224), dtype=np.float32))
    np.save(directory / "x64.npy", rng.random((5, 4)))
    (directory / "x.bin").write_bytes(rng.random((16, 3, 224, 224), dtype=np.float32).tobytes())
    for path in LAYOUT:
        if path.endswith("/"):
            (directory / path).mkdir()
    (directory / "my-models/churn/config.pbtxt").write_text("")
    shutil.copy(ROOT / "models/iris/1/model.onnx", directory / "my-models/churn/1/model.onnx")


#: Copied into a clone view rather than linked: SAM CLI resolves a linked template to the repository and then names
#: its code directories by a path relative to the view, which is wrong wherever the repository lies elsewhere.
COPIED = frozenset({"template.yaml"})


def clone_view(directory: Path) -> Path:
    """``directory`` with a link to each of the repository's top-level entries (``.git`` and caches left out) and
    the reader's files: a clone to run blocks in, whose writes stay out of the repository."""
    for entry in ROOT.iterdir():
        if entry.name in COPIED:
            shutil.copy(entry, directory / entry.name)
        elif entry.name not in {".git", ".aws-sam", "site"} and not entry.name.startswith((".", "__")):
            (directory / entry.name).symlink_to(entry)
    make_reader_files(directory)
    return directory
