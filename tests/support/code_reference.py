"""What the documentation's references must agree with, read from the code itself.

- ``environment_variables()``: every environment variable ``handler/`` and ``adapters/`` read, found by an AST
  walk (``os.environ.get(K)``, ``os.environ[K]``, ``os.getenv(K)``, ``K in env``, ``env.get(K)`` on a mapping
  bound to the environment), with ``K`` resolved through string constants, imported constants, the tuples a loop
  runs over and the call sites of the helper functions that take the name as a parameter; a declared setting's
  ``declaration.variable`` stands for every variable the settings dataclasses declare (``declared_settings()``).
- ``declared_settings()``: every variable a settings field is declared with, its reader and its default.
- ``cli_options()``: every ``oip`` subcommand's options and positionals, from the argparse parser ``oip`` runs.
- ``template_parameters()``: template.yaml's parameters and their defaults, CloudFormation's tags accepted.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("handler", "adapters")
#: Local names that hold the process environment (``env = os.environ``, or a ``Mapping`` parameter standing for it).
ENVIRONMENT_NAMES = frozenset({"env", "environ", "environment"})
READ_METHODS = frozenset({"get", "setdefault"})


#: The settings dataclasses, each field declared with its variable (handler/config/variables.py's ``setting``).
SETTINGS_CLASSES = (
    "handler.config.settings:Settings",
    "handler.config.lambda_settings:LambdaSettings",
    "handler.config.lambda_settings:BatchSettings",
)


def declared_settings() -> dict[str, tuple[Any, Any]]:
    """Every variable a settings field is declared with -> (its reader, the field's default)."""
    from handler.config.variables import declared_variables

    classes = [getattr(importlib.import_module(path), name) for path, name in (c.split(":") for c in SETTINGS_CLASSES)]
    return declared_variables(*classes)


class UnresolvedName(Exception):
    """An environment read whose name the scanner cannot work out (teach the scanner, or use a constant)."""


@dataclass(frozen=True)
class _Module:
    name: str
    path: Path
    tree: ast.Module
    parents: dict[ast.AST, ast.AST]


def _modules(directories: tuple[str, ...] = SCANNED) -> Iterator[_Module]:
    for package in directories:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).with_suffix("")
            parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
            tree = ast.parse(path.read_text(), str(path))
            parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
            yield _Module(".".join(parts), path, tree, parents)


def _is_environment(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id in ENVIRONMENT_NAMES


def _read_keys(module: _Module) -> Iterator[ast.expr]:
    """The key expressions of every read of the environment in ``module``."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            reads = isinstance(func, ast.Attribute) and func.attr in READ_METHODS and _is_environment(func.value)
            getenv = (isinstance(func, ast.Attribute) and func.attr == "getenv") or (
                isinstance(func, ast.Name) and func.id == "getenv"
            )
            if reads or getenv:
                yield node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environment(node.value):
            yield node.slice
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _is_environment(node.comparators[0])
        ):
            yield node.left


class _Resolver:
    """Resolves a key expression to the environment variable names it can hold."""

    def __init__(self, modules: list[_Module]) -> None:
        self.modules = modules
        self.module_of: dict[ast.AST, _Module] = {}
        for module in modules:
            for node in ast.walk(module.tree):
                self.module_of[node] = module

    def names(self, node: ast.expr, depth: int = 0) -> set[str]:
        module = self.module_of[node]
        if depth > 8:
            raise UnresolvedName(f"{module.path}:{node.lineno}: too deep")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Attribute) and node.attr == "variable":
            return set(declared_settings())  # a declaration's variable: any the settings declare
        if isinstance(node, ast.Attribute):
            return {self._imported_attribute(module, node)}
        if isinstance(node, ast.Name):
            return self._name(module, node, depth)
        raise UnresolvedName(f"{module.path}:{node.lineno}: {ast.unparse(node)}")

    def _imported_attribute(self, module: _Module, node: ast.Attribute) -> str:
        """``constants.X`` where ``constants`` is an imported module."""
        if isinstance(node.value, ast.Name):
            for statement in ast.walk(module.tree):
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        if (alias.asname or alias.name) == node.value.id:
                            target = importlib.import_module(f"{statement.module}.{alias.name}")
                            return str(getattr(target, node.attr))
                if isinstance(statement, ast.Import):
                    for alias in statement.names:
                        if (alias.asname or alias.name) == node.value.id:
                            return str(getattr(importlib.import_module(alias.name), node.attr))
        raise UnresolvedName(f"{module.path}:{node.lineno}: {ast.unparse(node)}")

    def _name(self, module: _Module, node: ast.Name, depth: int) -> set[str]:
        # A loop or comprehension over literal names, or a parameter of the enclosing function.
        scope: ast.AST | None = module.parents.get(node)
        while scope is not None:
            if (
                isinstance(scope, ast.For | ast.comprehension)
                and isinstance(scope.target, ast.Name)
                and scope.target.id == node.id
            ):
                return self._literal_strings(module, scope.iter)
            if isinstance(scope, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
                for generator in scope.generators:
                    if isinstance(generator.target, ast.Name) and generator.target.id == node.id:
                        return self._literal_strings(module, generator.iter)
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                parameters = [a.arg for a in (*scope.args.posonlyargs, *scope.args.args)]
                if node.id in parameters + [a.arg for a in scope.args.kwonlyargs]:
                    return self._call_site_values(scope, node.id, parameters, depth)
            scope = module.parents.get(scope)
        # A module-level constant, defined here or imported.
        for statement in module.tree.body:
            if isinstance(statement, ast.Assign | ast.AnnAssign):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                if any(isinstance(t, ast.Name) and t.id == node.id for t in targets) and statement.value is not None:
                    return self.names(statement.value, depth + 1)
            if isinstance(statement, ast.ImportFrom) and statement.module:
                for alias in statement.names:
                    if (alias.asname or alias.name) == node.id:
                        return {str(getattr(importlib.import_module(statement.module), alias.name))}
        raise UnresolvedName(f"{module.path}:{node.lineno}: {node.id}")

    def _literal_strings(self, module: _Module, node: ast.expr) -> set[str]:
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
        ):
            return {e.value for e in node.elts}  # type: ignore[attr-defined]
        raise UnresolvedName(f"{module.path}:{node.lineno}: {ast.unparse(node)}")

    def _call_site_values(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef, parameter: str, positional: list[str], depth: int
    ) -> set[str]:
        """The names passed for ``parameter`` wherever a function of this name is called."""
        index = positional.index(parameter) if parameter in positional else None
        values: set[str] = set()
        found = False
        for module in self.modules:
            for call in ast.walk(module.tree):
                if not isinstance(call, ast.Call):
                    continue
                func = call.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if called != function.name:
                    continue
                offset = 1 if positional[:1] in (["self"], ["cls"]) and isinstance(func, ast.Attribute) else 0
                argument = next((k.value for k in call.keywords if k.arg == parameter), None)
                if argument is None and index is not None and 0 <= index - offset < len(call.args):
                    argument = call.args[index - offset]
                if argument is None:
                    continue
                if _is_environment(argument):  # a mapping parameter, not a name
                    continue
                found = True
                values |= self.names(argument, depth + 1)
        if not found:
            raise UnresolvedName(f"{function.name}({parameter}): no call site passes a name")
        return values


def environment_variables(directories: tuple[str, ...] = SCANNED) -> dict[str, set[str]]:
    """Every environment variable the code under ``directories`` reads -> the modules that read it."""
    return {name: set(modules) for name, modules in _environment_variables(directories).items()}


@cache
def _environment_variables(directories: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """``environment_variables``, scanned once per test process (every page's test reads the same code)."""
    modules = list(_modules(directories))
    resolver = _Resolver(modules)
    found: dict[str, set[str]] = {}
    for module in modules:
        for key in _read_keys(module):
            for name in resolver.names(key):
                found.setdefault(name, set()).add(module.name)
    return {name: frozenset(readers) for name, readers in found.items()}


def cli_help(*command: str) -> str:
    """What ``oip [command] --help`` prints (argparse's own text, wide enough not to wrap an option's line)."""
    from handler.cli import build_parser

    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.suppress(SystemExit):
        build_parser().parse_args([*command, "--help"])
    return output.getvalue()


def cli_options() -> dict[str, set[str]]:
    """``oip``'s subcommands -> their option strings (``--x``, ``--no-x``) and positionals, read from ``--help``.

    argparse lists each argument at an indent of two spaces (its help text, when on its own line, further in):
    positionals under "positional arguments:", options under "options:" and under each argument group's title.
    ``-h``/``--help`` is left out.
    """
    usage = cli_help()
    (choices,) = re.findall(r"\{([\w,-]+)\}", usage.splitlines()[0])
    options: dict[str, set[str]] = {}
    for command in choices.split(","):
        found: set[str] = set()
        section = ""
        for line in cli_help(command).splitlines():
            if line and not line.startswith(" "):
                section = line
                continue
            match = re.match(r"^  (\S.*?)(?:\s{2,}|$)", line)
            if not match or section.startswith("usage:"):
                continue
            invocation = match.group(1)
            if invocation.startswith("-"):
                found |= {part.split()[0] for part in invocation.split(", ")} - {"-h", "--help"}
            elif section == "positional arguments:":
                found.add(invocation)
        options[command] = found
    return options


class _CloudFormationLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (``!Ref``, ``!Sub``, ``!If``...) read as plain values."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]


_CloudFormationLoader.add_multi_constructor("!", _any_tag)


def load_template(path: Path = ROOT / "template.yaml") -> dict[str, Any]:
    """A CloudFormation template as plain data."""
    return yaml.load(path.read_text(), Loader=_CloudFormationLoader)  # a SafeLoader, with CloudFormation's tags


def template_parameters(path: Path = ROOT / "template.yaml") -> dict[str, str | None]:
    """A template's parameters -> their defaults, as text (``""`` for an empty default, None for none: required)."""
    parameters = load_template(path)["Parameters"]
    return {name: None if "Default" not in spec else str(spec["Default"]) for name, spec in parameters.items()}
