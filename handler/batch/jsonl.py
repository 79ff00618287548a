"""Batch prediction over JSON Lines of V2 requests, in chunks of ``chunk_size`` rows so memory stays bounded
whatever the file size; each input line yields one output line, in input order: a V2 inference response, or
``{"error": ..., "line": n}`` (a blank line too is an error row, so line k of the output answers line k).

A chunk's plain lines are decoded and answered together (``merged_lines.py``, ``chunks.run_merged``); the
others one by one (``job.parse_rows``, ``chunks.run_chunk``), with the same answers and errors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from itertools import islice

from handler.batch.chunks import run_chunk, run_merged
from handler.batch.job import BatchJob, BatchSummary, Stop, Write, parse_rows
from handler.batch.merged_lines import group_lines, merge_group
from handler.inference.service import InferenceService


async def predict_chunk(
    service: InferenceService, job: BatchJob, chunk: list[tuple[int, bytes]], summary: BatchSummary
) -> list[bytes]:
    """The output lines of a chunk of numbered lines, in order (errors counted in ``summary``)."""
    first = chunk[0][0]
    outputs: list[bytes | None] = [None] * len(chunk)
    groups, alone = group_lines(job, chunk)
    merged = []
    for group in groups:
        if await merge_group(service, job, group):
            merged.append(group)
        else:
            alone += zip(group.lines, group.raws, strict=True)
    if alone:
        alone.sort(key=lambda numbered: numbered[0])
        rows = await parse_rows(service, job, alone, summary)
        await run_chunk(service, rows, summary)
        for row in rows:
            outputs[row.line - first] = row.output
    for group in merged:
        for line, output in zip(group.lines, await run_merged(service, group, summary), strict=True):
            outputs[line - first] = output
    if any(output is None for output in outputs):  # never: every row ends with one output line
        raise RuntimeError(f"{len(chunk)} rows gave {sum(o is not None for o in outputs)} output lines")
    return outputs  # type: ignore[return-value]  # none is None, past the check above


async def predict_jsonl(
    service: InferenceService,
    job: BatchJob,
    lines: Iterable[bytes],
    write: Write,
    progress: Callable[[int], object] | None = None,
    stop: Stop | None = None,
    summary: BatchSummary | None = None,
) -> BatchSummary:
    """Predict every line of a JSON Lines stream, one output line per input line.

    ``stop`` is asked before each chunk; when it says so the run ends with ``complete`` False. A ``summary``
    from an interrupted run continues it: ``lines`` are then the lines after its ``rows_in`` first ones.
    """
    summary = summary or BatchSummary(job.model, job.version)
    numbered = enumerate(lines, start=summary.rows_in + 1)
    while not (stop and stop()):
        chunk = list(islice(numbered, job.chunk_size))
        if not chunk:
            summary.complete = True
            break
        summary.rows_in += len(chunk)
        outputs = await predict_chunk(service, job, chunk, summary)
        write(b"\n".join(outputs) + b"\n")
        summary.rows_out += len(outputs)
        if progress is not None:
            progress(len(chunk))
    summary.finished = time.time()
    return summary
