"""``oip batch``: a .jsonl file of V2 requests, or a .npy array, predicted into JSON Lines with a manifest.

Every input line gets one output line. Ctrl-C stops after the chunk in flight: the manifest then records
``"complete": false`` and ``oip batch ... --resume`` continues where the run stopped; without ``--resume`` a
run starts over, rewriting the output and manifest. Exit status: 0, 1 when any row failed, 130 when stopped.
"""

from __future__ import annotations

import argparse
import signal
import sys
from itertools import islice
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from handler.cli.errors import CliError
from handler.cli.progress import progress_bar

if TYPE_CHECKING:
    from pathlib import Path

    from handler.cli.batch_files import BatchFiles, Resume
    from handler.config.settings import Settings
    from handler.inference.service import InferenceService
    from handler.protocol.dataplane import DataPlane


class Interrupt:
    """SIGINT as a request to stop after the current chunk; a second Ctrl-C interrupts at once."""

    def __init__(self) -> None:
        self.pressed = False

    def __enter__(self) -> Interrupt:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *_: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.pressed = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def __call__(self) -> bool:
        return self.pressed


def batch(args: argparse.Namespace) -> int:
    """Predict the input file; 0, 1 when any row failed, 130 when interrupted."""
    from handler.cli.batch_files import batch_files

    files = batch_files(args.input, args.output)
    with Interrupt() as interrupt:
        return _run(args, files, interrupt)


def _run(args: argparse.Namespace, files: BatchFiles, interrupt: Interrupt) -> int:
    """The process assembled (settings, data plane, its one inference service), then the file predicted."""
    from handler.config.settings import Settings
    from handler.inference.service import InferenceService

    settings = Settings.from_env(model_repository=args.model_repository)
    service = InferenceService(_dataplane(settings), settings)
    if args.compare_version is not None:  # two versions compared, no predictions written
        from handler.cli.batch_compare import compare_file

        return compare_file(args, files, interrupt, service)
    return predict_file(args, files, interrupt, service)


def predict_file(args: argparse.Namespace, files: BatchFiles, interrupt: Interrupt, service: InferenceService) -> int:
    """Predict the input file through ``service``; 0, 1 when any row failed, 130 when interrupted."""
    from adapters.errors import V2Error
    from handler.batch.job import BatchJob
    from handler.batch.jsonl import predict_jsonl
    from handler.batch.lines import bounded_lines, read_chunks
    from handler.batch.npy import plan_npy, predict_npy
    from handler.cli.batch_files import count_lines, resume_point, write_manifest
    from handler.config.lambda_settings import BatchSettings
    from handler.runtime.loop import run

    args.model = args.model or BatchSettings.from_env().default_model  # --model, else OIP_BATCH_MODEL
    dataplane = service.dataplane
    max_bytes = service.settings.max_body_bytes
    job = BatchJob(
        args.model,
        args.model_version,
        args.chunk_size,
        id_prefix=f"{files.source.name}:",
        cast=args.cast,
        max_bytes=max_bytes,
    )
    try:
        if args.model:
            run(dataplane.model_metadata(args.model, args.model_version))
        if files.is_npy:
            with files.source.open("rb") as reader:
                total = run(plan_npy(service, job, reader)).shape[0]
        else:
            total = count_lines(files.source)
    except V2Error as exc:
        raise CliError(exc.message) from None
    resume = resume_point(files, args.model, args.model_version) if args.resume else None
    if args.resume and resume is None:
        print(f"oip batch: {files.source} was already predicted completely ({files.manifest})", file=sys.stderr)
        return 0
    if interrupt():
        print("oip batch: interrupted before any row was predicted", file=sys.stderr)
        return 130
    fingerprint = files.fingerprint()
    summary = resume.summary if resume else None
    with files.source.open("rb") as reader, _open_output(files.output, resume) as writer:
        update, close = progress_bar(total, summary.rows_in if summary else 0, args.quiet)
        predict = predict_npy if files.is_npy else predict_jsonl
        stream: IO[bytes] | Any = reader
        if not files.is_npy:  # lines of at most max_bytes (a longer one is a failed row), after those done
            stream = islice(bounded_lines(read_chunks(reader.read), max_bytes), summary.rows_in if summary else 0, None)
        failure = None
        try:
            summary = run(predict(service, job, stream, writer.write, update, interrupt, summary))
        except V2Error as exc:  # a whole-run failure mid-way (a truncated .npy): what was done is recorded
            failure = exc.message
        finally:
            close()
        output_bytes = writer.tell()
    if failure is not None or summary is None:
        raise CliError(failure or "no rows predicted")
    manifest = summary.manifest(
        input=str(files.source),
        output=str(files.output),
        chunk_size=args.chunk_size,
        requested_version=args.model_version,
        output_bytes=output_bytes,
        **fingerprint,
    )
    write_manifest(files.manifest, manifest)
    counts = f"{summary.rows_in} rows in, {summary.rows_out} out, {summary.errors} failed"
    if not summary.complete:
        print(
            f"oip batch: interrupted after {counts}; {files.manifest} records it; add --resume to continue",
            file=sys.stderr,
        )
        return 130
    print(f"oip batch: {counts} -> {files.output} ({files.manifest})", file=sys.stderr)
    if summary.errors:
        first = manifest["error_samples"][0]
        print(
            f"oip batch: {summary.errors} of {summary.rows_in} rows failed "
            f"(first: line {first['line']}: {first['error']})",
            file=sys.stderr,
        )
        return 1
    return 0


def _dataplane(settings: Settings) -> DataPlane:
    """The data plane; CliError with the one line of a StartupFailure (handler/runtime/startup.py)."""
    from handler.runtime.container import build_dataplane
    from handler.runtime.startup import StartupFailure

    try:
        return build_dataplane(settings)
    except StartupFailure as failure:
        raise CliError(failure.line(settings.platform.repository_options())) from None


def _open_output(path: Path, resume: Resume | None) -> IO[bytes]:
    """The output, new, or cut back to what the interrupted run's manifest recorded."""
    if resume is None:
        return open(path, "wb")
    writer = open(path, "r+b")  # noqa: SIM115
    writer.truncate(resume.output_bytes)
    writer.seek(resume.output_bytes)
    return writer
