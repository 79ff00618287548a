"""``oip invoke``: a Lambda event file through the real HTTP handler, like ``sam local invoke``.

Only the response goes to stdout, so ``oip invoke ev.json | jq`` works: Powertools' Logger writes to the
stream it was given (stdout by default) and Metrics prints its EMF record to stdout, so while the handler runs
file descriptor 1 points at stderr, and the response is written to the real stdout afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from handler.cli.errors import CliError


def read_event(path: str) -> dict[str, Any]:
    """The event file's JSON object; CliError when it is missing, unreadable or not a JSON object."""
    try:
        event = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"{path}: not JSON ({exc})") from None
    if not isinstance(event, dict):
        raise CliError(f"{path}: a Lambda event is a JSON object, not {type(event).__name__}")
    return event


@contextmanager
def stdout_to_stderr() -> Iterator[int]:
    """Point file descriptor 1 (and ``sys.stdout``) at stderr; yields a duplicate of the real stdout."""
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        yield real_stdout
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
        os.close(real_stdout)


def invoke(args: argparse.Namespace) -> int:
    """Print the handler's response to the event file, alone on stdout."""
    event = read_event(args.event)
    from handler.cli.lambda_context import LocalLambdaContext
    from handler.runtime import container
    from handler.runtime.startup import StartupFailure

    container.configure(model_repository=args.model_repository)

    with stdout_to_stderr():
        try:  # built before handler.http (which reuses it): a failure is one line, not the init's log and traceback
            container.dataplane()
        except StartupFailure as failure:
            raise CliError(failure.line(container.settings().platform.repository_options())) from None
        from handler.http import lambda_handler

        response = lambda_handler(event, LocalLambdaContext())
    print(json.dumps(response, indent=2, ensure_ascii=False))
    return 0
