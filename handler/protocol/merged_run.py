"""Requests of equal row counts merged by their decoder into one call (a batch chunk's lines): cut into executions
of at most the model's ``max_batch_size`` rows, and the executions' shares per request, as ``merging.py``'s
``split_result`` gives them to requests the data plane merged itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from adapters.types import Execution, InferCall, InferResult, Tensor


def merged_parts(call: InferCall, requests: int, cap: int) -> Iterator[tuple[int, InferCall]]:
    """``(requests, call)`` per execution: whole requests, at most ``cap`` rows each (one request at least)."""
    rows = call.inputs[0].shape[0] // requests
    per_part = max(cap // max(rows, 1), 1)
    if per_part >= requests:
        yield requests, call
        return
    for start in range(0, requests, per_part):
        count = min(per_part, requests - start)
        inputs = tuple(
            Tensor(t.name, t.datatype, (count * rows, *t.shape[1:]), t.data[start * rows : (start + count) * rows])
            for t in call.inputs
        )
        yield count, InferCall(inputs, call.outputs, call.id, call.parameters)


def holds_rows(result: InferResult, rows: int) -> bool:
    """Whether every output of ``result`` holds one row per input row (``rows``)."""
    return all(out.shape and out.shape[0] == rows for out in result.outputs)


def execution_shares(execution: Execution | None, requests: int, rows: int) -> list[Execution | None]:
    """One execution's share per request of ``rows`` rows each: the first leads (counts the execution)."""
    if execution is None:
        return [None] * requests
    counts = (execution.compute_input_ns, execution.compute_infer_ns, execution.compute_output_ns)
    lead = Execution(execution.batch_size, *counts, rows, execution.leads)
    if requests == 1:
        return [lead]
    other = Execution(execution.batch_size, *counts, rows, False)
    return [lead, *([other] * (requests - 1))]


def joined_results(results: list[InferResult]) -> InferResult:
    """The results of consecutive executions as one, their outputs' rows in order."""
    first = results[0]
    if len(results) == 1:
        return first
    outputs = tuple(
        Tensor(
            out.name,
            out.datatype,
            (sum(r.outputs[i].shape[0] for r in results), *out.shape[1:]),
            np.concatenate([r.outputs[i].data for r in results], axis=0),
            out.parameters,
        )
        for i, out in enumerate(first.outputs)
    )
    return InferResult(first.model_name, first.model_version, outputs, first.id, first.parameters, None)
