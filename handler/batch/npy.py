"""Batch prediction over a .npy array for a single-input model: each row (first dimension) is one request,
streamed from the file in chunks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import numpy as np

from adapters.datatypes import datatype_of, numpy_dtype
from adapters.errors import InvalidInput
from adapters.types import InferCall, Tensor, TensorSpec
from handler.batch.cast import cast_rows, check_castable
from handler.batch.chunks import run_merged
from handler.batch.job import BatchJob, BatchSummary, Stop, Write
from handler.batch.merged_lines import MergedLines
from handler.inference.service import InferenceService

NPY_MAGIC = b"\x93NUMPY"


@dataclass(frozen=True)
class NpyPlan:
    """A checked .npy input: its rows, the model input they feed and the dtype they are sent as."""

    shape: tuple[int, ...]
    dtype: np.dtype
    spec: TensorSpec
    target: np.dtype

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize


def read_npy_header(stream: IO[bytes]) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a .npy header (the stream is left at the data); InvalidInput for anything else."""
    try:
        major, _ = np.lib.format.read_magic(stream)
        reader = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = reader(stream)
    except (ValueError, SyntaxError, TypeError) as exc:
        raise InvalidInput(f"not a .npy file: {exc}") from None
    if dtype.hasobject or not shape:
        raise InvalidInput(".npy input must be a numeric array with at least one dimension (not an object array)")
    if fortran and len(shape) > 1:
        raise InvalidInput(".npy arrays must be C-ordered to be streamed row by row")
    return shape, dtype


async def plan_npy(service: InferenceService, job: BatchJob, stream: IO[bytes]) -> NpyPlan:
    """Read and check the header against the model before anything is predicted or written."""
    if not job.model:
        raise InvalidInput("no model: .npy input needs --model (env OIP_BATCH_MODEL)")
    shape, dtype = read_npy_header(stream)
    metadata = await service.dataplane.model_metadata(job.model, job.version)
    if len(metadata.inputs) != 1:
        raise InvalidInput(f".npy input needs a single-input model; '{job.model}' has {len(metadata.inputs)} inputs")
    spec = metadata.inputs[0]
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    if row_bytes > job.max_bytes:
        raise InvalidInput(
            f"each row of the .npy array is {row_bytes} bytes, over the limit of {job.max_bytes} bytes "
            "(OIP_MAX_BODY_BYTES)"
        )
    source = dtype.newbyteorder("=")
    target = numpy_dtype(spec.datatype)
    what = f"the .npy array is {source} but model '{job.model}' input '{spec.name}' takes {spec.datatype}"
    if source != target:
        if not job.cast:
            raise InvalidInput(f"{what}; pass --cast to convert it")
        check_castable(source, target, what)
    return NpyPlan(shape, dtype, spec, target)


async def predict_npy(
    service: InferenceService,
    job: BatchJob,
    stream: IO[bytes],
    write: Write,
    progress: Callable[[int], object] | None = None,
    stop: Stop | None = None,
    summary: BatchSummary | None = None,
) -> BatchSummary:
    """Predict each row (first dimension) of a .npy array for a single-input model, streaming the file.

    ``stop`` and ``summary`` as for :func:`handler.batch.jsonl.predict_jsonl`; resuming skips (seeks past) the
    ``rows_in`` rows already done.
    """
    plan = await plan_npy(service, job, stream)
    summary = summary or BatchSummary(job.model, job.version)
    row_bytes = plan.row_bytes
    if summary.rows_in:
        stream.seek(summary.rows_in * row_bytes, os.SEEK_CUR)
    remaining = plan.shape[0] - summary.rows_in
    datatype = datatype_of(plan.target)
    native = plan.dtype.newbyteorder("=")
    prefix = job.id_prefix
    while remaining > 0 and not (stop and stop()):
        count = min(job.chunk_size, remaining, max(job.max_bytes // max(row_bytes, 1), 1))
        data = stream.read(count * row_bytes)
        if len(data) != count * row_bytes:
            raise InvalidInput(
                f".npy data ends early: {plan.shape[0]} rows announced, "
                f"{summary.rows_in + len(data) // max(row_bytes, 1)} present"
            )
        array = np.frombuffer(data, dtype=plan.dtype).reshape((count, *plan.shape[1:]))
        array = array.astype(native, copy=False)
        kept = None
        if array.dtype != plan.target:
            array, kept = cast_rows(array, plan.target)
        first = summary.rows_in + 1
        unfit = [] if kept is None else np.flatnonzero(~kept).tolist()
        errors = {
            first + i: summary.error(first + i, f"row {first + i}: a value does not fit {datatype} (--cast)")
            for i in unfit
        }
        group = MergedLines(job.model, job.version, plan.spec.name, datatype, (1, *plan.shape[1:]))
        lines = range(first, first + count)
        group.lines = [line for line in lines if line not in errors] if errors else list(lines)
        group.ids = [f"{prefix}{line}" for line in group.lines] if prefix else list(map(str, group.lines))
        outputs = [errors[line] for line in errors]
        if group.lines:
            rows = array[kept] if errors else array
            group.call = InferCall((Tensor(plan.spec.name, datatype, rows.shape, rows),), (), None)
            outputs = await run_merged(service, group, summary)
            if errors:
                answered = dict(zip(group.lines, outputs, strict=True))
                outputs = [answered[line] if line in answered else errors[line] for line in lines]
        summary.rows_in += count
        outputs.append(b"")  # the last line's newline
        write(b"\n".join(outputs))
        summary.rows_out += count
        remaining -= count
        if progress is not None:
            progress(count)
    summary.complete = remaining <= 0
    summary.finished = time.time()
    return summary
