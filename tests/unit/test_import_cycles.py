"""No import cycle between the modules of ``handler/`` and ``adapters/``: read with the stdlib's ``ast``, every
import a module makes (at its top or inside a function; not under ``if TYPE_CHECKING:``) is an edge, and the graph
has no strongly connected component of more than one module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("handler", "adapters")


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the packages (a package by its ``__init__``)."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, skipping the bodies of ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        if isinstance(node, ast.If) and _under_type_checking(node):
            yield from (i for child in node.orelse for i in _imports(ast.Module(body=[child], type_ignores=[])))
            continue
        yield from _imports(node)


def _targets(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The modules of the packages that one import statement imports."""

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    if isinstance(node, ast.Import):
        return {t for alias in node.names if (t := known(alias.name))}
    base = node.module or ""
    if node.level:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return {t for alias in node.names if (t := known(f"{base}.{alias.name}" if base else alias.name))}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = set().union(*(_targets(name, path, node, modules) for node in _imports(tree)))
        graph[name] = {target for target in edges if target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_handler_or_adapters_imports_itself_through_others() -> None:
    assert cycles(import_graph()) == []


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_imports_are_read_inside_functions_and_not_under_type_checking() -> None:
    graph = import_graph()
    assert "handler.observability.tracing" in graph["handler.rest.starlette_app"]  # inside a function
    assert "adapters.triton.passthrough" not in graph["handler.rest.inference"]  # under TYPE_CHECKING
