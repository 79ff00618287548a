"""Why a process could not start serving, as one line: the cause, and the setting to change.

Every process builds its data plane through ``container.build_dataplane`` (``oip serve``'s workers, ``oip invoke``,
``oip batch``, the Lambda init), which turns whatever stops it (a repository that is not there, an object store it
cannot read, a missing optional package, an exception while loading the models) into a ``StartupFailure``. Each
entry point says it once, in its own way (``oip serve``: ``failure_line`` on stderr, the traceback only at
``--log-level debug``; Lambda: a structured log line), naming where its operator sets what failed.

``oip serve``'s workers share a directory (``OIP_STATS_DIR``): the first to fail says why, and the first to serve says
what it serves (``first_to_say``), so that N workers started together print it once, not N times.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Final, TextIO

from adapters.errors import V2Error

#: uvicorn's exit code for a server that did not start (``uvicorn.main.STARTUP_FAILURE``): ``oip serve``'s
#: supervisor stops on it rather than start the worker again.
STARTUP_FAILURE: Final = 3
#: The ``Settings`` field behind a failure of the model repository.
MODEL_REPOSITORY: Final = "model_repository"
#: The ``Settings`` field that lets a server start with models that did not load, and how ``oip serve`` sets it.
EXIT_ON_ERROR: Final = "exit_on_error"
EXIT_ON_ERROR_OPTIONS: Final = "--exit-on-error false or OIP_EXIT_ON_ERROR=false serves the other models"
#: What a failure without a setting of its own suggests instead.
DEBUG_HINT: Final = "--log-level debug shows the traceback"
#: Optional packages by the module a repository imports, and the extra that installs each.
EXTRAS: Final = {"boto3": "s3", "botocore": "s3", "google": "gcs"}
#: How long a worker keeps quiet about a failure another worker of the same server has just said (workers started
#: together fail together).
SAID_WITHIN_S: Final = 60.0


class StartupFailure(Exception):
    """What stopped this process before it served: ``cause`` says what, ``setting`` (a ``Settings`` field, or None)
    where it is set."""

    def __init__(self, cause: str, setting: str | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.setting = setting

    def line(self, options: str | None) -> str:
        """The cause and, in brackets, ``options`` (how this entry point's operator sets ``setting``), or how to see
        the traceback of a failure that names no setting."""
        if self.setting == EXIT_ON_ERROR:
            options = EXIT_ON_ERROR_OPTIONS
        return f"{self.cause} ({options if self.setting and options else DEBUG_HINT})"


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing (google for google.cloud.storage)
        return False


def missing_package(location: str, module: str) -> StartupFailure:
    """A repository at ``location`` needs ``module``'s package, which is not installed."""
    package = module.split(".")[0]
    extra = EXTRAS.get(package)
    name = "google-cloud-storage" if package == "google" else package
    install = f"pip install 'oip-serverless[{extra}]'" if extra else f"pip install {name}"
    return StartupFailure(f"model repository {location} needs {name}, which is not installed: {install}",
                          MODEL_REPOSITORY)  # fmt: skip


def check_repository(location: str) -> None:
    """What can be known of the repository at ``location`` without reading it: a local one is a directory; an
    ``s3://`` or ``gs://`` one has its client package installed. StartupFailure otherwise. Cheap and free of
    threads: ``oip serve``'s supervisor asks before it forks its workers."""
    if location.startswith("s3://"):
        if not _installed("boto3"):
            raise missing_package(location, "boto3")
    elif location.startswith("gs://"):
        if not _installed("google.cloud.storage"):
            raise missing_package(location, "google.cloud.storage")
    elif not Path(location).is_dir():
        raise StartupFailure(f"model repository {location} is not a directory", MODEL_REPOSITORY)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, V2Error):
        return exc.message
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def repository_failure(exc: Exception, location: str, doing: str) -> StartupFailure:
    """``exc``, raised while ``doing`` (e.g. ``"copy"``) the repository at ``location``, as a StartupFailure."""
    if isinstance(exc, StartupFailure):
        return exc
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return missing_package(location, exc.name)
    if isinstance(exc, V2Error) and location in exc.message:  # the message names the repository already
        return StartupFailure(exc.message, MODEL_REPOSITORY)
    return StartupFailure(f"cannot {doing} model repository {location}: {_reason(exc)}", MODEL_REPOSITORY)


def unloaded_models(reasons: list[str]) -> StartupFailure:
    """The models that did not load (each one's reason), with ``--exit-on-error`` on."""
    more = len(reasons) - 1
    others = f" (and {more} more model version{'s' if more > 1 else ''})" if more else ""
    return StartupFailure(f"{reasons[0]}{others}", EXIT_ON_ERROR)


def app_failure(exc: Exception) -> StartupFailure:
    """An exception no step above named, raised while a server's app was built."""
    if isinstance(exc, StartupFailure):
        return exc
    return StartupFailure(f"the server could not be built: {_reason(exc)}")


def say_failure(program: str, line: str, exc: BaseException | None = None, stream: TextIO | None = None) -> None:
    """``<program>: error: <line>`` on stderr, after ``exc``'s traceback when given (``--log-level debug``), in one
    write with its newline: stderr is unbuffered, and ``print`` writes the newline apart, so a line another worker
    logs meanwhile could end up inside this one."""
    stream = stream or sys.stderr
    if exc is not None:
        import traceback

        traceback.print_exception(exc, file=stream)
    stream.write(f"{program}: error: {line}\n")
    stream.flush()


def first_to_say(directory: str | None, what: str, text: str, within: float | None = None) -> bool:
    """Whether this process is the first of the processes sharing ``directory`` to say ``what`` (as ``text``), or,
    with ``within``, the first in the last ``within`` seconds to say that same text. True without a directory."""
    if directory is None:
        return True
    path = Path(directory) / f"said-{what}"
    handle, draft = tempfile.mkstemp(dir=directory, prefix=".said-")
    try:
        with os.fdopen(handle, "w") as file:
            file.write(text)
        try:
            os.link(draft, path)  # atomic: exactly one of the workers creates it
            return True
        except FileExistsError:
            if within is None or _said_lately(path, text, within):
                return False
            os.replace(draft, path)
            return True
    except OSError:  # the directory is gone or unwritable: say it rather than not at all
        return True
    finally:
        Path(draft).unlink(missing_ok=True)


def _said_lately(path: Path, text: str, within: float) -> bool:
    try:
        return path.read_text() == text and time.time() - path.stat().st_mtime < within
    except OSError:
        return False
