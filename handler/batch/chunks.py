"""One chunk of rows through the inference service: the rows of each model version go to ``infer_many`` together
(those that can run as one execution do, and are split again, as Triton's dynamic batcher does). Every row ends
with exactly one output line.
"""

from __future__ import annotations

from adapters.errors import V2Error
from adapters.types import InferCall
from handler.batch.job import BatchSummary, Row, encode_line
from handler.inference.service import InferenceService


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
