"""Just enough Markdown for the reference checks: a page's sections and the rows of their tables."""

from __future__ import annotations

import re
from pathlib import Path

HEADING = re.compile(r"^(#{1,6}) +(.*?) *$")
CODE = re.compile(r"`([^`]+)`")


def _without_fences(text: str) -> list[str]:
    """The page's lines with fenced code blocks blanked (a `#` comment in a block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            lines.append("")
            continue
        lines.append("" if fenced else line)
    return lines


def section(page: Path, title: str) -> str:
    """The text under the heading whose title (backticks dropped) is ``title``, down to the next heading of the
    same or a higher level."""
    lines = _without_fences(page.read_text())
    for index, line in enumerate(lines):
        match = HEADING.match(line)
        if match and match[2].replace("`", "") == title:
            level = len(match[1])
            end = next(
                (i for i in range(index + 1, len(lines)) if (m := HEADING.match(lines[i])) and len(m[1]) <= level),
                len(lines),
            )
            return "\n".join(lines[index + 1 : end])
    raise LookupError(f"{page.name} has no section '{title}'")


def table_rows(text: str) -> list[list[str]]:
    """The body rows of every table in ``text``, as lists of cells (header and rule rows left out)."""
    rows: list[list[str]] = []
    previous = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|"):
            cells = [cell.strip() for cell in stripped[1:-1].split("|")]
            is_rule = all(re.fullmatch(r":?-+:?", cell) for cell in cells)
            is_header = not previous.startswith("|")
            if not is_rule and not is_header:
                rows.append(cells)
        previous = stripped
    return rows


def first_column_names(text: str) -> set[str]:
    """Every backticked name in the first cell of the tables of ``text``."""
    return {name for row in table_rows(text) for name in CODE.findall(row[0])}
