"""Batch prediction over streams: JSON Lines of V2 requests, or a .npy array for a single-input model.

Input is read and predicted in chunks of ``chunk_size`` rows, so memory stays bounded whatever the file
size; each input line (or .npy row) yields exactly one output line, in input order: a V2 inference response,
or ``{"error": ..., "line": n}``. Compatible requests of a chunk (same model, input names, datatypes and
per-row shapes, on a model whose first dimension is variable) run as one batched call and are split again,
as Triton's dynamic batcher does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import IO, Any

import numpy as np
import orjson

from adapters.datatypes import datatype_of, numpy_dtype
from adapters.errors import InvalidInput, V2Error
from adapters.types import InferCall, InferResult, RequestedOutput, Tensor
from handler.codec import decode_infer_document, encode_infer_response, load_json_object
from handler.dataplane import DataPlane

Write = Callable[[bytes], object]
MAX_ERROR_SAMPLES = 20


@dataclass(frozen=True)
class BatchJob:
    """What to run: the model (a JSONL line may name another with ``model_name``), chunking and id prefix."""

    model: str | None
    version: str | None = None
    chunk_size: int = 256
    id_prefix: str = ""
    #: Uniform chunks of one-input requests decode, run and encode in one pass (same output, faster).
    fast_path: bool = True


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

    def error(self, line: int, message: str) -> bytes:
        """Count a failed row and return its output line."""
        self.errors += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append({"line": line, "error": message})
        return orjson.dumps({"line": line, "error": message})

    def manifest(self, **extra: Any) -> dict[str, Any]:
        """The run's manifest: counts, errors, model, version, timing, plus ``extra`` (input/output locations)."""
        finished = self.finished or time.time()
        seconds = max(finished - self.started, 1e-9)
        return {
            **extra,
            "model": self.model,
            "model_version": ",".join(sorted(self.versions_used)) or self.version,
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
class _Row:
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


def _parse_row(job: BatchJob, line_number: int, raw: bytes, summary: BatchSummary) -> _Row:
    row = _Row(line_number, job.model, job.version)
    try:
        document = load_json_object(raw, f"line {line_number}")
        row.model = document.pop("model_name", None) or job.model
        row.version = document.pop("model_version", None) or job.version
        if not row.model:
            raise InvalidInput("no model: give --model / OIP_BATCH_MODEL or a 'model_name' field on the line")
        call = decode_infer_document(document)
        row.call = call if call.id is not None else _with_id(call, f"{job.id_prefix}{line_number}")
    except V2Error as exc:
        row.output = summary.error(line_number, exc.message)
    return row


def _with_id(call: InferCall, request_id: str) -> InferCall:
    return InferCall(call.inputs, call.outputs, request_id, call.parameters)


def _signature(row: _Row) -> tuple[Any, ...] | None:
    call = row.call
    if call is None or any(not t.shape for t in call.inputs):
        return None
    rows = {t.shape[0] for t in call.inputs}
    if len(rows) != 1:
        return None
    inputs = tuple(sorted((t.name, t.datatype, t.shape[1:]) for t in call.inputs))
    return row.model, row.version, inputs, tuple((o.name, o.binary) for o in call.outputs)


async def _batchable(dataplane: DataPlane, model: str, version: str | None) -> int:
    """0 when the model's inputs cannot be concatenated along the first dimension, else a row cap."""
    metadata = await dataplane.model_metadata(model, version)
    if not metadata.inputs or any(not spec.shape or spec.shape[0] != -1 for spec in metadata.inputs):
        return 0
    return metadata.max_batch_size or 1 << 20


async def _run_single(dataplane: DataPlane, row: _Row, summary: BatchSummary) -> None:
    assert row.call is not None and row.model is not None
    try:
        result = await dataplane.infer(row.model, row.version, row.call)
        summary.versions_used.add(result.model_version)
        row.output = encode_line(result, row.call)
    except V2Error as exc:
        row.output = summary.error(row.line, exc.message)


async def _run_merged(dataplane: DataPlane, group: list[_Row], summary: BatchSummary) -> bool:
    """Run a group as one call; False (nothing written) if that is not possible."""
    calls = [row.call for row in group if row.call is not None]
    first = calls[0]
    counts = [call.inputs[0].shape[0] for call in calls]
    total = sum(counts)
    inputs = []
    for tensor in first.inputs:
        parts = [next(t for t in call.inputs if t.name == tensor.name).data for call in calls]
        inputs.append(Tensor(tensor.name, tensor.datatype, (total, *tensor.shape[1:]), np.concatenate(parts, axis=0)))
    try:
        result = await dataplane.infer(group[0].model or "", group[0].version, InferCall(tuple(inputs), first.outputs))
    except V2Error:
        return False
    if any(not out.shape or out.shape[0] != total for out in result.outputs):
        return False
    summary.versions_used.add(result.model_version)
    offsets = np.cumsum(counts)[:-1]
    pieces = [np.split(out.data, offsets, axis=0) for out in result.outputs]
    for index, (row, call) in enumerate(zip(group, calls, strict=True)):
        outputs = tuple(
            Tensor(out.name, out.datatype, tuple(int(d) for d in piece[index].shape), piece[index])
            for out, piece in zip(result.outputs, pieces, strict=True)
        )
        row.output = encode_line(InferResult(result.model_name, result.model_version, outputs, call.id), call)
    return True


async def _run_chunk(dataplane: DataPlane, rows: list[_Row], summary: BatchSummary) -> None:
    pending = [row for row in rows if row.output is None]
    groups: dict[tuple[Any, ...], list[_Row]] = {}
    for row in pending:
        signature = _signature(row)
        if signature is None:
            await _run_single(dataplane, row, summary)
        else:
            groups.setdefault(signature, []).append(row)
    for group in groups.values():
        try:
            cap = await _batchable(dataplane, group[0].model or "", group[0].version) if len(group) > 1 else 0
        except V2Error as exc:
            for row in group:
                row.output = summary.error(row.line, exc.message)
            continue
        start = 0
        while start < len(group):
            part = _within_cap(group[start:], cap)
            if len(part) == 1 or not await _run_merged(dataplane, part, summary):
                for row in part:
                    await _run_single(dataplane, row, summary)
            start += len(part)


def _within_cap(part: list[_Row], cap: int) -> list[_Row]:
    """Leading rows of ``part`` whose total batch size stays within ``cap`` (at least one row)."""
    if not cap:
        return part[:1]
    total, taken = 0, []
    for row in part:
        assert row.call is not None
        total += row.call.inputs[0].shape[0]
        if taken and total > cap:
            break
        taken.append(row)
    return taken


_FAST_REQUEST_KEYS = frozenset({"id", "inputs", "model_name", "model_version"})
_FAST_INPUT_KEYS = frozenset({"name", "shape", "datatype", "data"})


def _uniform_inputs(documents: list[Any]) -> tuple[str, str, tuple[int, ...]] | None:
    """(name, datatype, shape) when every document is a plain one-input request of the same form, else None."""
    first = documents[0]
    if not isinstance(first, dict) or not isinstance(first.get("inputs"), list) or len(first["inputs"]) != 1:
        return None
    head = first["inputs"][0]
    if not isinstance(head, dict):
        return None
    name, datatype, shape = head.get("name"), head.get("datatype"), head.get("shape")
    if not (isinstance(name, str) and datatype in _FAST_DATATYPES and isinstance(shape, list) and shape):
        return None
    if not all(type(d) is int and d >= 0 for d in shape):
        return None
    for document in documents:
        if not isinstance(document, dict) or not document.keys() <= _FAST_REQUEST_KEYS:
            return None
        inputs = document.get("inputs")
        if not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
            return None
        item = inputs[0]
        if item.keys() != _FAST_INPUT_KEYS or item["name"] != name or item["datatype"] != datatype:
            return None
        if item["shape"] != shape or not isinstance(document.get("id", ""), str):
            return None
    return name, datatype, tuple(shape)


_FAST_DATATYPES = frozenset({"FP32", "FP64", "FP16", "INT64", "INT32"})


async def _fast_chunk(
    dataplane: DataPlane, job: BatchJob, chunk: list[tuple[int, bytes]], summary: BatchSummary
) -> list[bytes] | None:
    """A whole chunk of uniform one-input requests as one decode, one run and one encode pass; None if the
    chunk is not uniform or anything fails (the general path then reports each row on its own)."""
    try:
        documents = [orjson.loads(raw) for _, raw in chunk]
    except orjson.JSONDecodeError:
        return None
    form = _uniform_inputs(documents)
    models = {(d.get("model_name") or job.model, d.get("model_version") or job.version) for d in documents}
    if form is None or len(models) != 1:
        return None
    (model, version), (name, datatype, shape) = models.pop(), form
    if not model:
        return None
    rows = shape[0]
    try:
        data = np.asarray([d["inputs"][0]["data"] for d in documents], dtype=numpy_dtype(datatype))
        if data.size != len(documents) * int(np.prod(shape)):
            return None
        merged = data.reshape((len(documents) * rows, *shape[1:]))
        result = await dataplane.infer(model, version, InferCall((Tensor(name, datatype, merged.shape, merged),)))
    except (ValueError, TypeError, OverflowError, V2Error):
        return None
    if any(
        not out.shape or out.shape[0] != merged.shape[0] or out.datatype in ("BYTES", "BF16") for out in result.outputs
    ):
        return None
    summary.versions_used.add(result.model_version)
    outputs = [(out.name, out.datatype, list(out.shape[1:]), np.ascontiguousarray(out.data)) for out in result.outputs]
    lines = []
    for index, ((line_number, _), document) in enumerate(zip(chunk, documents, strict=True)):
        request_id = document.get("id") or f"{job.id_prefix}{line_number}"
        start = index * rows
        entries = [
            {
                "name": out_name,
                "datatype": out_type,
                "shape": [rows, *tail],
                "data": values[start : start + rows].ravel(),
            }
            for out_name, out_type, tail, values in outputs
        ]
        response = {
            "id": request_id,
            "model_name": result.model_name,
            "model_version": result.model_version,
            "outputs": entries,
        }
        lines.append(orjson.dumps(response, option=orjson.OPT_SERIALIZE_NUMPY))
    return lines


async def predict_jsonl(
    dataplane: DataPlane,
    job: BatchJob,
    lines: Iterable[bytes],
    write: Write,
    progress: Callable[[int], object] | None = None,
) -> BatchSummary:
    """Predict every line of a JSON Lines stream; blank lines are skipped (and not counted)."""
    summary = BatchSummary(job.model, job.version)
    numbered = ((n, raw) for n, raw in enumerate(lines, start=1) if raw.strip())
    while chunk := list(islice(numbered, job.chunk_size)):
        summary.rows_in += len(chunk)
        fast = await _fast_chunk(dataplane, job, chunk, summary) if job.fast_path else None
        if fast is not None:
            outputs = fast
        else:
            rows = [_parse_row(job, n, raw, summary) for n, raw in chunk]
            await _run_chunk(dataplane, rows, summary)
            outputs = [row.output for row in rows if row.output is not None]
        write(b"\n".join(outputs) + b"\n")
        summary.rows_out += len(outputs)
        if progress is not None:
            progress(len(chunk))
    summary.finished = time.time()
    return summary


def _npy_header(stream: IO[bytes]) -> tuple[tuple[int, ...], np.dtype]:
    try:
        major, _ = np.lib.format.read_magic(stream)
        reader = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = reader(stream)
    except ValueError as exc:
        raise InvalidInput(f"not a .npy file: {exc}") from None
    if fortran and len(shape) > 1:
        raise InvalidInput(".npy arrays must be C-ordered to be streamed row by row")
    if dtype.hasobject or not shape:
        raise InvalidInput(".npy input must be a numeric array with at least one dimension")
    return shape, dtype


async def predict_npy(
    dataplane: DataPlane,
    job: BatchJob,
    stream: IO[bytes],
    write: Write,
    progress: Callable[[int], object] | None = None,
) -> BatchSummary:
    """Predict each row (first dimension) of a .npy array for a single-input model, streaming the file."""
    if not job.model:
        raise InvalidInput("no model: .npy input needs --model / OIP_BATCH_MODEL")
    summary = BatchSummary(job.model, job.version)
    shape, dtype = _npy_header(stream)
    metadata = await dataplane.model_metadata(job.model, job.version)
    if len(metadata.inputs) != 1:
        raise InvalidInput(f".npy input needs a single-input model; '{job.model}' has {len(metadata.inputs)} inputs")
    spec = metadata.inputs[0]
    row_shape = shape[1:]
    row_bytes = int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize
    remaining = shape[0]
    while remaining:
        count = min(job.chunk_size, remaining)
        data = stream.read(count * row_bytes)
        if len(data) != count * row_bytes:
            raise InvalidInput(
                f".npy data ends early: {remaining} rows announced, {len(data) // max(row_bytes, 1)} read"
            )
        array = (
            np.frombuffer(data, dtype=dtype).reshape((count, *row_shape)).astype(dtype.newbyteorder("="), copy=False)
        )
        datatype = datatype_of(array.dtype)
        rows = []
        for index in range(count):
            line = summary.rows_in + index + 1
            row_tensor = Tensor(spec.name, datatype, (1, *row_shape), array[index : index + 1])
            rows.append(_Row(line, job.model, job.version, InferCall((row_tensor,), (), f"{job.id_prefix}{line}")))
        summary.rows_in += count
        await _run_chunk(dataplane, rows, summary)
        for row in rows:
            assert row.output is not None
            write(row.output + b"\n")
        summary.rows_out += count
        remaining -= count
        if progress is not None:
            progress(count)
    summary.finished = time.time()
    return summary
