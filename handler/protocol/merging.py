"""Requests to one model version run as one execution and split again, as Triton's dynamic batcher does.

Requests merge when their inputs concatenate along the first dimension (the same names, datatypes and per-row
shapes, every input with the same row count) and they ask for the same outputs with the same request parameters,
on a model whose every input has a variable first dimension; at most ``max_batch_size`` rows go into one
execution.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from adapters.types import Execution, InferCall, InferResult, ModelMetadata, Tensor

#: The most rows one execution holds for a model without ``max_batch_size``.
UNBOUNDED_ROWS = 1 << 20


def merge_key(call: InferCall) -> Hashable | None:
    """What requests that may merge with ``call`` share; None when it runs alone."""
    inputs = call.inputs
    if len(inputs) == 1:  # most requests: no sorting, no row counts to compare
        shape = inputs[0].shape
        if not shape:
            return None
        shapes: tuple[Any, ...] = ((inputs[0].name, inputs[0].datatype, shape[1:]),)
    else:
        if not inputs or any(not tensor.shape for tensor in inputs):
            return None
        rows = inputs[0].shape[0]
        if any(tensor.shape[0] != rows for tensor in inputs):
            return None
        shapes = tuple(sorted((tensor.name, tensor.datatype, tensor.shape[1:]) for tensor in inputs))
    outputs = tuple((output.name, output.binary, _hashable(output.parameters)) for output in call.outputs)
    parameters = _hashable(call.parameters)
    if parameters is None or any(output[2] is None for output in outputs):
        return None
    return shapes, outputs, parameters


def _hashable(parameters: Mapping[str, Any]) -> Hashable | None:
    """Parameters as a hashable value; None when one of their values is not hashable."""
    if not parameters:
        return ()
    try:
        return frozenset(parameters.items())
    except TypeError:  # a list or mapping among the values
        return None


def row_cap(metadata: ModelMetadata) -> int:
    """The most rows of one execution; 0 when the model's inputs do not concatenate along the first dimension."""
    if not metadata.inputs or any(not spec.shape or spec.shape[0] != -1 for spec in metadata.inputs):
        return 0
    return metadata.max_batch_size or UNBOUNDED_ROWS


def within_cap(indices: Sequence[int], calls: Sequence[InferCall], cap: int) -> int:
    """How many of ``indices`` (from the first) fit one execution of at most ``cap`` rows (at least one)."""
    total = 0
    for taken, index in enumerate(indices):
        total += calls[index].inputs[0].shape[0]
        if taken and total > cap:
            return taken
    return len(indices)


def merged_call(calls: Sequence[InferCall]) -> InferCall:
    """One call holding every row of ``calls`` (which share a ``merge_key``), in their order."""
    first = calls[0]
    total = sum(call.inputs[0].shape[0] for call in calls)
    inputs = []
    for tensor in first.inputs:
        parts = [next(t for t in call.inputs if t.name == tensor.name).data for call in calls]
        inputs.append(Tensor(tensor.name, tensor.datatype, (total, *tensor.shape[1:]), np.concatenate(parts, axis=0)))
    return InferCall(tuple(inputs), first.outputs, None, first.parameters)


def split_result(result: InferResult, calls: Sequence[InferCall]) -> list[InferResult] | None:
    """Each call's own rows of a merged result, sharing its execution (the first call counts it); None when an
    output does not hold one row per input row."""
    counts = [call.inputs[0].shape[0] for call in calls]
    total = sum(counts)
    outputs = result.outputs
    if any(not out.shape or out.shape[0] != total for out in outputs):
        return None
    execution = result.execution
    shares: dict[tuple[int, bool], Execution] = {}  # one value per row count and lead: the calls share them
    results = []
    start = 0
    for index, (call, rows) in enumerate(zip(calls, counts, strict=True)):
        end = start + rows
        pieces = tuple(
            Tensor(out.name, out.datatype, (rows, *out.shape[1:]), out.data[start:end], out.parameters)
            for out in outputs
        )
        shared = None
        if execution is not None:
            key = (rows, execution.leads and index == 0)
            shared = shares.get(key)
            if shared is None:
                shared = shares[key] = Execution(
                    execution.batch_size,
                    execution.compute_input_ns,
                    execution.compute_infer_ns,
                    execution.compute_output_ns,
                    *key,
                )
        results.append(InferResult(result.model_name, result.model_version, pieces, call.id, result.parameters, shared))
        start = end
    return results
