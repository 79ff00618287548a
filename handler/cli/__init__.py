"""The ``oip`` command (``handler.cli:main``): ``serve``, ``invoke``, ``batch`` and ``redrive``, one module
each, imported only when that subcommand runs. A user's mistake is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import Field, replace
from typing import Any, NoReturn, Protocol

from handler import __version__
from handler.cli.errors import CliError
from handler.config.serve_settings import CONNECTION_LIMITS
from handler.config.settings import Settings, SettingsError
from handler.config.variables import (
    Choice,
    Declaration,
    Derived,
    Flag,
    Option,
    Reader,
    Text,
    declared_options,
    spelled,
)


class OneLineParser(argparse.ArgumentParser):
    """An ``oip`` parser whose usage errors are one line (a container's log, an operator's terminal): the
    command, the mistake, and where the options are listed; exit status 2 as argparse's."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def _lazy(command: str) -> Callable[[argparse.Namespace], int]:
    """The subcommand's ``handler.cli.<command>.<command>`` function, imported when it runs."""

    def run(args: argparse.Namespace) -> int:
        module = importlib.import_module(f"handler.cli.{command}")
        return int(getattr(module, command)(args))

    return run


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a number of at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of at least 0, not {text}")
    return value


def rate(text: str) -> float:
    """An argparse type: a number from 0 to 1."""
    value = non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, not {text}")
    return value


def port_or_zero(text: str) -> int:
    """An argparse type: a port number, or 0 (``--port``, which the platform may give instead)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, not {value}")
    return value


def reader_type(reader: Reader) -> Callable[[str], Any]:
    """An argparse type that reads an option's text as ``reader`` reads its setting's variable: the same values
    accepted, the same ``expected ...`` said for one that is not."""

    def read(text: str) -> Any:
        try:
            return reader.parse("", text)
        except SettingsError as exc:
            raise argparse.ArgumentTypeError(f"expected {exc.expected}, not {text!r}") from None

    read.__name__ = type(reader).__name__.lower()  # argparse names the type in some messages
    return read


def shown_default(value: object, option: Option, switch: bool) -> str:
    """A setting's default as ``--help`` says it: the option's own words, else the field's value (a switch as
    ``true``/``false``, or ``on``/``off`` for ``--x``/``--no-x``)."""
    if option.default is not None:
        return option.default if isinstance(option.default, str) else option.default()
    if switch:
        return ("on" if value else "off") if option.negatable else ("true" if value else "false")
    return f"{value:g}" if isinstance(value, float) else spelled(value)


def _plain(text: str) -> str:
    """A declaration's text as ``--help`` shows it: no code marks, ``%`` kept from argparse's formatting."""
    return text.replace("``", "").replace("%", "%%")


class ArgumentTaker(Protocol):
    """What an option is added to: a parser, or one of its argument groups."""

    def add_argument(self, *flags: str, **kwargs: Any) -> argparse.Action: ...


def add_setting_option(
    parser: ArgumentTaker,
    each: Field[Any],
    declaration: Declaration,
    option: Option,
) -> None:
    """The option ``declaration`` gives: its spellings, its setting's field as ``dest``, its type or action from
    the setting's reader, and its help from the setting's doc with the variable and default. Left out, it is None,
    and ``Settings.from_env`` reads the variable instead (``setting_overrides``)."""
    reader = declaration.reader
    switch = isinstance(reader, Flag)
    shown = shown_default(each.default, option, switch)
    help_text = _plain(f"{declaration.doc} (env {declaration.variable}; default: {shown})")
    kwargs: dict[str, Any] = {"dest": each.name, "help": help_text}
    if switch and option.negatable:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif not isinstance(reader, Derived | Text):
        kwargs["type"] = reader_type(reader)
        if switch:
            kwargs["metavar"] = "BOOL"
        if isinstance(reader, Choice):
            kwargs["choices"] = reader.choices
    parser.add_argument(*option.flags, **kwargs)


#: The argument groups of ``oip serve``'s setting options that have one, with what ``--help`` says of each.
OPTION_GROUPS = {
    CONNECTION_LIMITS: "What one HTTP connection may hold, per worker. A head comes in one or two packets: its timeout "
    "is shorter than nginx's 60 s client_header_timeout; the body's counts, as nginx's client_body_timeout does, "
    "between two reads.",
}


def add_setting_options(command: argparse.ArgumentParser) -> None:
    """Every option a ``Settings`` field declares (handler/config/settings.py), each in its group."""
    groups = {title: command.add_argument_group(title, text) for title, text in OPTION_GROUPS.items()}
    for each, declaration, option in declared_options(Settings):
        add_setting_option(groups[option.group] if option.group else command, each, declaration, option)


def setting_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``Settings`` fields the options of ``args`` give, by field (None for an option left out, which
    ``Settings.from_env`` leaves to the variable)."""
    return {each.name: getattr(args, each.name, None) for each, _, _ in declared_options(Settings)}


def add_serve(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``oip serve``: its setting options, and where to listen (``--host``, ``--port``), which the platform's
    variables may give instead (handler/config/platform.py); returns its parser so that options can be added."""
    serve = commands.add_parser("serve", help="serve a model repository over HTTP (and gRPC)")
    serve.add_argument(
        "--host",
        help="env OIP_HOST (default 127.0.0.1); 0.0.0.0 on Vertex AI and SageMaker, whose containers are reached "
        "from outside",
    )
    serve.add_argument(
        "--port",
        "--http_port",
        "--http-port",
        dest="port",
        type=port_or_zero,
        help="env OIP_PORT (default 8000); AIP_HTTP_PORT on Vertex AI, SAGEMAKER_BIND_TO_PORT (8080) on SageMaker",
    )
    add_setting_options(serve)
    serve.set_defaults(run=_lazy("serve"))
    return serve


def add_repository(command: argparse.ArgumentParser) -> None:
    """``--model-repository``, in one spelling: ``MODEL_REPOSITORY``'s option for a command other than ``serve``."""
    for each, declaration, option in declared_options(Settings):
        if each.name == "model_repository":
            add_setting_option(command, each, declaration, replace(option, flags=option.flags[:1]))


def add_invoke(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``oip invoke``."""
    invoke = commands.add_parser(
        "invoke",
        help="run a Lambda event file through the real handler and print the response (like sam local invoke)",
        description="Prints the Lambda response alone on stdout; logs and metrics go to stderr.",
    )
    invoke.add_argument("event", help="event JSON file, e.g. events/http-api/infer-json.json")
    add_repository(invoke)
    invoke.set_defaults(run=_lazy("invoke"))
    return invoke


def add_batch(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``oip batch``."""
    batch = commands.add_parser(
        "batch",
        help="predict a .jsonl file of V2 requests, or a .npy array, into JSON Lines",
        description="One output line per input line, in order, and a manifest beside the output. Exit status: "
        "0, 1 when any row failed, 130 when interrupted (Ctrl-C stops after the current chunk; --resume continues).",
    )
    batch.add_argument("input", help="a .jsonl file (one V2 inference request per line) or a .npy array")
    batch.add_argument(
        "--model",
        help="model name; a .jsonl line may name its own with 'model_name' (env OIP_BATCH_MODEL)",
    )
    batch.add_argument("--model-version", help="model version (default: the model's default version)")
    batch.add_argument("--output", help="output .jsonl (default: INPUT.predictions.jsonl; the manifest goes beside it)")
    batch.add_argument(
        "--chunk-size", type=positive_int, default=256, help="rows predicted together (default: %(default)s)"
    )
    batch.add_argument(
        "--cast",
        action="store_true",
        help="convert .npy data to the model's datatype where no value is lost beyond float rounding "
        "(e.g. float64 to FP32)",
    )
    batch.add_argument(
        "--resume", action="store_true", help="continue an interrupted run from its manifest instead of starting over"
    )
    add_repository(batch)
    batch.add_argument("--quiet", action="store_true", help="no progress bar")
    add_comparison(batch)
    batch.set_defaults(run=_lazy("batch"))
    return batch


def add_comparison(batch: argparse.ArgumentParser) -> None:
    """``oip batch``'s comparison of two versions (``handler/cli/batch_compare.py``)."""
    compare = batch.add_argument_group(
        "comparing two versions",
        "answer every line with its version and with --compare-version, write a comparison report instead of "
        "predictions (exit status 3 when the agreement is below --min-agreement)",
    )
    compare.add_argument("--compare-version", metavar="VERSION", help="the candidate version to compare")
    compare.add_argument("--compare-report", metavar="PATH", help="the report (JSON; default: INPUT.comparison.json)")
    compare.add_argument("--min-agreement", type=rate, metavar="RATE", help="the least agreement (0 to 1) that passes")


def add_redrive(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``oip redrive``."""
    redrive = commands.add_parser(
        "redrive",
        help="predict again the S3 files whose batch invocations failed (records on the on-failure queue)",
        description="Reads the batch function's on-failure records (template output BatchFailedFilesQueueUrl), "
        "predicts each file they name into the batch bucket's output/ as the function would, and deletes a record "
        "once its file is done. Files already predicted (same input ETag) are not predicted twice.",
    )
    redrive.add_argument("queue_url", metavar="QUEUE_URL", help="the on-failure queue's URL")
    add_repository(redrive)
    redrive.add_argument(
        "--max-records", type=positive_int, default=1000, help="stop after this many records (default: %(default)s)"
    )
    redrive.set_defaults(run=_lazy("redrive"))
    return redrive


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``oip``."""
    parser = OneLineParser(prog="oip", description="Open Inference Protocol (V2) server for ONNX models.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for add in (add_serve, add_invoke, add_batch, add_redrive):
        add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``oip`` console script."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # named with the subcommand that refused them (argparse would name ``oip``)
        print(
            f"oip {args.command}: error: unrecognized arguments: {' '.join(unknown)} (oip {args.command} --help lists "
            "the options)",
            file=sys.stderr,
        )
        return 2
    try:
        return int(args.run(args))
    except CliError as exc:
        print(f"oip {args.command}: error: {exc}", file=sys.stderr)
        return exc.code
    except SettingsError as exc:  # a variable's value it does not accept: the environment's usage error
        print(f"oip {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"oip {args.command}: interrupted", file=sys.stderr)
        return 130
