"""The ``oip`` command (``handler.cli:main``): ``serve``, ``invoke``, ``batch`` and ``redrive``, one module
each, imported only when that subcommand runs. A user's mistake is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from handler import __version__
from handler.cli.errors import CliError
from handler.config.settings import LOG_LEVELS, SettingsError
from handler.config.variables import OFF, ON, Flag, either

REPOSITORY_HELP = "directory or s3://bucket/prefix (env MODEL_REPOSITORY; default: the demo repository)"


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


def non_negative_int(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


def port_or_zero(text: str) -> int:
    """An argparse type: a port number, or 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, not {value}")
    return value


def model_name(text: str) -> str:
    """An argparse type: a model's name, as it appears in a URL path segment."""
    if not text or text in (".", "..") or any(c in text for c in "/\\?#%") or not text.isprintable():
        raise argparse.ArgumentTypeError(f"'{text}' cannot name a model (one URL path segment)")
    return text


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


def switch(text: str) -> bool:
    """An option's true or false, in the settings' one dialect (``true``/``false``, ``1``/``0``, ``yes``/``no``,
    ``on``/``off``)."""
    try:
        return bool(Flag().parse("", text))
    except SettingsError:
        raise argparse.ArgumentTypeError(f"expected {either(ON)} or {either(OFF)}, not {text!r}") from None


def positive_float(text: str) -> float:
    """An argparse type: a number greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def add_connection_limits(serve: argparse.ArgumentParser) -> None:
    """What one HTTP connection may hold (handler/cli/connections.py); unset options come from the environment."""
    limits = serve.add_argument_group(
        "connection limits",
        "What one HTTP connection may hold, per worker. A head comes in one or two packets: its timeout is shorter "
        "than nginx's 60 s client_header_timeout; the body's counts, as nginx's client_body_timeout does, between two "
        "reads.",
    )
    limits.add_argument(
        "--header-timeout",
        type=positive_float,
        help="seconds a client has to send a request's headers, from the connection or the request's first byte; "
        "then 408 and the connection is closed; a gRPC connection has as long for HTTP/2's handshake "
        "(env OIP_HEADER_TIMEOUT; default: 10)",
    )
    limits.add_argument(
        "--body-timeout",
        type=positive_float,
        help="seconds a request body may pause between two reads before the connection is closed "
        "(env OIP_BODY_TIMEOUT; default: 30)",
    )
    limits.add_argument(
        "--keep-alive-timeout",
        type=positive_int,
        help="seconds an idle keep-alive connection stays open after an answer (env OIP_KEEP_ALIVE_TIMEOUT; "
        "default: 5, uvicorn's)",
    )
    limits.add_argument(
        "--max-connections",
        type=positive_int,
        help="open connections (or requests in progress) per worker beyond which new requests get 503 "
        "(env OIP_MAX_CONNECTIONS; default: 1024)",
    )
    limits.add_argument(
        "--max-inflight",
        type=positive_int,
        help="inference requests per worker in progress at once beyond which new ones get 503 with Retry-After "
        "(env OIP_MAX_INFLIGHT; default: 64 per core plus twice the largest dynamic batch, with each model admitted "
        "by its measured run time; set, it is the one cap unless OIP_ADMISSION_TARGET_MS is set too)",
    )
    limits.add_argument(
        "--max-header-bytes",
        type=positive_int,
        help="largest request line and headers; larger get 431 (env OIP_MAX_HEADER_BYTES; default: 32768, as nginx's "
        "4 x 8 KB)",
    )
    limits.add_argument(
        "--max-headers",
        type=positive_int,
        help="most header fields in a request; more get 431 (env OIP_MAX_HEADERS; default: 100)",
    )


def add_serve(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``oip serve``; returns its parser so that options can be added beside these."""
    serve = commands.add_parser("serve", help="serve a model repository over HTTP (and gRPC)")
    # KServe's and Triton's spellings too, as their serving runtimes pass them (docs/kubernetes.md).
    serve.add_argument(
        "--model-repository", "--model_dir", "--model-store", dest="model_repository", help=REPOSITORY_HELP
    )
    serve.add_argument(
        "--model_name",
        "--model-name",
        dest="model_name",
        type=model_name,
        help="serve a repository that is one model's own files (config.pbtxt, version directories or a model.onnx "
        "at its top, as KServe's storage initializer leaves them in /mnt/models) as this model; a repository of model "
        "directories keeps their names (env OIP_MODEL_NAME)",
    )
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
    serve.add_argument(
        "--max-body-bytes",
        type=positive_int,
        help="largest request body, after decompression, and largest gRPC message (env OIP_MAX_BODY_BYTES; default: "
        "67108864, 64 MiB; 6 MiB on Lambda)",
    )
    add_connection_limits(serve)
    # Options left out keep None: ``oip serve`` takes the environment's value then (handler/config/settings.py).
    serve.add_argument(
        "--grpc-port",
        "--grpc_port",
        dest="grpc_port",
        type=port_or_zero,
        help="also serve the V2 gRPC API on this port, 0 for off; needs oip-serverless[grpc] "
        "(env OIP_GRPC_PORT; default: 0)",
    )
    serve.add_argument(
        "--metrics-port",
        type=port_or_zero,
        help="serve Prometheus metrics (/metrics) on this port, 0 for off (env OIP_METRICS_PORT; default: 8002, "
        "Triton's)",
    )
    serve.add_argument(
        "--metrics-host",
        help="address the metrics endpoint listens on (env OIP_METRICS_HOST; default: the HTTP host)",
    )
    serve.add_argument("--log-level", choices=LOG_LEVELS, help="env OIP_LOG_LEVEL (default: info)")
    serve.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        help="log a line per request (env OIP_ACCESS_LOG; default: False; off unless asked, as in Triton, since "
        "a line per request costs throughput)",
    )
    serve.add_argument(
        "--workers",
        type=positive_int,
        help="worker processes sharing the ports, each with its own model sessions and statistics; use 1 for "
        f"models too large to load twice (env OIP_WORKERS; default: the cores this process may use, {_cores()})",
    )
    serve.add_argument(
        "--drain-timeout",
        type=non_negative_float,
        help="on SIGTERM, seconds that requests in flight may take to finish (env OIP_DRAIN_TIMEOUT; default: 30)",
    )
    serve.add_argument(
        "--exit-on-error",
        type=switch,
        metavar="BOOL",
        help="stop when a model fails to load at start-up (Triton's option); false serves the other models and that "
        "one as unavailable (env OIP_EXIT_ON_ERROR; default: true)",
    )
    serve.add_argument(
        "--worker-timeout",
        type=non_negative_float,
        help="seconds a serving worker's event loop may stay silent before it is aborted and replaced (with one "
        "worker: the process exits with code 70), 0 for never (env OIP_WORKER_TIMEOUT; default: 60)",
    )
    serve.add_argument(
        "--max-requests",
        type=non_negative_int,
        help="HTTP requests after which a worker is replaced (its replacement starts first), 0 for never; needs "
        "--workers 2 or more (env OIP_MAX_REQUESTS; default: 0)",
    )
    serve.add_argument(
        "--max-requests-jitter",
        type=non_negative_int,
        help="up to this many requests more, drawn for each worker, so that workers are not replaced all at once "
        "(env OIP_MAX_REQUESTS_JITTER; default: 0)",
    )
    serve.set_defaults(run=_lazy("serve"))
    return serve


def _cores() -> int:
    """The cores this process may use (``--workers``' default)."""
    from handler.config.cores import available_cores

    return available_cores()


def add_invoke(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``oip invoke``."""
    invoke = commands.add_parser(
        "invoke",
        help="run a Lambda event file through the real handler and print the response (like sam local invoke)",
        description="Prints the Lambda response alone on stdout; logs and metrics go to stderr.",
    )
    invoke.add_argument("event", help="event JSON file, e.g. events/http-api/infer-json.json")
    invoke.add_argument("--model-repository", help=REPOSITORY_HELP)
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
    batch.add_argument("--model-repository", help=REPOSITORY_HELP)
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
    redrive.add_argument("--model-repository", help=REPOSITORY_HELP)
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
