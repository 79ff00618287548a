"""``answers.encode_lines`` (one pass over a merged result's outputs) gives each request the bytes ``job.encode_line``
gives its own result, whatever its id: escapes, quotes, non-ASCII, ``%``, empty, the bytes between two ids."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from adapters.types import InferCall, InferResult, Tensor
from handler.batch.answers import encode_lines
from handler.batch.job import encode_line

#: Ids whose JSON holds what a split of several ids' JSON could trip on: escaped quotes beside commas, ``%``.
AWKWARD = ['","', 'a",', ',"b', "%b", 'a"b', "\\", "é", ""]


@given(st.lists(st.one_of(st.text(max_size=6), st.sampled_from(AWKWARD)), min_size=1))
def test_each_line_is_its_own_results_line(ids: list[str]) -> None:
    rows = len(ids)
    probabilities = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) / 7
    labels = np.arange(rows, dtype=np.int64).reshape(rows, 1)
    outputs = (Tensor("probabilities", "FP32", (rows, 3), probabilities), Tensor("label", "INT64", (rows, 1), labels))
    merged = encode_lines(InferResult("iris", "1", outputs), ids, 1)
    alone = [
        encode_line(
            InferResult(
                "iris",
                "1",
                tuple(Tensor(t.name, t.datatype, (1, *t.shape[1:]), t.data[i : i + 1]) for t in outputs),
                ids[i],
            ),
            InferCall((), ()),
        )
        for i in range(rows)
    ]
    assert merged == alone
