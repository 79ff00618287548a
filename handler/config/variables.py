"""How one environment variable is read: the readers (one boolean dialect, typed numbers, choices), the one-line
``SettingsError`` for a value a variable does not accept, and ``setting``, the one declaration of a settings field
(its variable, its reader, its default, what it means and the ``oip serve`` option that also gives it) from which
reading, the ``oip`` options and the configuration reference's check all come.

Switches accept ``1``, ``true``, ``yes`` or ``on`` and ``0``, ``false``, ``no`` or ``off``, in any case. An empty
value is the default, as an unset one (a template may pass ``""`` for a parameter left empty).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

#: The spellings of a switch, in any case.
ON: tuple[str, ...] = ("1", "true", "yes", "on")
OFF: tuple[str, ...] = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """A variable whose value it does not accept; the message is one line naming the variable and what it takes."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        super().__init__(f"{name}={value!r}: expected {expected}")
        self.name = name
        self.expected = expected


def either(words: Sequence[str]) -> str:
    """``a, b or c``."""
    return f"{', '.join(words[:-1])} or {words[-1]}"


def raw(env: Mapping[str, str], name: str) -> str | None:
    """The variable's value, None when unset or empty."""
    value = env.get(name)
    return value if value else None


class Reader:
    """Reads one variable into a typed value; its default when unset or empty."""

    def read_variable(self, env: Mapping[str, str], variable: str, default: Any) -> Any:
        value = raw(env, variable)
        return default if value is None else self.parse(variable, value)

    def parse(self, variable: str, value: str) -> Any:
        """The value of a variable that is set; SettingsError for one not accepted."""
        return value


@dataclass(frozen=True)
class Text(Reader):
    """The value as it is."""


@dataclass(frozen=True)
class Flag(Reader):
    """A switch in the one dialect (``ON``, ``OFF``)."""

    def parse(self, variable: str, value: str) -> bool:
        spelling = value.strip().lower()
        if spelling in ON:
            return True
        if spelling in OFF:
            return False
        raise SettingsError(variable, value, f"{either(ON)} (on), or {either(OFF)} (off), in any case")


@dataclass(frozen=True)
class Integer(Reader):
    """An integer from ``minimum`` (to ``maximum``)."""

    minimum: int = 0
    maximum: int | None = None

    def parse(self, variable: str, value: str) -> int:
        accepts = f"an integer from {self.minimum}" + ("" if self.maximum is None else f" to {self.maximum}")
        try:
            number = int(value.strip())
        except ValueError:
            raise SettingsError(variable, value, accepts) from None
        if number < self.minimum or (self.maximum is not None and number > self.maximum):
            raise SettingsError(variable, value, accepts)
        return number


PORT = Integer(minimum=1, maximum=65535)


@dataclass(frozen=True)
class Number(Reader):
    """A number of at least 0 (more than 0 when ``positive``), ``inf`` only when ``infinite``."""

    positive: bool = False
    infinite: bool = False

    def parse(self, variable: str, value: str) -> float:
        accepts = (
            "a number "
            + ("greater than 0" if self.positive else "of at least 0")
            + (" or inf" if self.infinite else "")
        )
        try:
            number = float(value.strip())
        except ValueError:
            raise SettingsError(variable, value, accepts) from None
        if (
            math.isnan(number)
            or number < 0
            or (self.positive and number == 0)
            or (math.isinf(number) and not self.infinite)
        ):
            raise SettingsError(variable, value, accepts)
        return number


@dataclass(frozen=True)
class Choice(Reader):
    """One of ``choices``, in any case; read in lower case."""

    choices: tuple[str, ...]

    def parse(self, variable: str, value: str) -> str:
        if value.strip().lower() not in self.choices:
            raise SettingsError(variable, value, either(self.choices))
        return value.strip().lower()


@dataclass(frozen=True)
class Parsed(Reader):
    """The text, unset or empty as ``""``, given to ``convert(text, variable)``: a list or map the field holds."""

    convert: Callable[[str, str], Any]

    def parse(self, variable: str, value: str) -> Any:
        return self.convert(value, variable)

    def read_variable(self, env: Mapping[str, str], variable: str, default: Any) -> Any:
        return self.convert(raw(env, variable) or "", variable)


@dataclass(frozen=True)
class Derived(Reader):
    """A value read from several variables by ``function(env)`` (the platform, Triton, the repository)."""

    function: Callable[[Mapping[str, str]], Any]

    def read_variable(self, env: Mapping[str, str], variable: str, default: Any) -> Any:
        return self.function(env)


@dataclass(frozen=True)
class Name(Reader):
    """A model's name, as it appears in one URL path segment."""

    def parse(self, variable: str, value: str) -> str:
        if not value or value in (".", "..") or any(c in value for c in "/\\?#%") or not value.isprintable():
            raise SettingsError(variable, value, "a model name (one URL path segment)")
        return value


@dataclass(frozen=True)
class Option:
    """The ``oip serve`` option that gives a setting over its variable (handler/cli builds it from this): its
    spellings (the first names it), ``negatable`` for a switch given as ``--x``/``--no-x`` rather than ``--x BOOL``,
    ``default`` as ``--help`` shows it where the field's own default is not what a user sees (None, or a value that
    depends on where the server runs; a function when it is found where ``oip`` runs), and the argument ``group``
    ``--help`` lists it under (None: the command's options)."""

    flags: tuple[str, ...]
    default: str | Callable[[], str] | None = None
    negatable: bool = False
    group: str | None = None


@dataclass(frozen=True)
class Declaration:
    """A settings field's one declaration: the variable it is read from, how it is read, what it means, whether
    it is read from a variable of its own (``passed_on``; not a value read from several variables, as Triton's and
    the platform's are), and the ``oip serve`` option that also gives it (None: only its variable)."""

    variable: str
    reader: Reader
    doc: str
    passed_on: bool = True
    option: Option | None = None


def setting(
    variable: str,
    default: Any,
    reader: Reader,
    doc: str,
    *,
    factory: Callable[[], Any] | None = None,
    passed_on: bool = True,
    option: Option | str | None = None,
) -> Any:
    """A dataclass field declared with its variable, reader and meaning, and its ``oip serve`` option (a string: the
    option's one spelling)."""
    given = Option((option,)) if isinstance(option, str) else option
    metadata = {"setting": Declaration(variable, reader, doc, passed_on, given)}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def declared(cls: type) -> Iterator[tuple[Field[Any], Declaration]]:
    """The fields of a settings dataclass with their declarations."""
    for each in fields(cls):
        yield each, each.metadata["setting"]


def declared_options(cls: type) -> Iterator[tuple[Field[Any], Declaration, Option]]:
    """The fields of a settings dataclass that an ``oip serve`` option also gives, with their declarations."""
    for each, declaration in declared(cls):
        if declaration.option is not None:
            yield each, declaration, declaration.option


def read_declared(cls: type, env: Mapping[str, str]) -> dict[str, Any]:
    """Every field of ``cls`` read from ``env`` as its declaration says."""
    values: dict[str, Any] = {}
    for each, declaration in declared(cls):
        default = None if each.default is MISSING else each.default
        values[each.name] = declaration.reader.read_variable(env, declaration.variable, default)
    return values


def spelled(value: object) -> str:
    """A value as its variable takes it back (None: empty, a switch: ``1``/``0``, a tuple: comma-separated)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def declared_variables(*classes: type) -> dict[str, tuple[Reader, Any]]:
    """Every variable a field of ``classes`` is declared with -> its reader and the field's default."""
    return {
        declaration.variable: (declaration.reader, each.default)
        for cls in classes
        for each, declaration in declared(cls)
    }
