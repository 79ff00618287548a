"""The code examples of the documentation, as fenced blocks read from the pages.

A ``bash`` or ``python`` block that addresses a local server (``localhost:8000``, ``127.0.0.1:8000``, and the gRPC
port ``8001``) is an example that runs: the tests start ``oip serve`` over the demo repository and run it against
that server. The fenced block right after it, when its info string carries ``title="Output"``, is what it prints:
compared with whitespace normalised, ``...`` standing for any text; titled ``Output (stderr, exit status N)``, it is
what the example writes to stderr, its commands run to the end and the last exiting with N. A block that shows its
output runs too, server or not. A small extractor rather than pytest-examples or mktestdocs: those run Python blocks
only (this documentation is mostly curl) and add a dependency for what forty lines do.

A block that is neither is either a file of the repository shown whole (``title="infra/..."``, compared with that
file) or marked by an HTML comment on the line right above its fence, ``<!-- not run: why -->``, which the tests
count per page (docs/development.md).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
#: The pages written for users, whose every fenced block runs, is a repository file or is marked not run.
USER_PAGES = (
    "getting-started",
    "configuration",
    "operations",
    "aws-lambda",
    "s3-tensors",
    "batch",
    "serving",
    "platforms",
    "protocol",
    "troubleshooting",
    "kubernetes",
    "safe-updates",
    "content-types",
    "triton-forwarding",
)
RUNNABLE_LANGUAGES = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python", "py": "python"}
#: The addresses examples use for the local server; the tests swap in the ports of the server they started.
HTTP_ADDRESS = re.compile(r"\b(localhost|127\.0\.0\.1):8000\b")
GRPC_ADDRESS = re.compile(r"\b(localhost|127\.0\.0\.1):8001\b")
#: How a block that calls an endpoint not addressed to the local server shows it is a deployment's example: a
#: placeholder (``<api-url>``), a shell variable (``$API_URL``) or one read from the environment
#: (``os.environ["API_URL"]``).
PLACEHOLDER = re.compile(r"<[a-z][\w .-]*>|\$\{?[A-Z_]+\}?|environ\[\"[A-Z_]+\"\]")
CALLS_A_SERVER = re.compile(r"\bcurl\b|InferenceServerClient|\bhttpx\.|\brequests\.(get|post)|\bawscurl\b")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>.*)$")
#: The mark of a block that does not run here, on the line right above its fence, with the reason.
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")
ERROR_OUTPUT = re.compile(r'title="Output \(stderr, exit status (?P<status>[0-9]+)\)"')
TITLE = re.compile(r'\btitle="(?P<title>[^"]*)"')


@dataclass(frozen=True)
class Block:
    """One fenced code block."""

    page: Path
    line: int
    language: str
    info: str
    code: str
    #: The reason given by a ``<!-- not run: ... -->`` mark above the fence (None without one).
    not_run: str | None = None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def is_output(self) -> bool:
        return 'title="Output"' in self.info or self.exit_status is not None

    @property
    def exit_status(self) -> int | None:
        """The exit status an ``Output (stderr, exit status N)`` block shows (None for other blocks)."""
        found = ERROR_OUTPUT.search(self.info)
        return int(found["status"]) if found else None

    @property
    def title(self) -> str | None:
        """The fence's ``title="..."`` (a file's path, or Output)."""
        found = TITLE.search(self.info)
        return found["title"] if found else None

    @property
    def serve_commands(self) -> list[list[str]]:
        """The arguments of each ``oip serve`` line when every command of this shell block is one (else none):
        such a block starts servers, and tests/docs/test_server_blocks.py starts each until it is ready."""
        if RUNNABLE_LANGUAGES.get(self.language) != "bash":
            return []
        lines = [line for line in self.code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if not lines or any(not re.match(r"oip serve\b", line) for line in lines):
            return []
        return [shlex.split(line, comments=True)[2:] for line in lines]

    @property
    def runs(self) -> bool:
        """Whether this is an example to run against the local server."""
        return self.language in RUNNABLE_LANGUAGES and bool(
            HTTP_ADDRESS.search(self.code) or GRPC_ADDRESS.search(self.code)
        )


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, in order (indented fences, as in lists, included)."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        mark = NOT_RUN.match(lines[index - 1]) if index > 0 else None
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != fence:
            body.append(lines[index][len(indent) :] if lines[index].startswith(indent) else lines[index].lstrip())
            index += 1
        language = info.split()[0] if info else ""
        code = "\n".join(body) + "\n"
        found.append(Block(page, index - len(body), language, info, code, mark["reason"] if mark else None))
        index += 1
    return found


@dataclass(frozen=True)
class Example:
    """A block that runs, and the output the page shows for it (None when it shows none)."""

    block: Block
    output: str | None
    #: The exit status its output block shows (its output is then stderr); None: 0, and the output is stdout.
    exit_status: int | None = None


def examples(page: Path) -> list[Example]:
    """The runnable examples of a page with their shown output: the next block, if it is titled Output and only
    blank lines separate the two."""
    text = page.read_text().splitlines()
    found = []
    page_blocks = blocks(page)
    for block, following in zip(page_blocks, [*page_blocks[1:], None], strict=False):
        if block.language not in RUNNABLE_LANGUAGES:
            continue
        output = None
        if following is not None and following.is_output:
            closing = block.line + block.code.count("\n")  # the closing fence's index in ``text`` (0-based)
            between = text[closing + 1 : following.line - 1]
            if all(not line.strip() for line in between):
                output = following.code
        if block.runs or output is not None:
            found.append(Example(block, output, following.exit_status if output is not None and following else None))
    return found


def _normalise(text: str) -> str:
    """Runs of whitespace as one space, none around JSON's punctuation: the page may pretty-print what the
    server writes compactly."""
    text = re.sub(r"\s+", " ", text.strip())
    return re.sub(r" ?([{}\[\],:]) ?", r"\1", text)


def output_matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is what the page shows, ``...`` matching any text."""
    pattern = ".*?".join(re.escape(part) for part in _normalise(shown).split("..."))
    return re.fullmatch(pattern, _normalise(printed), re.DOTALL) is not None


def page_path(stem: str) -> Path:
    """The user page ``docs/<stem>.md``."""
    return ROOT / "docs" / f"{stem}.md"


#: The address the pages start moto's server on; the test swaps in the one it started.
MOTO_ADDRESS = re.compile(r"http://127\.0\.0\.1:5000\b")


def moto_blocks() -> list[Block]:
    """Unmarked shell blocks that use moto's server without starting it or a long-running ``oip serve``."""
    return [
        block
        for stem in USER_PAGES
        for block in blocks(page_path(stem))
        if RUNNABLE_LANGUAGES.get(block.language) == "bash"
        and block.not_run is None
        and MOTO_ADDRESS.search(block.code)
        and "moto_server" not in block.code
    ]
