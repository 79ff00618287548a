"""``oip serve``'s setting options, built from the settings' declarations (handler/config/settings.py): each one in
``--help`` with its variable and default, given over its variable, and refused as its variable is."""

# covers: handler/config/serve_settings.py

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import Field
from typing import Any

import pytest

from handler.cli import build_parser, main, setting_overrides, shown_default
from handler.config.settings import Settings, SettingsError
from handler.config.variables import (
    Choice,
    Declaration,
    Derived,
    Flag,
    Integer,
    Name,
    Number,
    Option,
    Text,
    declared_options,
)

OPTIONS = list(declared_options(Settings))


def _help(*command: str) -> str:
    """``oip <command> --help`` as printed, its lines joined."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    return " ".join(out.getvalue().split())


def _values(each: Field[Any], declaration: Declaration) -> tuple[str, str]:
    """Two texts its reader accepts, read as two values other than the field's default: the variable's and the
    option's."""
    reader = declaration.reader
    if isinstance(reader, Flag):
        return ("1", "0") if each.default is False else ("0", "1")
    if isinstance(reader, Integer):
        top = reader.maximum or 1 << 20
        return str(min(reader.minimum + 7, top)), str(min(reader.minimum + 11, top - 1))
    if isinstance(reader, Number):
        return "7.5", "11.25"
    if isinstance(reader, Choice):
        first, second = [choice for choice in reader.choices if choice != each.default][:2]
        return first, second
    if isinstance(reader, Name):
        return "from-variable", "from-option"
    assert isinstance(reader, Text | Derived), f"{declaration.variable}: a reader this test has no values for"
    return "/from/variable", "/from/option"


def _arguments(option: Option, text: str) -> list[str]:
    if option.negatable:
        return [option.flags[0] if Flag().parse("", text) else option.flags[0].replace("--", "--no-", 1)]
    return [option.flags[0], text]


def test_the_serve_command_declares_its_options_once() -> None:
    """The options a user knows, each a settings field's (the platform's --host and --port aside)."""
    flags = {flag for _, _, option in OPTIONS for flag in option.flags}
    assert {"--max-inflight", "--metrics-port", "--access-log", "--exit-on-error", "--model_dir", "--workers"} <= flags
    assert len(flags) == sum(len(option.flags) for _, _, option in OPTIONS), "a spelling declared twice"


@pytest.mark.parametrize(("each", "declaration", "option"), OPTIONS, ids=[each.name for each, _, _ in OPTIONS])
def test_every_option_is_in_help_with_its_variable_and_default(
    each: Field[Any], declaration: Declaration, option: Option
) -> None:
    text = _help("serve")
    shown = shown_default(each.default, option, isinstance(declaration.reader, Flag))
    said = " ".join(f"(env {declaration.variable}; default: {shown})".replace("``", "").split())
    assert said in text, (said, text)
    for flag in option.flags:
        assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", text), flag
    if option.negatable:
        assert option.flags[0].replace("--", "--no-", 1) in text


@pytest.mark.parametrize(("each", "declaration", "option"), OPTIONS, ids=[each.name for each, _, _ in OPTIONS])
def test_an_option_given_wins_over_its_variable(each: Field[Any], declaration: Declaration, option: Option) -> None:
    from_variable, from_option = _values(each, declaration)
    env = {declaration.variable: from_variable}
    left_out = Settings.from_env(env, **setting_overrides(build_parser().parse_args(["serve"])))
    assert getattr(left_out, each.name) == declaration.reader.parse(declaration.variable, from_variable)
    assert getattr(left_out, each.name) != each.default
    given = build_parser().parse_args(["serve", *_arguments(option, from_option)])
    settings = Settings.from_env(env, **setting_overrides(given))
    assert getattr(settings, each.name) == declaration.reader.parse(declaration.variable, from_option)
    assert getattr(settings, each.name) != getattr(left_out, each.name)


@pytest.mark.parametrize(
    ("flag", "variable", "text"),
    [
        ("--max-inflight", "OIP_MAX_INFLIGHT", "0"),
        ("--metrics-port", "OIP_METRICS_PORT", "65536"),
        ("--drain-timeout", "OIP_DRAIN_TIMEOUT", "inf"),
        ("--header-timeout", "OIP_HEADER_TIMEOUT", "0"),
        ("--exit-on-error", "OIP_EXIT_ON_ERROR", "maybe"),
        ("--log-level", "OIP_LOG_LEVEL", "loud"),
        ("--model_name/--model-name", "OIP_MODEL_NAME", "a/b"),  # argparse names every spelling
    ],
)
def test_an_option_refuses_what_its_variable_refuses_in_one_line(
    flag: str, variable: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({variable: text})
    with pytest.raises(SystemExit) as exit_:
        main(["serve", flag.split("/")[0], text])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"oip serve: error: argument {flag}: expected {refused.value.expected}, not {text!r} "
        "(oip serve --help lists the options)"
    ]


def test_a_level_is_read_in_any_case_as_its_variable_is() -> None:
    args = build_parser().parse_args(["serve", "--log-level", "DEBUG", "--exit-on-error", "OFF"])
    assert (args.log_level, args.exit_on_error) == ("debug", False)
    assert Settings.from_env({"OIP_LOG_LEVEL": "DEBUG"}).log_level == "debug"


@pytest.mark.parametrize("command", ["invoke", "batch", "redrive"])
def test_the_other_commands_take_the_repository_option_of_the_same_setting(command: str) -> None:
    (repository,) = [(d, o) for each, d, o in OPTIONS if each.name == "model_repository"]
    text = _help(command)
    assert f"(env {repository[0].variable}; default: " in text
    assert "--model_dir" not in text  # KServe's and Triton's spellings are oip serve's
