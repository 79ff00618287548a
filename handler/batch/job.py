"""What a batch run is asked to do (``BatchJob``), what it did (``BatchSummary``, the manifest), and one row's
way from an input line to an output line.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from adapters.errors import InvalidInput, V2Error
from adapters.types import InferCall, InferResult, RequestedOutput
from handler.batch.lines import OverlongLine
from handler.codecs.request import DECODER
from handler.codecs.response import encode_infer_response
from handler.config.settings import LAMBDA_SYNC_PAYLOAD_BYTES
from handler.inference.service import InferenceService
from handler.protocol.resolved_model import ResolvedModel

Write = Callable[[bytes], object]
#: Asked before each chunk; True stops the run cleanly (the manifest then says ``"complete": false``).
Stop = Callable[[], bool]


MAX_ERROR_SAMPLES = 20


@dataclass(frozen=True)
class BatchJob:
    """What to run: the model (a JSONL line may name another with ``model_name``), chunking and id prefix."""

    model: str | None
    version: str | None = None
    chunk_size: int = 256
    id_prefix: str = ""
    #: Convert .npy data to the model's datatype where no value is lost beyond float rounding.
    cast: bool = False
    #: The longest JSON line, and the most .npy row bytes read at once (OIP_MAX_BODY_BYTES, as a request body).
    max_bytes: int = LAMBDA_SYNC_PAYLOAD_BYTES

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, not {self.chunk_size}")


@dataclass
class BatchSummary:
    """Counts and timing of one batch run; ``manifest()`` is what lands beside the output."""

    model: str | None
    version: str | None
    rows_in: int = 0
    rows_out: int = 0
    errors: int = 0
    error_samples: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    finished: float | None = None
    versions_used: set[str] = field(default_factory=set)
    #: True once every row of the input has an output line; False for a stopped (interrupted) run.
    complete: bool = False

    def error(self, line: int, message: str) -> bytes:
        """Count a failed row and return its output line; the samples are the first failed lines, in order."""
        self.errors += 1
        bisect.insort(self.error_samples, {"line": line, "error": message}, key=lambda sample: sample["line"])
        del self.error_samples[MAX_ERROR_SAMPLES:]
        return orjson.dumps({"line": line, "error": message})

    def manifest(self, **extra: Any) -> dict[str, Any]:
        """The run's manifest: counts, errors, model, version, timing, plus ``extra`` (input/output locations)."""
        finished = self.finished or time.time()
        seconds = max(finished - self.started, 1e-9)
        return {
            **extra,
            "model": self.model,
            "model_version": ",".join(sorted(self.versions_used)) or self.version,
            "complete": self.complete,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "errors": self.errors,
            "error_samples": self.error_samples,
            "started_at": datetime.fromtimestamp(self.started, UTC).isoformat(),
            "finished_at": datetime.fromtimestamp(finished, UTC).isoformat(),
            "seconds": round(seconds, 6),
            "rows_per_second": round(self.rows_in / seconds, 1),
        }


@dataclass
class Row:
    line: int
    model: str | None = None
    version: str | None = None
    call: InferCall | None = None
    output: bytes | None = None


def _json_call(call: InferCall) -> InferCall:
    """The call as encoders see it in JSON Lines: every output as JSON, never binary."""
    return InferCall((), tuple(RequestedOutput(o.name, False) for o in call.outputs))


def encode_line(result: InferResult, call: InferCall) -> bytes:
    """One JSON line for a result."""
    body, _ = encode_infer_response(result, _json_call(call))
    return body


#: What a line without a model says when the job names none either.
NO_MODEL = "no model: give --model (env OIP_BATCH_MODEL) or a 'model_name' field on the line"


def parse_line(
    service: InferenceService, raw: bytes, what: str, model: str | None, version: str | None, no_model: str = NO_MODEL
) -> tuple[str, str | None, dict[str, Any]]:
    """A JSON line (or message body) as ``(model, version, request document)``: a V2 inference request naming its
    model with ``model_name`` (and ``model_version``), or taking ``model`` and ``version``; parsed as a REST
    request's JSON body is."""
    document = DECODER.parse(raw, service.cap_counts, what)
    model = document.pop("model_name", None) or model
    version = document.pop("model_version", None) or version
    if not model:
        raise InvalidInput(no_model)
    if not isinstance(model, str) or not (version is None or isinstance(version, str)):
        raise InvalidInput(f"{what}: 'model_name' and 'model_version' must be strings")
    return model, version, document


async def decode_document(service: InferenceService, model: ResolvedModel, document: dict[str, Any]) -> InferCall:
    """A request document (``parse_line``'s) decoded as a REST request's JSON body is, within the service's counts
    for its model and OIP_MAX_TENSOR_BYTES."""
    counts = service.known_counts(model) or await service.counts(model)
    return DECODER.decode_document(document, None, service.max_tensor_bytes, counts)


async def parse_rows(
    service: InferenceService, job: BatchJob, chunk: list[tuple[int, bytes]], summary: BatchSummary
) -> list[Row]:
    """A chunk's lines as rows, each parsed (``parse_line``) and decoded (``decode_document``) as an SQS message
    is, or already answered with its error."""
    resolved: dict[tuple[str, str | None], ResolvedModel] = {}
    rows = []
    for line_number, raw in chunk:
        row = Row(line_number, job.model, job.version)
        rows.append(row)
        if isinstance(raw, OverlongLine):
            row.output = summary.error(
                line_number, f"line of {raw.size} bytes, over the limit of {job.max_bytes} bytes (OIP_MAX_BODY_BYTES)"
            )
            continue
        if not raw.strip():
            row.output = summary.error(line_number, "blank line: expected a V2 inference request")
            continue
        try:
            model, version, document = parse_line(service, raw, f"line {line_number}", job.model, job.version)
            target = resolved.get((model, version))
            if target is None:
                target = resolved[model, version] = service.dataplane.resolve(model, version)
            call = await decode_document(service, target, document)
        except V2Error as exc:
            row.output = summary.error(line_number, exc.message)
            continue
        row.model, row.version = model, version
        row.call = (
            call
            if call.id is not None
            else InferCall(call.inputs, call.outputs, f"{job.id_prefix}{line_number}", call.parameters)
        )
    return rows
