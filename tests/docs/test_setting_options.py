"""docs/configuration.md's ``oip serve`` options, checked against the settings that declare them
(handler/config/settings.py, ``setting(..., option=...)``): each option's row names its variable and shows its
default, and each variable's row names its option."""

from __future__ import annotations

import re
from dataclasses import Field
from typing import Any

import pytest

from handler.config.settings import Settings
from handler.config.variables import Declaration, Derived, Option, declared_options
from tests.support.code_reference import ROOT
from tests.support.doc_markdown import CODE, section, table_rows

CONFIGURATION = ROOT / "docs" / "configuration.md"
OPTIONS = list(declared_options(Settings))
IDS = [each.name for each, _, _ in OPTIONS]


def _row(title: str, name: str) -> list[str]:
    (row,) = [row for row in table_rows(section(CONFIGURATION, title)) if name in CODE.findall(row[0])]
    return row


@pytest.mark.parametrize(("each", "declaration", "option"), OPTIONS, ids=IDS)
def test_an_options_row_names_its_variable_and_default(
    each: Field[Any], declaration: Declaration, option: Option
) -> None:
    """``VARIABLE``, else the default: read as the variable is, the field's default, where that is a value."""
    row = _row("oip serve", option.flags[0])
    negated = [option.flags[0].replace("--", "--no-", 1)] if option.negatable else []
    assert CODE.findall(row[0]) == [*option.flags, *negated], "the page lists the option's spellings in their order"
    assert row[1].startswith(f"`{declaration.variable}`, else "), row[1]
    if option.default is not None or each.default is None or isinstance(declaration.reader, Derived):
        return
    shown = re.split(r"[\s(;,]", row[1].removeprefix(f"`{declaration.variable}`, else ").strip("`"))[0].strip("`")
    assert declaration.reader.parse(declaration.variable, shown) == each.default, (row[1], each.default)


@pytest.mark.parametrize(("each", "declaration", "option"), OPTIONS, ids=IDS)
def test_a_variables_row_names_its_option(each: Field[Any], declaration: Declaration, option: Option) -> None:
    row = _row("Environment variables", declaration.variable)
    assert option.flags[0] in " ".join(row[2:]), row
