"""Offline comparison of two versions on a JSON Lines file of V2 requests (``oip batch --compare-version``).

Every line is parsed and decoded once, as ``oip batch`` does, then answered by its model's version (the line's
``model_version``, else the job's, else the default) and by the candidate version, chunk by chunk; the answers are
compared output by output (``observability/comparison.py``) and the comparisons gathered into a ``ComparisonReport``:
rows compared, agreement per output, percentiles of the largest differences, the worst rows.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import orjson

from adapters.errors import V2Error
from adapters.types import InferCall, InferResult
from handler.batch.job import BatchJob, BatchSummary, Row, Stop, parse_rows
from handler.batch.lines import OverlongLine
from handler.inference.service import InferenceService
from handler.observability.comparison import Comparison, compare_outputs

#: How many rows the report lists as the worst.
WORST_ROWS = 10
#: The percentiles of the largest differences the report gives.
PERCENTILES = (50, 90, 99)


@dataclass
class OutputTally:
    """One output's comparisons over the run."""

    datatype: str
    rows: int = 0
    rows_agreeing: int = 0
    elements: int = 0
    elements_agreeing: int = 0
    mismatched: int = 0
    max_abs: list[float] = field(default_factory=list)
    max_rel: list[float] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "datatype": self.datatype,
            "rows": self.rows,
            "rows_agreeing": self.rows_agreeing,
            "elements": self.elements,
            "elements_agreeing": self.elements_agreeing,
            "agreement": self.elements_agreeing / self.elements if self.elements else None,
            "mismatched": self.mismatched,
        }
        if self.max_abs:
            document["max_abs_difference"] = percentiles(self.max_abs)
            document["max_rel_difference"] = percentiles(self.max_rel)
        return document


@dataclass
class ComparisonReport:
    """What a comparison run found; ``report()`` is its JSON document."""

    model: str | None
    version: str | None
    candidate: str
    rows: int = 0
    compared: int = 0
    agreeing: int = 0
    failed_default: int = 0
    failed_candidate: int = 0
    error_samples: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, OutputTally] = field(default_factory=dict)
    versions_used: set[str] = field(default_factory=set)
    candidates_used: set[str] = field(default_factory=set)
    #: A heap of the worst rows: (disagreeing elements, largest absolute difference, -line, row).
    worst: list[tuple[int, float, int, dict[str, Any]]] = field(default_factory=list)
    complete: bool = False

    def add(self, line: int, request_id: str | None, comparison: Comparison) -> None:
        """Count one row both versions answered."""
        self.compared += 1
        self.agreeing += comparison.agrees
        row: dict[str, Any] = {}
        disagreeing, largest = 0, 0.0
        for output in comparison.outputs:
            tally = self.outputs.setdefault(output.name, OutputTally(output.datatype))
            tally.rows += 1
            tally.rows_agreeing += output.agrees
            tally.elements += output.elements
            tally.elements_agreeing += output.agreeing if output.matched else 0
            tally.mismatched += not output.matched
            entry: dict[str, Any] = {"elements": output.elements, "agreeing": output.agreeing}
            if not output.matched:
                entry["mismatched"] = True
            if output.max_abs is not None and output.max_rel is not None:
                tally.max_abs.append(output.max_abs)
                tally.max_rel.append(output.max_rel)
                entry["max_abs_difference"] = _number(output.max_abs)
                entry["max_rel_difference"] = _number(output.max_rel)
                largest = max(largest, output.max_abs)
            disagreeing += output.elements - output.agreeing
            row[output.name] = entry
        if comparison.agrees and largest == 0.0:
            return
        item = (disagreeing, largest, -line, {"line": line, "id": request_id, "outputs": row})
        if len(self.worst) < WORST_ROWS:
            heapq.heappush(self.worst, item)
        elif item[:3] > self.worst[0][:3]:
            heapq.heapreplace(self.worst, item)

    def failed(self, line: int, which: str, message: str) -> None:
        """Count a row one version could not answer (``which``: ``default`` or ``candidate``)."""
        if which == "default":
            self.failed_default += 1
        else:
            self.failed_candidate += 1
        if len(self.error_samples) < 20:
            self.error_samples.append({"line": line, "version": which, "error": message})

    def report(self) -> dict[str, Any]:
        """The JSON document of the run."""
        worst = sorted(self.worst, key=lambda item: item[:3], reverse=True)
        return {
            "model": self.model,
            "version": ",".join(sorted(self.versions_used)) or self.version,
            "compare_version": ",".join(sorted(self.candidates_used)) or self.candidate,
            "complete": self.complete,
            "rows": self.rows,
            "compared": self.compared,
            "agreeing": self.agreeing,
            "agreement": self.agreeing / self.compared if self.compared else None,
            "failed": {"default": self.failed_default, "candidate": self.failed_candidate},
            "error_samples": sorted(self.error_samples, key=lambda sample: sample["line"]),
            "outputs": {name: tally.report() for name, tally in sorted(self.outputs.items())},
            "worst_rows": [item[3] for item in worst],
        }


def percentiles(values: list[float]) -> dict[str, float | str]:
    """p50, p90, p99 (numpy's linear interpolation) and the maximum of ``values``."""
    array = np.asarray(values, dtype=np.float64)
    found = np.percentile(array, PERCENTILES) if np.isfinite(array).all() else _with_infinities(array)
    document = {f"p{p}": _number(float(value)) for p, value in zip(PERCENTILES, found, strict=True)}
    document["max"] = _number(float(array.max()))
    return document


def _with_infinities(array: np.ndarray) -> np.ndarray:
    """Percentiles where some values are infinite: the nearest rank, so an infinity never becomes NaN."""
    return np.percentile(array, PERCENTILES, method="inverted_cdf")


def _number(value: float) -> float | str:
    """A float for JSON: infinity as the string ``"inf"``."""
    return value if math.isfinite(value) else "inf"


async def compare_jsonl(
    service: InferenceService,
    job: BatchJob,
    candidate: str,
    lines: Iterable[bytes],
    progress: Callable[[int], object] | None = None,
    stop: Stop | None = None,
) -> ComparisonReport:
    """Answer every line with its version and with ``candidate``, and compare the answers."""
    report = ComparisonReport(job.model, job.version, candidate)
    logged = ((number, logged_request(line)) for number, line in enumerate(lines, start=1))
    numbered = ((number, request) for number, request in logged if request is not None)
    while not (stop and stop()):
        chunk = list(islice(numbered, job.chunk_size))
        if not chunk:
            report.complete = True
            break
        report.rows += len(chunk)
        summary = BatchSummary(job.model, job.version)
        rows = await parse_rows(service, job, chunk, summary)
        for row in rows:
            if row.output is not None:  # refused before either version ran: the line itself is wrong
                report.failed(row.line, "default", _error_of(row.output))
        await _compare_chunk(service, candidate, [row for row in rows if row.output is None], report)
        if progress is not None:
            progress(len(chunk))
    return report


async def _compare_chunk(service: InferenceService, candidate: str, rows: list[Row], report: ComparisonReport) -> None:
    groups: dict[tuple[str, str | None], list[Row]] = {}
    for row in rows:
        if row.call is not None and row.model is not None:
            groups.setdefault((row.model, row.version), []).append(row)
    for (model, version), group in groups.items():
        calls: list[InferCall] = [row.call for row in group if row.call is not None]
        defaults = await _answers(service, model, version, calls)
        candidates = await _answers(service, model, candidate, calls)
        for row, call, ours, theirs in zip(group, calls, defaults, candidates, strict=True):
            if isinstance(ours, V2Error):
                report.failed(row.line, "default", ours.message)
            elif isinstance(theirs, V2Error):
                report.failed(row.line, "candidate", theirs.message)
            else:
                report.versions_used.add(ours.model_version)
                report.candidates_used.add(theirs.model_version)
                report.add(row.line, call.id, compare_outputs(ours.outputs, theirs.outputs))


async def _answers(
    service: InferenceService, model: str, version: str | None, calls: list[InferCall]
) -> list[InferResult | V2Error]:
    """``infer_many``'s outcomes; a version that cannot be resolved fails every call with its error."""
    try:
        return await service.infer_many(model, version, calls)
    except V2Error as exc:
        return [exc] * len(calls)


def logged_request(line: bytes) -> bytes | None:
    """A line of the sampled request logs (``observability/request_log.py``: ``model``, ``raw_data``, ...) as the
    V2 request it logged, naming its model; any other line as it is; None for a shadow's disagreement record
    (``raw_data`` null), which logged no request. A logged body that was binary stays a record, which fails as its
    row."""
    if isinstance(line, OverlongLine) or b'"raw_data"' not in line:
        return line
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    if not isinstance(record, dict):
        return line
    raw, model = record.get("raw_data"), record.get("model")
    if raw is None and "raw_data" in record:
        return None  # a shadow's disagreement record (observability/request_log.py): no request, not a row
    if not isinstance(raw, str) or not isinstance(model, str):
        return line
    try:
        request = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return line
    if not isinstance(request, dict):
        return line
    request.setdefault("model_name", model)
    return orjson.dumps(request)


def _error_of(line: bytes) -> str:
    message = orjson.loads(line).get("error")
    return str(message)
