"""Lines that repeat a plain line's bytes but for its data (``merged_lines.Template``: compact JSON, as most writers
of JSON Lines write it) join its group unparsed; each still gets the bytes it gets answered alone, whatever its data
array holds (numbers, wrong counts, spellings JSON refuses, brackets that would change the line's structure):
hypothesis over compact lines and their data arrays rewritten byte by byte, on onnxruntime."""

# covers: handler/batch/job.py
# covers: handler/batch/jsonl.py

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handler.batch.job import BatchJob, BatchSummary
from handler.batch.jsonl import predict_chunk
from handler.batch.merged_lines import group_lines
from handler.inference.service import InferenceService
from handler.runtime.loop import run
from tests.component.test_batch_merged_lines import BAD, _same_as_alone, _spoiled, good_line
from tests.component.test_batch_merged_lines import service as service  # the module-scoped fixture

#: What a data array may be rewritten to: numbers JSON refuses or spells unusually, wrong counts, other tokens,
#: and the bytes that would close the array and the input early.
DATA = [b"1,,2,3,4", b"1 2,3,4,5", b"01,2,3,4", b"1e999,2,3,4", b"-,2,3,4", b"1.,2,3,4", b"1,2,3,4,",
        b"1,2,3", b"1,2,3,4,5", b"100000000000000000000000,2,3,4", b"1e2,-0.5,3E-1,4", b" 1 , 2 ,3,4 ",
        b'1],"model_name":"absent","x":[{"y":[2', b"1,2,3,true", b"1,2,3,null", b"", b"1,2,3,NaN",
        b"[1,2,3,4]", b'1,2,3,"4"']  # fmt: skip


def _compact(line: dict[str, Any] | bytes) -> bytes:
    return line if isinstance(line, bytes) else json.dumps(line, separators=(",", ":")).encode()


@st.composite
def compact_line(draw: st.DrawFn) -> bytes:
    line = draw(good_line())
    kind = draw(st.sampled_from(["good", "good", "good", "data", "bad"]))
    if kind == "bad":
        return _compact(_spoiled(line, draw(st.sampled_from(BAD))))
    raw = _compact(line)
    if kind == "data" and b'"data":[' in raw:
        start = raw.index(b'"data":[') + len(b'"data":[')
        end = raw.index(b"]", start)
        raw = raw[:start] + draw(st.sampled_from(DATA)) + raw[end:]
    return raw


@given(st.lists(compact_line(), min_size=1, max_size=24), st.integers(min_value=1, max_value=40))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_lines_of_a_template_answer_as_they_do_alone(service: InferenceService, lines: list[bytes], start: int) -> None:
    _same_as_alone(service, lines, start)


#: One compact iris line, its data array to be filled in.
IRIS = b'{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[%b]}]}'


@given(st.lists(st.one_of(st.sampled_from(DATA), st.just(b"0.5,1.5,2.5,3.5")), min_size=1, max_size=12))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_lines_of_one_template_answer_as_they_do_alone(service: InferenceService, datas: list[bytes]) -> None:
    """Every line of the same form (the template's path on all but the first plain line), any data arrays."""
    _same_as_alone(service, [IRIS % b"1,2,3,4", *(IRIS % data for data in datas)], 1)


def test_rows_of_other_lengths_never_merge_into_the_right_total(service: InferenceService) -> None:
    """Five numbers and three, after four: twelve in all, as three rows of four would be."""
    _same_as_alone(service, [IRIS % b"1,2,3,4", IRIS % b"1,2,3,4,5", IRIS % b"1,2,3"], 1)


def test_repeated_compact_lines_take_the_template(service: InferenceService) -> None:
    """Compact lines differing in their data only are one group, their data kept raw until the group is parsed
    (so the property above compares the template's path with the per-line one)."""
    rows = [[0.5 * n, 1.0, 2.0, 3.0] for n in range(1, 9)]
    tensor = {"name": "input", "shape": [1, 4], "datatype": "FP32"}
    lines = [orjson.dumps({"inputs": [{**tensor, "data": row}]}) for row in rows]
    job = BatchJob("iris", chunk_size=len(lines))
    (group,), alone = group_lines(job, list(enumerate(lines, start=1)))
    assert alone == [] and all(type(data) is bytes for data in group.data)
    outputs = run(predict_chunk(service, job, list(enumerate(lines, start=1)), BatchSummary("iris", None)))
    assert [json.loads(output)["id"] for output in outputs] == [str(n) for n in range(1, 9)]
    spoiled = [*lines[:3], lines[3].replace(b'"data":[', b'"data":[1],"x":[{"y":[', 1), *lines[4:]]
    groups, alone = group_lines(job, list(enumerate(spoiled, start=1)))
    assert [line for line, _ in alone] == [4] and [len(g.lines) for g in groups] == [7]
