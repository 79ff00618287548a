"""Every strategy of the request decoder (``handler/codecs/request.py``) gives pydantic's answers and errors.

The reference is ``RequestDecoder(())``: orjson parses, pydantic's ``InferenceRequest`` validates the envelope,
numpy converts the data. Each strategy alone, and all of them together (the process's decoder), decode every body
of the inference corpus and every generated body (envelopes of every kind, numeric data well formed or not, binary
headers with odd ids, corrupted texts, tight counts) three times each (``header_plans`` keeps a plan the second
time and serves from it the third): the same call on success, the same error class, status and message on failure.

Two differences are allowed, each with the same error class and status: a text that is not JSON, when
``json_simd`` parses it, is refused with simdjson's account of the mistake (its error code) instead of orjson's (its
position), since simdjson stops at the mistake where orjson would first build every value before it; and a text with
a key given twice and another mistake may be refused for either first (``_allowed``).
"""

# covers: handler/codecs/envelope.py
# covers: handler/codecs/header_plans.py
# covers: handler/codecs/plain_request.py
# covers: handler/codecs/request_document.py

from __future__ import annotations

import gzip
import json
import math
import warnings
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.errors import V2Error
from adapters.types import InferCall
from handler.codecs.bounds import MAX_MEMBERS, MAX_NAME_CHARS, MAX_PARAMETERS, MAX_TENSOR_PARAMETERS
from handler.codecs.envelope import plain_envelope
from handler.codecs.header_plans import MAX_PLANS
from handler.codecs.plain_request import plain_request
from handler.codecs.request import DECODER, STRATEGIES, RequestDecoder, Strategy
from handler.protocol.checks import MAX_DIMS
from handler.protocol.limits import DEFAULT_COUNTS, TensorCounts
from handler.protocol.status import status_of
from tests.support.infer_corpus import requests
from tests.support.json_spellings import infer_body, nest, render

LIMIT = 1 << 24
REFERENCE = RequestDecoder(())
#: Each strategy alone, then all together; ``json_simd`` on texts of any length.
DECODERS = {
    **{strategy.value: RequestDecoder({strategy}, simd_min_bytes=0) for strategy in Strategy},
    "all": RequestDecoder(STRATEGIES, simd_min_bytes=0),
}
MALFORMED = "malformed JSON in request body: "
DUPLICATE = "twice in one JSON object"
COUNTS = [
    DEFAULT_COUNTS,
    TensorCounts(1, 1, 2),
    TensorCounts(2, 1, 2, "m", 2, 1, (("INPUT0", "FP32"), ("A", "FP32"), ("in0", "INT64"))),
]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _tensor(tensor: Any) -> Any:
    data = tensor.data
    if isinstance(data, np.ndarray):
        data = (data.dtype.str, data.shape, data.tolist() if data.dtype.kind == "O" else data.tobytes())
    parameters = {k: (type(v).__name__, v) for k, v in tensor.parameters.items()}
    return tensor.name, tensor.datatype, tensor.shape, data, parameters


def _call(call: InferCall) -> Any:
    outputs = [(o.name, o.binary, {k: (type(v).__name__, v) for k, v in o.parameters.items()}) for o in call.outputs]
    parameters = {k: (type(v).__name__, v) for k, v in call.parameters.items()}
    return {"inputs": [_tensor(t) for t in call.inputs], "outputs": outputs, "id": call.id, "parameters": parameters}


def outcome(decoder: RequestDecoder, body: bytes, json_length: int | None, counts: TensorCounts) -> Any:
    """The call decoded (every tensor's dtype, shape and bytes; every parameter with its type), or the error's
    class, status and message; and the warnings given on the way."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: Any = _call(decoder.decode(body, json_length, LIMIT, counts))
        except V2Error as exc:
            result = (type(exc).__name__, status_of(exc), str(exc))
    # A ResourceWarning is the garbage collector's about another test's object, never the decoder's
    return result, sorted({str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)})


def _document_outcome(decoder: RequestDecoder, document: dict[str, Any], counts: TensorCounts) -> Any:
    try:
        return _call(decoder.decode_document(document, None, LIMIT, counts))
    except V2Error as exc:
        return type(exc).__name__, status_of(exc), str(exc)


def _allowed(ours: Any, reference: Any) -> bool:
    """The differences allowed, both refusals of the same class and status: the wording after the colon of a
    refusal of a text that is not JSON; and which of several mistakes is named first when one is a key given twice
    (``json_simd`` counts inputs and outputs and bounds the envelope on the parsed text, before it walks the text
    for repeated keys; orjson's path finds those first)."""
    (mine, my_warnings), (theirs, their_warnings) = ours, reference
    if my_warnings != their_warnings or not isinstance(mine, tuple) or not isinstance(theirs, tuple):
        return False
    if mine[:2] != theirs[:2]:
        return False
    if mine[2].startswith(MALFORMED) and theirs[2].startswith(MALFORMED):
        return True
    return DUPLICATE in mine[2] or DUPLICATE in theirs[2]


def assert_as_pydantic(body: bytes, json_length: int | None = None, counts: TensorCounts = DEFAULT_COUNTS) -> None:
    expected = outcome(REFERENCE, body, json_length, counts)
    for name, decoder in DECODERS.items():
        for time in range(3):  # header_plans: seen, planned, served from the plan
            got = outcome(decoder, body, json_length, counts)
            assert got == expected or _allowed(got, expected), (name, time)


# -- the corpus -------------------------------------------------------------------------------------------------


def _decodable(request: dict[str, Any]) -> tuple[bytes, int | None] | None:
    """A corpus request's body as the decoder gets it (decompressed) and its JSON header's length; None for a raw
    request or a header length the route refuses before decoding."""
    headers, body = request["headers"], request["body"]
    if headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    elif headers.get("content-encoding") not in (None, "identity"):
        return None
    length = headers.get("inference-header-content-length")
    if length is None:
        return body, None
    return (body, int(length)) if length.isdigit() and int(length) > 0 else None


CORPUS = [case for case in map(_decodable, requests()) if case is not None]


def test_the_corpus_has_json_and_binary_requests() -> None:
    assert sum(length is None for _, length in CORPUS) >= 30
    assert sum(length is not None for _, length in CORPUS) >= 10


@pytest.mark.parametrize("counts", COUNTS, ids=["default", "one input", "a model's"])
@pytest.mark.parametrize("case", CORPUS)
def test_corpus_bodies_decode_as_pydantic_decodes_them(case: tuple[bytes, int | None], counts: TensorCounts) -> None:
    assert_as_pydantic(*case, counts)


# -- generated envelopes ----------------------------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
GOOD_PARAMETERS = st.dictionaries(
    st.sampled_from(["p", "binary_data", "binary_data_size", "content_type", "s3_uri", "classification"])
    | st.text(max_size=4),
    st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    max_size=3,
)
PARAMETERS = GOOD_PARAMETERS | st.dictionaries(st.text(max_size=4), SCALARS, max_size=3) | VALUES
DIMENSIONS = st.lists(st.integers(min_value=-2, max_value=2**64 + 2) | st.booleans() | st.floats(0, 4), max_size=4)
SHAPES = st.lists(st.integers(0, 3), max_size=3) | DIMENSIONS | VALUES
DATATYPES = ["BOOL", "UINT8", "UINT64", "INT8", "INT64", "FP16", "FP32", "FP64", "BF16", "BYTES"]
INPUT = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["INPUT0", "A", "in0"]) | st.text(max_size=3) | VALUES,
        "shape": SHAPES,
        "datatype": st.sampled_from([*DATATYPES, "nonsense"]) | VALUES,
        "parameters": PARAMETERS,
        "data": st.lists(st.integers(-3, 300) | st.floats(-2, 2) | st.booleans(), max_size=9) | VALUES,
        "extra": VALUES,
    },
)
OUTPUT = st.fixed_dictionaries({}, optional={"name": st.text(max_size=3) | VALUES, "parameters": PARAMETERS})
DOCUMENT = st.fixed_dictionaries(
    {},
    optional={
        "id": st.text(max_size=5) | VALUES,
        "parameters": PARAMETERS,
        "inputs": st.lists(INPUT | VALUES, max_size=3) | VALUES,
        "outputs": st.none() | st.lists(OUTPUT | VALUES, max_size=3) | VALUES,
        "model_name": VALUES,
    },
)


@SETTINGS
@given(DOCUMENT, st.sampled_from(COUNTS))
def test_generated_envelopes_decode_as_pydantic_decodes_them(document: dict[str, Any], counts: TensorCounts) -> None:
    assert_as_pydantic(json.dumps(document).encode(), None, counts)
    expected = _document_outcome(REFERENCE, document, counts)
    for decoder in DECODERS.values():  # a document parsed by its transport (a batch line, SageMaker)
        assert _document_outcome(decoder, document, counts) == expected


@SETTINGS
@given(DOCUMENT, st.binary(max_size=24), st.sampled_from(COUNTS))
def test_generated_binary_headers_decode_as_pydantic_decodes_them(
    document: dict[str, Any], data: bytes, counts: TensorCounts
) -> None:
    header = json.dumps(document).encode()
    assert_as_pydantic(header + data, len(header), counts)


# -- generated numeric data -------------------------------------------------------------------------------------

EXTREMES = [0, 1, -1, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 255, 256, -129, 65536]


def _values(datatype: str) -> st.SearchStrategy[Any]:
    if datatype == "BYTES":
        return st.text(max_size=4)
    if datatype == "BOOL":
        return st.booleans()
    if datatype.startswith(("FP", "BF")):
        width = {"FP16": 16, "FP32": 32}.get(datatype, 64)
        return st.floats(width=width, allow_nan=False, allow_infinity=False) | st.sampled_from([*EXTREMES, -0.0])
    info = np.iinfo(np.dtype(datatype.lower()))
    return st.integers(int(info.min), int(info.max)) | st.sampled_from([int(info.min), int(info.max)])


@st.composite
def well_formed(draw: st.DrawFn) -> tuple[str, list[int], str]:
    """A well-formed input: its datatype, shape, and data text (flat or nested, numbers spelled several ways)."""
    datatype = draw(st.sampled_from(DATATYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=4))
    flat = draw(st.lists(_values(datatype), min_size=math.prod(shape), max_size=math.prod(shape)))
    depth = draw(st.integers(0, len(shape)))
    return datatype, shape, render(nest(flat, shape[:depth]) if depth else flat, draw(st.integers(0, 3)))


ODD = st.recursive(
    st.integers(-300, 300)
    | st.floats(-1e6, 1e6)
    | st.none()
    | st.booleans()
    | st.sampled_from(["x", "[", "", {"a": 1}, 1e300, 2**64, -(2**63) - 1, *EXTREMES]),
    lambda children: st.lists(children, max_size=4),
    max_leaves=16,
)


@st.composite
def odd(draw: st.DrawFn) -> tuple[str, list[int], str]:
    """Data that is not what its datatype and shape say: null, booleans, strings, objects, ragged nesting, numbers
    out of range."""
    data = draw(st.lists(ODD, max_size=6))
    return draw(st.sampled_from(DATATYPES)), draw(st.lists(st.integers(0, 4), max_size=3)), render(data, 0)


@SETTINGS
@given(st.lists(well_formed() | odd(), min_size=1, max_size=3), st.sampled_from(COUNTS))
def test_generated_data_decodes_as_pydantic_decodes_it(inputs: list[Any], counts: TensorCounts) -> None:
    assert_as_pydantic(infer_body(inputs), None, counts)


@SETTINGS
@given(st.binary(max_size=40), st.integers(0, 120), st.integers(0, 3))
def test_corrupted_texts_decode_as_pydantic_decodes_them(junk: bytes, at: int, cut: int) -> None:
    text = infer_body([("FP32", [2, 2], "[[1.5,2],[3,4e3]]"), ("INT64", [2], f"[{2**63 - 1},{-(2**63)}]")])
    assert_as_pydantic(text[:at] + junk + text[at + cut :])


@pytest.mark.parametrize(
    "text",
    [
        b'\xef\xbb\xbf{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]}',
        b'{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1],"data":[2]}]}',
        b'{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"inputs":[]}',
        b'{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,[2]],"x\\u0000":1}]}',
        b'{"id":"\\u005b","inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,[2]]}]}',
        b'{"id":"[","inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[[1],[2]]}]}',
        b'{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2],"parameters":{"binary_data_size":8}}]}',
        b'{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2]}],"extra":'
        + b"[" * 900
        + b"]" * 900
        + b"}",
        b'{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2]}],"x":' + b"[" * 1100 + b"]" * 1100 + b"}",
        b'{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[123456789012345678901234567890]}]}',
        b'{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2]}]',
        b'{"inputs":[{"name":"a","shape":[20001],"datatype":"FP32","data":[' + b"0.5," * 20000 + b"null]}]}",
    ],
    ids=range(12),
)
def test_texts_two_parsers_could_read_differently_decode_as_pydantic_decodes_them(text: bytes) -> None:
    """A byte order mark, repeated keys, NUL in a key, brackets in strings, deep nesting, big numbers, truncation,
    null as NaN in a large body."""
    assert_as_pydantic(text)


# -- at the envelope's bounds -----------------------------------------------------------------------------------

_AT = {"name": "a", "shape": [2], "datatype": "FP32", "data": [1, 2]}


def _request(**changes: Any) -> dict[str, Any]:
    """A request of one input (``input`` changes it) and one output, ``changes`` applied."""
    item = {**_AT, **changes.pop("input", {})}
    return {"id": "r", "inputs": [item], "outputs": [{"name": "o", **changes.pop("output", {})}], **changes}


def _many(count: int, value: Any = 1, width: int = 1) -> dict[str, Any]:
    return {f"p{i:0{width}}": value for i in range(count)}


EDGES = {
    "id at the bound": _request(id="i" * MAX_NAME_CHARS),
    "id past it": _request(id="i" * (MAX_NAME_CHARS + 1)),
    "name past it": _request(input={"name": "n" * (MAX_NAME_CHARS + 1)}),
    "datatype past it": _request(input={"datatype": "F" * (MAX_NAME_CHARS + 1)}),
    "output name past it": _request(output={"name": "o" * (MAX_NAME_CHARS + 1)}),
    "dimensions at the bound": _request(input={"shape": [1] * MAX_DIMS, "data": [0]}),
    "dimensions past it": _request(input={"shape": [1] * (MAX_DIMS + 1), "data": [0]}),
    "parameters at the bound": _request(parameters=_many(MAX_PARAMETERS)),
    "parameters past it": _request(parameters=_many(MAX_PARAMETERS + 1)),
    "input parameters past it": _request(input={"parameters": _many(MAX_TENSOR_PARAMETERS + 1)}),
    "output parameters past it": _request(output={"parameters": _many(MAX_TENSOR_PARAMETERS + 1)}),
    "a parameter name past it": _request(parameters={"p" * (MAX_NAME_CHARS + 1): 1}),
    "an input parameter name past it": _request(input={"parameters": {"p" * (MAX_NAME_CHARS + 1): 1}}),
    "members past it": _request(input={f"x{i}": 1 for i in range(MAX_MEMBERS + 1)}),
    "a request member of its own": _request(model_name="m"),
    "an output's shape past it": _request(output={"shape": [1] * (MAX_DIMS + 1)}),
    "nested data holding an object": _request(input={"data": [[1], {"a": 1}]}),
    "data an object": _request(input={"data": {"a": 1}}),
    "braces and colons in strings": _request(id="{:}", input={"parameters": {"{": "a:b"}}),
    "a parameter object as a value": _request(parameters={"p": {"q": 1}}),
}
#: Members given twice in the requests above: the request's id, an input's name and datatype, an output's name.
REPEATED = [b'"id":"r"', b'"name":"a"', b'"datatype":"FP32"', b'"name":"o"']


@pytest.mark.parametrize("counts", COUNTS, ids=["default", "one input", "a model's"])
@pytest.mark.parametrize("document", list(EDGES.values()), ids=list(EDGES))
def test_requests_at_the_envelopes_bounds_decode_as_pydantic_decodes_them(
    document: dict[str, Any], counts: TensorCounts
) -> None:
    """Each bound of ``bounds.py`` at and past its value, members the protocol does not name, and objects where
    numbers are expected: the common request's one walk (``plain_request.py``) leaves each to the steps that judge
    it; with a key given twice, too."""
    text = orjson.dumps(document)
    assert_as_pydantic(text, None, counts)
    for member in REPEATED:
        if member in text:
            assert_as_pydantic(text.replace(member, member + b"," + member, 1), None, counts)


def test_the_one_walk_takes_the_common_request_and_leaves_the_others() -> None:
    """Without this, the test above could pass with the walk never taken."""
    text = orjson.dumps(_request(parameters=_many(3)))
    assert plain_request(text, orjson.loads(text), DEFAULT_COUNTS) is not None
    for name in ("id past it", "dimensions past it", "parameters past it", "members past it", "data an object"):
        text = orjson.dumps(EDGES[name])
        assert plain_request(text, orjson.loads(text), DEFAULT_COUNTS) is None, name
    repeated = orjson.dumps(_request()).replace(b'"id":"r"', b'"id":"r","id":"r"')
    assert plain_request(repeated, orjson.loads(repeated), DEFAULT_COUNTS) is None


# -- generated binary requests ----------------------------------------------------------------------------------

TWO = {
    "inputs": [
        {"name": "A", "shape": [1, 2], "datatype": "FP32", "parameters": {"binary_data_size": 8}},
        {"name": "B", "shape": [2], "datatype": "INT64", "parameters": {"binary_data_size": 16, "note": "x"}},
    ],
    "outputs": [{"name": "OUT", "parameters": {"binary_data": True, "classification": 2}}],
    "parameters": {"binary_data_output": True},
}
IDS = st.none() | st.text(max_size=12) | st.sampled_from(['a"b', "a\\b", "\x01", "é", "\u2028", "\x7f", "id"])
EXTRA_KEYS = st.lists(st.sampled_from(['"id":"z"', '"\\u0069d":"z"', '"parameters":{"p":1}', '"x":[1,{"id":2}]']))


@SETTINGS
@given(IDS, EXTRA_KEYS, st.sampled_from([b"\0" * 24, b"\0" * 23, b"\x01" * 24, b"\0" * 25]), st.booleans())
def test_binary_requests_with_any_leading_id_decode_as_pydantic_decodes_them(
    request_id: str | None, extra: list[str], data: bytes, spaced: bool
) -> None:
    """Headers written by hand around the leading id ``header_plans`` keeps plans by: odd ids (quotes, escapes,
    control and separator characters), later keys that are ids too or hold "id" deeper down, spaces."""
    members = [f'"id":{" " if spaced else ""}{orjson.dumps(request_id).decode()}'] if request_id is not None else []
    header = ("{" + ",".join([*members, orjson.dumps(TWO)[1:-1].decode(), *extra]) + "}").encode()
    assert_as_pydantic(header + data, len(header))


def test_what_follows_a_kept_id_is_no_header_of_its_own() -> None:
    rest = b"," + orjson.dumps(TWO)[1:]
    for request_id in ("a", "b", "c"):
        head = orjson.dumps({"id": request_id, **TWO})
        assert_as_pydantic(head + b"\0" * 24, len(head))
    assert_as_pydantic(rest + b"\0" * 24, len(rest))


# -- the strategies are used, and their state stays bounded ----------------------------------------------------


def test_each_strategy_takes_the_requests_it_is_for() -> None:
    """Without these, the test above would compare the reference with itself."""
    image = infer_body([("FP32", [2, 3], "[[1,2,3],[4,5,6]]")])
    head = orjson.dumps({"id": "p", **TWO})
    plans = RequestDecoder({Strategy.HEADER_PLANS})
    for _ in range(2):
        plans.decode(head + b"\0" * 24, len(head), LIMIT)
    assert [plan for plan in plans.plans.plans.values() if plan is not None]
    simd = RequestDecoder({Strategy.JSON_SIMD}, simd_min_bytes=0)
    assert type(simd.parse(image)["inputs"][0]["data"]).__name__ == "JsonTensor"
    assert DECODER.strategies == STRATEGIES
    decoded = [
        body
        for body, length in CORPUS
        if length is None and not isinstance(outcome(REFERENCE, body, None, DEFAULT_COUNTS)[0], tuple)
    ]
    assert decoded and all(plain_envelope(orjson.loads(body)) is not None for body in decoded)


def test_numbered_requests_share_one_plan_and_keep_their_own_ids() -> None:
    """PyTriton numbers its requests ("id": "0", "1", ...) and perf_analyzer sends "id": "": one plan for all."""
    decoder = RequestDecoder({Strategy.HEADER_PLANS})
    for request_id in ["", "0", "1", "2", "é-7", "3"]:
        head = orjson.dumps({"id": request_id, **TWO})
        assert decoder.decode(head + b"\0" * 24, len(head), LIMIT).id == request_id
    assert decoder.plans is not None and len([plan for plan in decoder.plans.plans.values() if plan]) == 1


def test_plans_stay_bounded_and_each_call_gets_its_own_mappings() -> None:
    decoder = RequestDecoder({Strategy.HEADER_PLANS})
    for index in range(3 * MAX_PLANS):
        head = orjson.dumps({**TWO, "parameters": {"n": index}})
        for _ in range(2):
            decoder.decode(head + b"\0" * 24, len(head), LIMIT)
    plans = decoder.plans
    assert plans is not None and len(plans.plans) <= MAX_PLANS and len(plans.seen) <= 4 * MAX_PLANS
    head = orjson.dumps(TWO)
    first = decoder.decode(head + b"\0" * 24, len(head), LIMIT)
    first.parameters["changed"] = True
    first.inputs[1].parameters["changed"] = True
    first.outputs[0].parameters["changed"] = True
    second = decoder.decode(head + b"\0" * 24, len(head), LIMIT)
    assert second.parameters == {"binary_data_output": True}
    assert second.inputs[1].parameters == {"note": "x"} and second.outputs[0].parameters == {"classification": 2}


def test_headers_that_fail_keep_no_plan_and_leave_the_kept_ones_serving() -> None:
    decoder = RequestDecoder({Strategy.HEADER_PLANS})
    good = orjson.dumps(TWO)
    for _ in range(2):
        decoder.decode(good + b"\0" * 24, len(good), LIMIT)
    bad = [
        b'{"inputs":[{"name":"A","shape":[-1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}',
        b'{"inputs":[{"name":"A","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}',
        orjson.dumps({"inputs": TWO["inputs"] * 2}),
        b"\xff" * 40,
    ]
    for header in bad:
        for _ in range(3):
            with pytest.raises(V2Error):
                decoder.decode(header + b"\0" * 4, len(header), LIMIT)
    with pytest.raises(V2Error, match="the request names 2 inputs"):  # a kept plan, held to another model's counts
        decoder.decode(good + b"\0" * 24, len(good), LIMIT, TensorCounts(1, 1, 1))
    assert decoder.plans is not None and [plan for plan in decoder.plans.plans.values() if plan] == [
        decoder.plans.plans[(good, True, LIMIT)]
    ]
    assert decoder.decode(good + b"\1" * 24, len(good), LIMIT).inputs[1].data.tolist() == [0x0101010101010101] * 2
