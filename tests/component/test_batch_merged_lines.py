"""A chunk of JSON lines answered together (plain lines merged into one call per model, input, datatype and shape:
``handler/batch/merged_lines.py``, ``chunks.run_merged``) gives every line the bytes it gets answered alone
(``job.parse_rows`` and ``chunks.run_chunk`` on that one line), errors included, and counts each line as a request
of its own as ``infer_many`` counts a chunk's decoded lines: hypothesis over mixes of good lines, bad lines,
shapes, datatypes and models, on onnxruntime.
"""

# covers: handler/batch/answers.py
# covers: handler/batch/chunks.py
# covers: handler/batch/lines.py

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handler.batch.chunks import run_chunk
from handler.batch.job import BatchJob, BatchSummary, parse_rows
from handler.batch.jsonl import predict_chunk
from handler.batch.lines import OverlongLine
from handler.config.settings import DEMO_REPOSITORY
from handler.inference.service import InferenceService
from handler.runtime.container import build_dataplane
from handler.runtime.loop import run
from tests.conftest import make_settings
from tests.support import onnx_models

#: Models by name: their input's name, datatype and row width (None: 1-D).
MODELS: dict[str, tuple[str, str, int | None]] = {
    "iris": ("input", "FP32", 4),
    "capped": ("INPUT0", "FP32", 3),  # max_batch_size 4: a merged group runs as several executions
    "flat64": ("INPUT0", "FP64", None),
    "half": ("INPUT0", "FP16", None),
}
MAX_BYTES = 4096
#: The models with a batch dimension (max_batch_size).
BATCHING = {"iris", "capped"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> InferenceService:
    root = tmp_path_factory.mktemp("merged_lines")
    shutil.copytree(DEMO_REPOSITORY / "iris", root / "iris")
    onnx_models.save(onnx_models.identity("FP32", ["n", 3]), root, "capped", config="max_batch_size: 4\n")
    onnx_models.save(onnx_models.identity("FP64", ["n"]), root, "flat64")
    onnx_models.save(onnx_models.identity("FP16", ["n"]), root, "half")
    options = make_settings(root, max_tensor_bytes=64, max_body_bytes=MAX_BYTES)
    return InferenceService(build_dataplane(options), options)


numbers = st.one_of(
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e300, max_value=1e300),  # past FP32's and FP16's range: inf, as the decoder makes it
    st.integers(min_value=-(2**70), max_value=2**70),
)


@st.composite
def good_line(draw: st.DrawFn) -> dict[str, Any]:
    """A request the named model answers: 1 to 3 rows (FP64 and FP16 models: up to 20 elements, some over the
    64-byte tensor limit), flat or nested data, with or without its own id and model."""
    model = draw(st.sampled_from(["iris", "iris", "iris", *sorted(MODELS)]))  # lines of one group, mostly
    name, datatype, width = MODELS[model]
    rows = draw(st.one_of(st.just(1), st.integers(min_value=1, max_value=3 if width else 20)))
    shape = [rows, width] if width else [rows]
    data: Any = draw(st.lists(numbers, min_size=rows * (width or 1), max_size=rows * (width or 1)))
    if width and draw(st.booleans()):
        data = [data[i * width : (i + 1) * width] for i in range(rows)]
    line: dict[str, Any] = {"inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]}
    if model != "iris" or draw(st.booleans()):
        line["model_name"] = model
    if draw(st.booleans()):
        line["id"] = draw(st.text(max_size=8))
    return line


def _spoiled(line: dict[str, Any], how: str) -> dict[str, Any] | bytes:
    """``line`` made wrong in one way (or, for some, left right in an unusual spelling)."""
    tensor = line["inputs"][0]
    if how == "count":
        tensor["data"] = [*json.loads(json.dumps(tensor["data"])), 1.0]
    elif how == "string":
        tensor["data"] = ["1.5", *tensor["data"][1:]]
    elif how == "null":
        tensor["data"] = [None, *tensor["data"][1:]]
    elif how == "bool":
        tensor["data"] = [True, *tensor["data"][1:]]
    elif how == "datatype":
        tensor["datatype"] = "FP64" if tensor["datatype"] != "FP64" else "FP32"
    elif how == "int":
        tensor["datatype"] = "INT32"
    elif how == "shape":
        tensor["shape"] = [tensor["shape"][0], 7]
    elif how == "float shape":
        tensor["shape"] = [float(dim) for dim in tensor["shape"]]
    elif how == "name":
        tensor["name"] = "nope"
    elif how == "model":
        line["model_name"] = "absent"
    elif how == "outputs":
        line["outputs"] = [{"name": "label" if line.get("model_name", "iris") == "iris" else "OUTPUT0"}]
    elif how == "parameters":
        line["parameters"] = {"priority": 1}
    elif how == "id":
        line["id"] = 7
    elif how == "duplicate":  # the last one is read, and is right
        return b'{"inputs": [], ' + json.dumps(line)[1:].encode()
    elif how == "duplicate data":
        return json.dumps(line).replace('"data": ', '"data": [1], "data": ', 1).encode()
    elif how == "escaped id":
        line["id"] = 'a"b'
    return line


BAD = ["count", "string", "null", "bool", "datatype", "int", "shape", "float shape", "name", "model", "outputs",
       "parameters", "id", "duplicate", "duplicate data", "escaped id"]  # fmt: skip
RAW = [b"", b"   ", b"{not json", b"[1, 2]", b'{"inputs": []}', b"NaN", OverlongLine(MAX_BYTES + 1)]


@st.composite
def raw_line(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["good", "good", "good", "bad", "raw"]))
    if kind == "raw":
        return draw(st.sampled_from(RAW))
    line = draw(good_line())
    spoiled = _spoiled(line, draw(st.sampled_from(BAD))) if kind == "bad" else line
    return spoiled if isinstance(spoiled, bytes) else json.dumps(spoiled).encode()


def _counts(service: InferenceService) -> list[tuple[int, int, int]]:
    """Successes, failures and inferences of every model, from the statistics. Models without a batch dimension
    leave their inferences out: a merged execution's rows count as its requests' inferences there, one
    execution's batch size when a request runs alone."""
    documents = run(service.dataplane.model_statistics())
    return [
        (
            d["inference_stats"]["success"]["count"],
            d["inference_stats"]["fail"]["count"],
            d["inference_count"] if d["name"] in BATCHING else 0,
        )
        for d in documents
    ]


def _minus(after: list[tuple[int, ...]], before: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    return [tuple(a - b for a, b in zip(x, y, strict=True)) for x, y in zip(after, before, strict=True)]


def _same_as_alone(service: InferenceService, lines: list[bytes], start: int) -> None:
    """``lines`` (numbered from ``start``) answered as one chunk, line by line, and by ``infer_many`` alike."""
    job = BatchJob("iris", chunk_size=len(lines), id_prefix="f:", max_bytes=MAX_BYTES)
    numbered = list(enumerate(lines, start=start))

    together = BatchSummary(job.model, job.version)
    before = _counts(service)
    merged = run(predict_chunk(service, job, numbered, together))
    counted_together = _minus(_counts(service), before)

    alone = BatchSummary(job.model, job.version)
    answers = []
    for line in numbered:
        rows = run(parse_rows(service, job, [line], alone))
        run(run_chunk(service, rows, alone))
        answers.append(rows[0].output)

    by_row = BatchSummary(job.model, job.version)  # the chunk's lines decoded one by one, run by infer_many
    before = _counts(service)
    rows = run(parse_rows(service, job, numbered, by_row))
    run(run_chunk(service, rows, by_row))
    counted_by_row = _minus(_counts(service), before)

    assert merged == answers == [row.output for row in rows]
    assert (together.errors, together.error_samples) == (alone.errors, alone.error_samples)
    assert together.versions_used == alone.versions_used
    # every line a request of its own (successes, failures), its rows counted as infer_many counts them
    assert counted_together == counted_by_row


@given(st.lists(raw_line(), min_size=1, max_size=24), st.integers(min_value=1, max_value=40))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_merged_chunk_answers_each_line_as_it_is_answered_alone(
    service: InferenceService, lines: list[bytes], start: int
) -> None:
    _same_as_alone(service, lines, start)


@pytest.mark.parametrize("how", BAD)
def test_a_wrong_line_amid_its_group_keeps_its_own_answer(service: InferenceService, how: str) -> None:
    """A line made wrong after lines it would merge with (those the property above rarely draws)."""
    line = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [0.5, 1.5, 2.5, 3.5]}]}
    good = json.dumps(line).encode()
    spoiled = _spoiled(json.loads(good), how)
    bad = spoiled if isinstance(spoiled, bytes) else json.dumps(spoiled).encode()
    _same_as_alone(service, [good, good, bad, good], 1)


def test_plain_lines_are_merged(service: InferenceService) -> None:
    """The property above compares the merged path with the per-line one: plain lines do take the merged path
    (one execution per group, counted in the statistics), so the comparison is not the per-line path twice."""
    line = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1.0, 2.0, 3.0, 4.0]}]}
    numbered = [(n, json.dumps(line).encode()) for n in range(1, 11)]
    before = run(service.dataplane.model_statistics("iris"))[0]
    outputs = run(predict_chunk(service, BatchJob("iris", chunk_size=10), numbered, BatchSummary("iris", None)))
    after = run(service.dataplane.model_statistics("iris"))[0]
    assert after["execution_count"] - before["execution_count"] == 1
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 10
    assert [json.loads(output)["id"] for output in outputs] == [str(n) for n in range(1, 11)]
