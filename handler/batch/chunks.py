"""One chunk through the inference service. Lines merged by their decoder (``merged_lines.py``, and a .npy
chunk's rows) go to ``infer_merged`` as one call per group and are encoded in one pass (``answers.py``); a group
that cannot run as one, and every other row, goes to ``infer_many`` with the rows of its model version (those that
can run as one execution do, and are split again, as Triton's dynamic batcher does). Every row ends with exactly
one output line.
"""

from __future__ import annotations

from dataclasses import replace

from adapters.errors import V2Error
from adapters.types import InferCall
from handler.batch.answers import encode_lines
from handler.batch.job import BatchSummary, Row, encode_line
from handler.batch.merged_lines import MergedLines
from handler.inference.service import InferenceService
from handler.protocol.merging import split_result


async def run_chunk(service: InferenceService, rows: list[Row], summary: BatchSummary) -> None:
    """Answer every row of ``rows`` that has no output yet: its result's JSON line, or its error line."""
    groups: dict[tuple[str, str | None], list[Row]] = {}
    for row in rows:
        if row.output is None and row.call is not None and row.model is not None:
            groups.setdefault((row.model, row.version), []).append(row)
    for (model, version), group in groups.items():
        calls: list[InferCall] = [row.call for row in group if row.call is not None]
        outcomes = await service.infer_many(model, version, calls)
        for row, call, outcome in zip(group, calls, outcomes, strict=True):
            if isinstance(outcome, V2Error):
                row.output = summary.error(row.line, outcome.message)
                continue
            summary.versions_used.add(outcome.model_version)
            try:
                row.output = encode_line(outcome, call)
            except V2Error as exc:
                row.output = summary.error(row.line, exc.message)


async def run_merged(service: InferenceService, group: MergedLines, summary: BatchSummary) -> list[bytes]:
    """The output lines of a merged group's lines, in order: answered by one ``infer_merged`` call when it can,
    else line by line as ``run_chunk`` answers rows."""
    assert group.call is not None
    result = await service.infer_merged(group.model, group.version, group.call, len(group.lines))
    if result is None:
        calls = zip(group.lines, group.row_calls(), strict=True)
        rows = [Row(line, group.model, group.version, call) for line, call in calls]
        await run_chunk(service, rows, summary)
        return [row.output or b"" for row in rows]
    summary.versions_used.add(result.model_version)
    lines = encode_lines(result, group.ids, group.rows)
    if lines is not None:
        return lines
    calls = group.row_calls()
    # one request's result as it is; several hold one row per input row (``DataPlane.run_merged``)
    results = [replace(result, id=calls[0].id)] if len(calls) == 1 else split_result(result, calls)
    assert results is not None
    outputs = []
    for line, call, one in zip(group.lines, calls, results, strict=True):
        try:
            outputs.append(encode_line(one, call))
        except V2Error as exc:
            outputs.append(summary.error(line, exc.message))
    return outputs
