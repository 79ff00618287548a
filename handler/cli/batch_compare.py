"""``oip batch --compare-version V``: every line of a .jsonl file answered by its version and by version ``V``,
compared (``handler/batch/compare.py``); the report as JSON beside the input (``--compare-report``) and as a short
table on stdout. Nothing else is written.

Exit status: 0; 1 when a row failed with either version; 3 when the agreement is below ``--min-agreement`` (or no
row was compared); 130 when interrupted.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from handler.cli.errors import CliError
from handler.cli.progress import progress_bar

if TYPE_CHECKING:
    from handler.cli.batch import Interrupt
    from handler.cli.batch_files import BatchFiles
    from handler.inference.service import InferenceService

#: Exit status of a run whose agreement is below ``--min-agreement``.
BELOW_AGREEMENT = 3


def report_path(files: BatchFiles, given: str | None) -> Path:
    """``--compare-report``, else ``INPUT.comparison.json``; CliError when it would overwrite the input."""
    path = Path(given) if given else files.source.with_name(files.source.name + ".comparison.json")
    if not path.parent.is_dir():
        raise CliError(f"--compare-report {path}: the folder {path.parent} does not exist")
    if path.exists() and path.resolve() == files.source.resolve():
        raise CliError(f"--compare-report {path} would overwrite the input {files.source}")
    return path


def compare_file(args: argparse.Namespace, files: BatchFiles, interrupt: Interrupt, service: InferenceService) -> int:
    """Compare the versions on the input file; the exit status of the module docstring."""
    from adapters.errors import V2Error
    from handler.batch.compare import compare_jsonl
    from handler.batch.job import BatchJob
    from handler.batch.lines import bounded_lines, read_chunks
    from handler.cli.batch_files import count_lines
    from handler.config.lambda_settings import BatchSettings
    from handler.runtime.loop import run

    if files.is_npy:
        raise CliError("--compare-version reads a .jsonl input of V2 requests, not a .npy array")
    if args.resume:
        raise CliError("--compare-version runs the whole input; it takes no --resume")
    target = report_path(files, args.compare_report)
    model = args.model or BatchSettings.from_env().default_model
    max_bytes = service.settings.max_body_bytes
    job = BatchJob(model, args.model_version, args.chunk_size, id_prefix=f"{files.source.name}:", max_bytes=max_bytes)
    try:
        if model:
            run(service.dataplane.model_metadata(model, args.model_version))
            run(service.dataplane.model_metadata(model, args.compare_version))
    except V2Error as exc:
        raise CliError(exc.message) from None
    total = count_lines(files.source)
    with files.source.open("rb") as reader:
        update, close = progress_bar(total, 0, args.quiet)
        try:
            lines = bounded_lines(read_chunks(reader.read), max_bytes)
            report = run(compare_jsonl(service, job, args.compare_version, lines, update, interrupt))
        finally:
            close()
    document = report.report()
    document["input"] = str(files.source)
    target.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(table(document), end="")
    print(f"oip batch: comparison -> {target}", file=sys.stderr)
    if not report.complete:
        print(f"oip batch: interrupted after {report.rows} rows; {target} holds what was compared", file=sys.stderr)
        return 130
    threshold = args.min_agreement
    agreement = document["agreement"]
    if threshold is not None and (agreement is None or agreement < threshold):
        shown = "none compared" if agreement is None else f"{agreement:.4f}"
        print(f"oip batch: agreement {shown} is below --min-agreement {threshold}", file=sys.stderr)
        return BELOW_AGREEMENT
    failed = document["failed"]
    if failed["default"] or failed["candidate"]:
        first = document["error_samples"][0]
        print(
            f"oip batch: {failed['default']} rows failed with the default version, {failed['candidate']} with "
            f"the candidate (first: line {first['line']}, {first['version']}: {first['error']})",
            file=sys.stderr,
        )
        return 1
    return 0


def table(document: dict[str, Any]) -> str:
    """The report as a short table for people: a summary line, one line per output, the worst rows."""
    compared = document["compared"]
    lines = [
        f"model {document['model']} version {document['version']} against {document['compare_version']}: "
        f"{document['rows']} rows, {compared} compared, {document['agreeing']} agree ({_rate(document['agreement'])})"
    ]
    header = ("output", "datatype", "agreement", "max abs diff p50/p99/max", "max rel diff p50/p99/max")
    rows = [header]
    for name, output in document["outputs"].items():
        agreement = (
            f"{output['elements_agreeing']}/{output['elements']} ({_rate(output['agreement'])})"
            if output["elements"]
            else "-"
        )
        rows.append((name, output["datatype"], agreement, _spread(output, "abs"), _spread(output, "rel")))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    worst = document["worst_rows"]
    if worst:
        lines.append("worst rows: " + ", ".join(_worst(row) for row in worst[:5]))
    return "\n".join(lines) + "\n"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def _spread(output: dict[str, Any], kind: str) -> str:
    found = output.get(f"max_{kind}_difference")
    if found is None:
        return "-"
    return "/".join(_short(found[key]) for key in ("p50", "p99", "max"))


def _short(value: float | str) -> str:
    return "inf" if isinstance(value, str) or math.isinf(value) else f"{value:.3g}"


def _worst(row: dict[str, Any]) -> str:
    disagreeing = sum(entry["elements"] - entry["agreeing"] for entry in row["outputs"].values())
    largest = max((entry.get("max_abs_difference", 0.0) for entry in row["outputs"].values()), key=_order)
    return f"line {row['line']} ({disagreeing} disagreeing, max abs {_short(largest)})"


def _order(value: float | str) -> float:
    return math.inf if isinstance(value, str) else value
