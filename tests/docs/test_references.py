"""The references of the documentation, checked against the code they describe, so that neither drifts alone:
environment variables, ``oip`` options, template parameters and their defaults, the error table, the modules the
architecture page maps, and links that stay inside the repository."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from handler.protocol.status import GRPC_STATUS, HTTP_STATUS
from tests.support.code_reference import (
    ROOT,
    SCANNED,
    cli_options,
    declared_settings,
    environment_variables,
    template_parameters,
)
from tests.support.doc_markdown import CODE, first_column_names, section, table_rows

DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
#: Every page a reader is sent to: README, the site, the bench index and the changelog.
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md", *DOCS.rglob("*.md")])
OIP_NAME = re.compile(r"\bOIP_[A-Z0-9_]*[A-Z0-9]\b")


def test_every_environment_variable_the_code_reads_is_in_the_configuration_reference() -> None:
    documented = first_column_names(section(CONFIGURATION, "Environment variables"))
    missing = {name: sorted(modules) for name, modules in environment_variables().items() if name not in documented}
    assert not missing, f"read by the code, missing from docs/configuration.md: {missing}"


def _shown(text: str, reader: object) -> object:
    """A default as the page spells it, read as the setting's reader reads its variable."""
    from handler.config.variables import Reader

    assert isinstance(reader, Reader)
    return reader.parse("shown", text)


def test_the_reference_shows_each_declared_setting_with_its_default() -> None:
    """Every variable a settings field is declared with has its row; a field of one variable (not one read from
    several) with a default that is a value shows that default as the row's code span (the n-th one, in a row
    naming several variables with as many defaults), read as its variable is read."""
    rows = {
        name: (index, row)
        for row in table_rows(section(CONFIGURATION, "Environment variables"))
        for index, name in enumerate(CODE.findall(row[0]))
    }
    declared = declared_settings()
    assert not set(declared) - set(rows), f"declared, missing from docs/configuration.md: {set(declared) - set(rows)}"
    wrong, checked = {}, 0
    for name, (reader, default) in declared.items():
        index, row = rows[name]
        if type(reader).__name__ in ("Derived", "Parsed") or default in (None, "") or isinstance(default, tuple):
            continue
        shown = CODE.findall(row[1])
        assert shown, f"{name}: the page shows no default, the code's is {default!r}"
        text = shown[index] if len(shown) == len(CODE.findall(row[0])) else shown[0]
        checked += 1
        if _shown(text, reader) != default:
            wrong[name] = (text, default)
    assert not wrong, f"the page's default, the code's: {wrong}"
    assert checked >= 30, checked  # the check reads most of the table


def test_every_oip_variable_the_reference_lists_is_read_by_the_code() -> None:
    documented = first_column_names(section(CONFIGURATION, "Environment variables"))
    stale = {name for name in documented if name.startswith("OIP_")} - set(environment_variables())
    assert not stale, f"listed in docs/configuration.md, read nowhere in handler/ or adapters/: {sorted(stale)}"


@pytest.mark.parametrize(
    "page", [p for p in PAGES if p.name != "CHANGELOG.md"], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_every_oip_variable_a_page_names_is_read_somewhere(page: Path) -> None:
    """The server's code, or the project's scripts (``OIP_TOOLS_DIR``); the changelog may name what is gone."""
    read = set(environment_variables((*SCANNED, "scripts", "bench")))
    assert not set(OIP_NAME.findall(page.read_text())) - read


def test_the_environment_scan_finds_reads_of_every_form() -> None:
    """A constant, a module constant, a loop over names, a helper's parameter (through helpers)."""
    found = environment_variables()
    for name, module in [
        ("ORT_DISABLE_TELEMETRY", "adapters.onnx"),  # os.environ.setdefault("...")
        ("OIP_STATS_DIR", "handler.config.variables"),  # setting(MODULE_CONSTANT, ...): a declared variable
        ("AIP_PREDICT_ROUTE", "handler.config.variables"),  # any(raw(env, key) for key in (...))
        ("SAGEMAKER_BIND_TO_PORT", "handler.config.variables"),  # PORT.read_variable(env, "...") -> raw
        ("OIP_MAX_BODY_BYTES", "handler.config.variables"),  # setting("...", ...): a declared variable
        ("ORT_DISABLE_TELEMETRY", "handler.config.settings"),  # env.get("...", default)
        ("OIP_ROLLOUT_CHECKS", "handler.rollout.hook"),  # os.environ.get("...")
    ]:
        assert module in found.get(name, set()), name


@pytest.mark.parametrize("command", sorted(cli_options()))
def test_every_oip_option_is_documented_as_help_shows_it(command: str) -> None:
    documented = first_column_names(section(CONFIGURATION, f"oip {command}"))
    assert documented == cli_options()[command], f"oip {command}: the page and --help differ"


def test_every_oip_command_has_its_section() -> None:
    assert set(cli_options()) == {"serve", "invoke", "batch", "redrive"}
    for command in cli_options():
        section(CONFIGURATION, f"oip {command}")


def _shown_default(default: str | None) -> str:
    if default is None:
        return "(required)"
    return f"`{default}`" if default else "(empty)"


@pytest.mark.parametrize(
    ("template", "page", "title"),
    [
        ("template.yaml", "aws-lambda.md", "Template parameters"),
        ("infra/container.yaml", "aws-lambda.md", "Container image"),
        ("infra/triton-gpu.yaml", "triton-forwarding.md", "The GPU Triton server on AWS"),
    ],
)
def test_every_template_parameter_is_documented_with_its_default(template: str, page: str, title: str) -> None:
    rows = {CODE.findall(row[0])[0]: row for row in table_rows(section(DOCS / page, title)) if CODE.findall(row[0])}
    parameters = template_parameters(ROOT / template)
    missing = sorted(set(parameters) - set(rows))
    assert not missing, f"{template}'s parameters missing from docs/{page} '{title}': {missing}"
    shown = {name: _shown_default(default) for name, default in parameters.items()}
    wrong = {name: (rows[name][1], shown[name]) for name in parameters if rows[name][1] != shown[name]}
    assert not wrong, f"documented default, template default: {wrong}"
    assert not set(rows) - set(parameters), f"documented, not in {template}: {sorted(set(rows) - set(parameters))}"


def test_the_error_table_is_the_status_table() -> None:
    rows = {(row[0], row[1]) for row in table_rows(section(DOCS / "protocol.md", "Errors"))}
    expected = {(str(status), f"`{GRPC_STATUS[code]}`") for code, status in HTTP_STATUS.items()}
    assert rows == expected


def _modules() -> list[str]:
    return sorted(path.relative_to(ROOT).as_posix() for package in SCANNED for path in (ROOT / package).rglob("*.py"))


def test_the_architecture_page_maps_every_module() -> None:
    """Each module by its path; a package's ``__init__.py`` may be named by its directory (``handler/cli/``)."""
    text = (DOCS / "architecture.md").read_text()
    missing = [
        module
        for module in _modules()
        if f"`{module}`" not in text
        and not (module.endswith("/__init__.py") and f"`{module.removesuffix('__init__.py')}`" in text)
    ]
    assert not missing, f"modules docs/architecture.md does not map: {missing}"


def test_the_architecture_page_states_the_import_contracts() -> None:
    text = (DOCS / "architecture.md").read_text()
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    for contract in contracts:
        for layer in contract.get("layers", []):
            for module in re.split(r"[|:]", layer):
                assert f"`{module.strip()}`" in text, module.strip()
        for module in contract.get("source_modules", []) + contract.get("forbidden_modules", []):
            assert f"`{module}`" in text, module


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_stay_inside_the_repository_and_resolve(page: Path) -> None:
    """mkdocs checks the links between pages of the site; this checks the README's, the bench index's and the
    changelog's too, and that no page points outside the repository (``../shared/...``)."""
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert path.exists(), f"{page.name} links to a missing file: {target}"
