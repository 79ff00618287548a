"""Every import in tests/ and bench/ is the project's own, the standard library's, or comes with the ``dev`` extra.

Tools whose pins conflict with the product's (scripts/tool_env.py) are reached only from scripts that run in the
tool's own venv: files that name it in a ``# tool venv: <name>`` line, which nothing in the product's environment
imports. So ``pip install -e '.[dev]' -c requirements-dev.txt`` in a new venv is all the suite needs.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from functools import cache
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts.tool_env import TOOLS

ROOT = Path(__file__).resolve().parents[2]
OWN = frozenset({"handler", "adapters", "proto", "tests", "bench", "scripts"})
TOOL_VENV = re.compile(r"^# tool venv: (\S+)", re.MULTILINE)


@cache
def dev_distributions() -> frozenset[str]:
    """The distributions ``oip-serverless[dev]`` brings, its own requirements' requirements included."""
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [("oip-serverless", frozenset({"dev"}))]
    while pending:
        name, extras = pending.pop()
        if (canonicalize_name(name), extras) in seen:
            continue
        seen.add((canonicalize_name(name), extras))
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if requirement.marker is None or any(requirement.marker.evaluate(env) for env in environments):
                pending.append((requirement.name, frozenset(requirement.extras)))
    return frozenset(name for name, _ in seen)


def imported_names(source: str) -> Iterator[tuple[int, str]]:
    """(line, top-level name) of every absolute import in ``source``, at any depth."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


@cache
def import_owners() -> dict[str, list[str]]:
    """Top-level import name -> the installed distributions that provide it (a scan of every installed RECORD)."""
    return metadata.packages_distributions()


def foreign_imports(source: str) -> list[str]:
    """The imports of ``source`` that neither the project, the standard library nor the ``dev`` extra provide."""
    owners = import_owners()
    allowed = dev_distributions()
    return [
        f"line {line}: {name}"
        for line, name in imported_names(source)
        if name not in OWN
        and name not in sys.stdlib_module_names
        and not any(canonicalize_name(owner) in allowed for owner in owners.get(name, []))
    ]


def sources() -> Iterator[Path]:
    for folder in ("tests", "bench"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_imports_come_with_the_dev_extra() -> None:
    wrong = {}
    for path in sources():
        source = path.read_text()
        if TOOL_VENV.search(source):
            continue
        if found := foreign_imports(source):
            wrong[str(path.relative_to(ROOT))] = found
    assert not wrong, f"imported from outside the dev extra (run such code in a tool venv): {wrong}"


def test_tool_venv_scripts_name_a_known_tool_and_are_not_imported() -> None:
    scripts = {path: TOOL_VENV.search(path.read_text()) for path in sources()}
    tools = {path: match.group(1) for path, match in scripts.items() if match}
    assert tools, "no tool venv scripts found"
    assert {name for name in tools.values() if name not in TOOLS} == set()
    modules = {".".join(path.relative_to(ROOT).with_suffix("").parts) for path in tools}
    importers = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources()
        if path not in tools
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom | ast.Import)
        for name in ([node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
        if name in modules
    ]
    assert not importers


def test_a_tool_imported_in_the_products_environment_is_caught() -> None:
    """PyTriton's client imported in a test module, and samtranslator inside a fixture."""
    source = "import numpy\nfrom pytriton.client import ModelClient\n\ndef f():\n    import samtranslator.parser\n"
    assert foreign_imports(source) == ["line 2: pytriton", "line 5: samtranslator"]


def test_the_dev_extra_is_read_from_the_installed_metadata() -> None:
    assert {"pytest", "onnx", "httpx", "numpy", "fastapi", "tritonclient"} <= dev_distributions()
    assert "nvidia-pytriton" not in dev_distributions() and "aws-sam-translator" not in dev_distributions()
