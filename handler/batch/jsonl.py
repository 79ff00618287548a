"""Batch prediction over JSON Lines of V2 requests, in chunks of ``chunk_size`` rows so memory stays bounded
whatever the file size; each input line yields one output line, in input order: a V2 inference response, or
``{"error": ..., "line": n}`` (a blank line too is an error row, so line k of the output answers line k).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from itertools import islice

from handler.batch.chunks import run_chunk
from handler.batch.job import BatchJob, BatchSummary, Stop, Write, parse_rows
from handler.inference.service import InferenceService


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
        rows = await parse_rows(service, job, chunk, summary)
        await run_chunk(service, rows, summary)
        outputs = [row.output for row in rows if row.output is not None]
        if len(outputs) != len(chunk):  # never: every row ends with one output line
            raise RuntimeError(f"{len(chunk)} rows gave {len(outputs)} output lines")
        write(b"\n".join(outputs) + b"\n")
        summary.rows_out += len(outputs)
        if progress is not None:
            progress(len(chunk))
    summary.finished = time.time()
    return summary
