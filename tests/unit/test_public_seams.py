"""handler/ and adapters/ use other libraries through their public API only: an AST scan of every module.

What it refuses, anywhere in those two packages:
- importing a private module of another package (``import uvicorn._subprocess``, ``from anyio._backends import x``,
  ``from uvicorn import _subprocess``), also by name in a string (``import_module("anyio._backends._asyncio")``, a
  dotted module path among a tuple of names);
- reading, calling or assigning ``<something>._name``, unless ``<something>`` is ``self``, ``cls`` or ``super()`` in
  a class of ours that defines ``_name`` itself (or whose own base classes of ours do), or a name bound to one of
  our own modules or classes. So another object's private attribute is refused even when its class is ours
  (``self.client._as_json()``), and so is a private attribute a class inherits from a library's base class;
- assigning an attribute of another package's module or class (``uvicorn_module.spawn = ...``, monkey-patching);
- a function's ``__code__`` (reading another library's code instead of calling it).

Documented names that happen to start with an underscore are allowed: ``os._exit`` and the namedtuple methods; so
are annotations in a module with ``from __future__ import annotations``, which are never evaluated (typeshed's
``argparse._SubParsersAction`` names a type that argparse does not export).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The packages scanned, which are also what counts as "ours".
OURS = ("handler", "adapters")
#: Public names with a leading underscore: ``os._exit`` and namedtuple's methods and fields attribute.
DOCUMENTED = frozenset({"_exit", "_replace", "_asdict", "_make", "_fields", "_field_defaults"})
#: Function internals: reading them is reading another library's code.
CODE_ATTRIBUTES = frozenset({"__code__", "__closure__", "__globals__"})
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    return module.split(".")[0] in OURS


def _private_path(module: str) -> bool:
    return any(_private(part) for part in module.split("."))


@dataclass
class _Class:
    """A class of ours: the private names it defines, and its base classes (names as written in the module)."""

    defined: set[str] = field(default_factory=set)
    bases: list[str] = field(default_factory=list)


def _class_of(node: ast.ClassDef) -> _Class:
    found = _Class(bases=[ast.unparse(base) for base in node.bases])
    for child in ast.walk(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _private(child.name):
            found.defined.add(child.name)
        targets: list[ast.expr] = []
        if isinstance(child, ast.Assign):
            targets = child.targets
        elif isinstance(child, ast.AnnAssign | ast.AugAssign):
            targets = [child.target]
        for target in targets:
            for element in ast.walk(target):
                if isinstance(element, ast.Name) and _private(element.id):
                    found.defined.add(element.id)  # a class attribute (or a dataclass field)
                elif (
                    isinstance(element, ast.Attribute)
                    and isinstance(element.value, ast.Name)
                    and element.value.id in ("self", "cls")
                ):
                    found.defined.add(element.attr)
    return found


class _Module:
    """One module's names: what each imported name is bound to, and its classes."""

    def __init__(self, tree: ast.Module, dotted: str) -> None:
        self.imported: dict[str, str] = {}  # name -> the module or object it is bound to (dotted)
        self.classes: dict[str, _Class] = {}
        package = dotted.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imported[alias.asname] = alias.name
                    else:
                        self.imported[alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = _class_of(node)


def _defines(classes: dict[str, _Class], name: str, attribute: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether class ``name`` of ours, or one of its own base classes of ours, defines ``attribute``."""
    found = classes.get(name)
    if found is None or name in seen:
        return False
    if attribute in found.defined:
        return True
    return any(_defines(classes, base.split(".")[-1], attribute, seen | {name}) for base in found.bases)


class _Scan(ast.NodeVisitor):
    def __init__(self, module: _Module, classes: dict[str, _Class], where: str, tree: ast.Module) -> None:
        self.module, self.classes, self.where = module, classes, where
        self.enclosing: list[str] = []
        self.found: list[str] = []
        #: With postponed evaluation an annotation is never evaluated: it names a type for the type checker only.
        self.lazy_annotations = any(
            isinstance(node, ast.ImportFrom)
            and node.module == "__future__"
            and any(alias.name == "annotations" for alias in node.names)
            for node in tree.body
        )

    def _report(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.where}:{getattr(node, 'lineno', 0)}: {what}")

    def _bound_to(self, node: ast.expr) -> str | None:
        """The dotted module or object a name (or a chain of attributes on one) was imported as, if it was."""
        if isinstance(node, ast.Name):
            return self.module.imported.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._bound_to(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_arg(self, node: ast.arg) -> None:
        if not self.lazy_annotations:
            self.generic_visit(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for child in ast.iter_child_nodes(node):
            if child is not node.returns or not self.lazy_annotations:
                self.visit(child)

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        for child in (node.target, node.value) if self.lazy_annotations else (node.target, node.annotation, node.value):
            if child is not None:
                self.visit(child)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.enclosing.append(node.name)
        self.generic_visit(node)
        self.enclosing.pop()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _ours(alias.name) and _private_path(alias.name):
                self._report(node, f"imports the private module {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or _ours(module) or module == "__future__":
            return
        if _private_path(module):
            self._report(node, f"imports from the private module {module}")
        for alias in node.names:
            if _private(alias.name):
                self._report(node, f"imports the private name {alias.name} of {module}")

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if (
            isinstance(value, str)
            and DOTTED.fullmatch(value)
            and not _ours(value)
            and _private_path(value)
            and find_spec(value.split(".")[0]) is not None  # a module's path, not any dotted text
        ):
            self._report(node, f"names the private module {value}")

    def _own_receiver(self, receiver: ast.expr, attribute: str) -> bool:
        """Whether ``receiver._attribute`` is ours to touch."""
        is_self = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
        is_super = (
            isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super"
        )
        if is_self or is_super:
            return bool(self.enclosing) and _defines(self.classes, self.enclosing[-1], attribute)
        if isinstance(receiver, ast.Name) and receiver.id in self.module.classes:
            return True  # a class of this module
        bound = self._bound_to(receiver)
        return bound is not None and _ours(bound)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in CODE_ATTRIBUTES:
            self._report(node, f"reads {node.attr}")
        elif _private(node.attr) and node.attr not in DOCUMENTED and not self._own_receiver(node.value, node.attr):
            self._report(node, f"touches the private attribute {ast.unparse(node)}")
        if isinstance(node.ctx, ast.Store | ast.Del):
            bound = self._bound_to(node.value)
            if bound is not None and not _ours(bound):
                self._report(node, f"assigns {node.attr} of {bound} (another package's module or class)")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") and node.args:
            bound = self._bound_to(node.args[0])
            if bound is not None and not _ours(bound):
                self._report(node, f"{node.func.id} on {bound} (another package's module or class)")
        self.generic_visit(node)


def _modules(root: Path) -> Iterator[tuple[Path, str, ast.Module]]:
    for package in OURS:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            dotted = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
            yield relative, dotted, ast.parse(path.read_text(), str(relative))


def findings(root: Path) -> list[str]:
    """Every use of a private seam in ``root``'s handler/ and adapters/, as ``path:line: what``."""
    parsed = [(relative, _Module(tree, dotted), tree) for relative, dotted, tree in _modules(root)]
    classes: dict[str, _Class] = {}
    for _, module, _ in parsed:
        for name, found in module.classes.items():
            merged = classes.setdefault(name, _Class())
            merged.defined |= found.defined
            merged.bases += found.bases
    found: list[str] = []
    for relative, module, tree in parsed:
        scan = _Scan(module, classes, str(relative), tree)
        scan.visit(tree)
        found += scan.found
    return found


def test_handler_and_adapters_use_other_libraries_through_public_seams_only() -> None:
    assert findings(ROOT) == []


SEAMS = """
import importlib
import anyio._backends._asyncio
from uvicorn import _subprocess
from uvicorn._subprocess import get_subprocess
from aws_lambda_powertools.logging import logger as powertools_logger
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MODULES = ("anyio._backends._asyncio", "uvicorn.lifespan.on")


def fork() -> None:
    if "spawn" in get_subprocess.__code__.co_names:
        _subprocess.spawn = None
    setattr(powertools_logger, "is_cold_start", False)
    importlib.import_module("anyio._backends._asyncio")
    return powertools_logger._is_cold_start()


class Backend:
    def infer(self) -> None:
        return self.client._as_json()


class Guarded(HttpToolsProtocol):
    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
"""

ALLOWED = """
from __future__ import annotations

import argparse
import os
from collections import namedtuple

from handler.config import settings
from handler.config.settings import Settings

Point = namedtuple("Point", "x y")


class Base:
    _registry: dict[str, int] = {}

    def __init__(self) -> None:
        self._state = 1

    def _helper(self) -> int:
        return self._state


class Child(Base):
    def run(self) -> int:
        os.environ.get("X")
        self._extra = super()._helper() + self._helper() + Base._registry.get("x", 0)
        return settings._private_of_ours() + Settings._cache + self._extra + type(self).__name__.count("C")

    @classmethod
    def make(cls) -> int:
        return cls._registry.get("y", 0) + Point(1, 2)._replace(x=3).x

    def stop(self, commands: argparse._SubParsersAction) -> None:
        os._exit(0)
"""


def _tree_with(tmp_path: Path, source: str) -> Path:
    for package in OURS:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "handler" / "seams.py").write_text(source)
    return tmp_path


def test_the_scan_finds_each_kind_of_private_seam(tmp_path: Path) -> None:
    found = "\n".join(findings(_tree_with(tmp_path, SEAMS)))
    line = {text.strip(): number for number, text in enumerate(SEAMS.splitlines(), 1)}
    expected = [
        (line["import anyio._backends._asyncio"], "imports the private module anyio._backends._asyncio"),
        (line["from uvicorn import _subprocess"], "imports the private name _subprocess of uvicorn"),
        (line["from uvicorn._subprocess import get_subprocess"], "imports from the private module uvicorn._subprocess"),
        (line['MODULES = ("anyio._backends._asyncio", "uvicorn.lifespan.on")'], "names the private module anyio."),
        (line['if "spawn" in get_subprocess.__code__.co_names:'], "reads __code__"),
        (line["_subprocess.spawn = None"], "assigns spawn of uvicorn._subprocess"),
        (line['setattr(powertools_logger, "is_cold_start", False)'], "setattr on aws_lambda_powertools.logging."),
        (line['importlib.import_module("anyio._backends._asyncio")'], "names the private module anyio._backends."),
        (line["return powertools_logger._is_cold_start()"], "private attribute powertools_logger._is_cold_start"),
        (line["return self.client._as_json()"], "touches the private attribute self.client._as_json"),
        (line["self._unset_keepalive_if_required()"], "private attribute self._unset_keepalive_if_required"),
    ]
    for number, what in expected:
        assert f"handler/seams.py:{number}: " in found and what in found, (number, what, found)
    flagged = {int(entry.split(":")[1]) for entry in found.splitlines()}
    assert flagged == {number for number, _ in expected}, found


def test_the_scan_lets_our_own_private_names_and_documented_ones_be(tmp_path: Path) -> None:
    assert findings(_tree_with(tmp_path, ALLOWED)) == []
