"""The layout of the tests (docs/development.md, "Where a module's tests are"): the tests of each module of handler/
and adapters/ are found from its name, helpers live in tests/support/, and a unit test starts no server."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
COVERS = re.compile(r"^# covers: (.+)$", re.MULTILINE)
#: Python files under tests/ that are no helpers: scripts a tool's own venv runs by path, and the Python models
#: tritonserver loads from a model repository.
NOT_HELPERS = (TESTS / "tool_scripts", TESTS / "integration" / "triton_models")
#: What starts a server process (or a tool's venv) in tests/support: a unit test uses none of them.
SERVER_STARTERS = {"oip_serve", "launch", "running", "moto_server"}
SERVER_MODULES = {"tests.support.triton_server", "tests.support.mlserver_env", "tests.support.kserve_env"}


def _modules() -> list[Path]:
    """Every module of handler/ and adapters/ that holds code: an ``__init__.py`` or ``__main__.py`` that defines no
    function or class is left out."""
    found = []
    for path in sorted([*(ROOT / "handler").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]):
        if path.name in ("__init__.py", "__main__.py"):
            tree = ast.parse(path.read_text())
            if not any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for node in tree.body):
                continue
        found.append(path.relative_to(ROOT))
    return found


def _name(module: Path) -> str:
    return module.parent.name if module.name in ("__init__.py", "__main__.py") else module.stem


def _test_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("test_*.py") if "__pycache__" not in path.parts)


def _covered() -> set[str]:
    """The module paths the test files name in ``# covers:`` lines."""
    return {path for test in _test_files() for line in COVERS.findall(test.read_text()) for path in line.split()}


def _found_by_name(module: Path, shared: Counter[str], test_names: list[str]) -> bool:
    """A test file named test_<name>[_...].py (the name only when no other module has it), or
    test_<package>_<name>[_...].py."""
    name = _name(module)
    keys = {f"{module.parent.name}_{name}"} | ({name} if shared[name] == 1 else set())
    return any(test == f"test_{key}" or test.startswith(f"test_{key}_") for test in test_names for key in keys)


def test_every_module_of_handler_and_adapters_has_a_test_file_found_from_its_name() -> None:
    modules = _modules()
    shared = Counter(_name(module) for module in modules)
    test_names = [test.stem for test in _test_files()]
    covered = _covered()
    missing = [
        str(module)
        for module in modules
        if not _found_by_name(module, shared, test_names) and str(module) not in covered
    ]
    assert not missing, (
        "modules with no test file named test_<name>*.py (test_<package>_<name>*.py) and no test file saying "
        "'# covers: <path>': " + ", ".join(missing)
    )


def test_covers_lines_name_modules_that_exist() -> None:
    gone = sorted(path for path in _covered() if not (ROOT / path).is_file())
    assert not gone, f"'# covers:' lines name modules that do not exist: {gone}"


def test_helpers_live_in_tests_support() -> None:
    misplaced = [
        str(path.relative_to(ROOT))
        for path in sorted(TESTS.rglob("*.py"))
        if "__pycache__" not in path.parts
        and not path.name.startswith("test_")
        and path.name not in ("conftest.py", "__init__.py")
        and path.parent != TESTS / "support"
        and not any(path.is_relative_to(place) for place in NOT_HELPERS)
    ]
    assert not misplaced, f"helper modules outside tests/support/: {misplaced}"


def _starters(tree: ast.Module) -> set[str]:
    """What of tests/support's server starters a test module imports or calls through its module."""
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "tests.support.servers":
            used |= {alias.name for alias in node.names} & SERVER_STARTERS
        elif isinstance(node, ast.ImportFrom) and node.module in SERVER_MODULES:
            used.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.module == "tests.support":
            used |= {f"tests.support.{alias.name}" for alias in node.names} & SERVER_MODULES
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "servers":
            used |= {node.attr} & SERVER_STARTERS
    return used


def test_unit_tests_start_no_server() -> None:
    """A unit test runs in the test process (a fresh interpreter for an import check at most): one that starts
    ``oip serve``, moto, tritonserver or a tool's venv belongs in tests/component or tests/integration."""
    starting = {
        str(path.relative_to(ROOT)): sorted(used)
        for path in sorted((TESTS / "unit").rglob("test_*.py"))
        if (used := _starters(ast.parse(path.read_text())))
    }
    assert not starting, f"unit tests that start servers: {starting}"
