"""The plan kept per binary-extension header (``handler/codecs/request.py``) decodes exactly as the whole decoder.

A client that sends tensors of the same names, shapes and datatypes sends the same JSON header every time, but for
a leading request id; from the second time, its parsing and checks are kept, and only the tensors are cut from
each body. Here every binary request of the inference corpus, and the cases a kept header could get wrong (other
data, other lengths, several mistakes, a caller changing what it was given, other ids and ids that only JSON's
decoding can read), decode to the same call or fail with the same message as ``decode_infer_document`` on the
parsed header.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.errors import V2Error
from adapters.types import InferCall
from handler.codecs.request import (
    _leading_id,
    _plans,
    decode_infer_document,
    decode_infer_request,
    load_json_object,
)
from tests.support.infer_corpus import requests

LIMIT = 1 << 26


def _header_length(request: dict[str, Any]) -> int | None:
    """The JSON header's length of a binary-extension request (not raw, and with a header length that holds)."""
    value = request["headers"].get("inference-header-content-length", "")
    return int(value) if value.isdigit() and 0 < int(value) <= len(request["body"]) else None


BINARY = [r for r in requests() if _header_length(r) is not None]


def _whole(body: bytes, length: int) -> InferCall | str:
    """What the whole decoder (no plan) makes of a body, or its message."""
    try:
        return decode_infer_document(load_json_object(body[:length]), memoryview(body)[length:], LIMIT)
    except V2Error as error:
        return str(error)


def _planned(body: bytes, length: int) -> InferCall | str:
    try:
        return decode_infer_request(body, length, LIMIT)
    except V2Error as error:
        return str(error)


def _plain(call: InferCall | str) -> Any:
    if isinstance(call, str):
        return call
    tensors = [(t.name, t.datatype, t.shape, t.data.dtype.str, t.data.tolist(), t.parameters) for t in call.inputs]
    return tensors, call.outputs, call.id, call.parameters


def test_the_corpus_has_binary_requests() -> None:
    assert len(BINARY) >= 10


@pytest.mark.parametrize("request_", BINARY, ids=lambda r: r["path"].split("/")[3])
def test_corpus_requests_decode_as_the_whole_decoder_decodes_them(request_: dict[str, Any]) -> None:
    body, length = request_["body"], _header_length(request_)
    assert length is not None
    expected = _plain(_whole(body, length))
    for _ in range(3):  # seen, then planned, then from the kept plan
        assert _plain(_planned(body, length)) == expected
    leading, key = _leading_id(body[:length])
    assert ((key, leading is None, LIMIT) in _plans) == (not isinstance(expected, str))


def _request(header: dict[str, Any], data: bytes) -> tuple[bytes, int]:
    head = orjson.dumps(header)
    return head + data, len(head)


TWO = {
    "inputs": [
        {"name": "A", "shape": [1, 2], "datatype": "FP32", "parameters": {"binary_data_size": 8}},
        {"name": "B", "shape": [2], "datatype": "INT64", "parameters": {"binary_data_size": 16, "note": "x"}},
    ],
    "outputs": [{"name": "OUT", "parameters": {"binary_data": True, "classification": 2}}],
    "parameters": {"binary_data_output": True},
}


def test_the_same_header_with_other_data_gives_that_data() -> None:
    for seed in range(3):
        a, b = np.full(2, seed + 0.5, np.float32), np.arange(seed, seed + 2, dtype=np.int64)
        body, length = _request(TWO, a.tobytes() + b.tobytes())
        call = decode_infer_request(body, length, LIMIT)
        assert call.inputs[0].data.tolist() == [[seed + 0.5] * 2] and call.inputs[1].data.tolist() == b.tolist()
        assert _plain(call) == _plain(_whole(body, length))


@pytest.mark.parametrize("data", [b"", b"\0" * 23, b"\0" * 25, b"\0" * 100])
def test_a_kept_header_with_the_wrong_amount_of_data_fails_as_the_whole_decoder_does(data: bytes) -> None:
    for _ in range(2):  # the header's plan is kept
        decode_infer_request(*_request(TWO, b"\0" * 24), LIMIT)
    body, length = _request(TWO, data)
    message = _whole(body, length)
    assert isinstance(message, str) and _planned(body, length) == message


def test_the_first_mistake_is_reported_as_by_the_whole_decoder() -> None:
    """Input A's data is wrong (BOOL bytes over 1), input B's header is wrong (a negative dimension): the whole
    decoder reaches A's data first."""
    header = {
        "inputs": [
            {"name": "A", "shape": [2], "datatype": "BOOL", "parameters": {"binary_data_size": 2}},
            {"name": "B", "shape": [-1], "datatype": "INT8", "parameters": {"binary_data_size": 1}},
        ]
    }
    body, length = _request(header, b"\x07\x01\x00")
    assert isinstance(_whole(body, length), str)
    assert _planned(body, length) == _planned(body, length) == _whole(body, length)


def test_each_call_gets_its_own_mappings() -> None:
    body, length = _request(TWO, b"\0" * 24)
    decode_infer_request(body, length, LIMIT)  # seen: the next ones come from the plan
    first = decode_infer_request(body, length, LIMIT)
    first.parameters["changed"] = True
    first.inputs[1].parameters["changed"] = True
    first.outputs[0].parameters["changed"] = True
    second = decode_infer_request(body, length, LIMIT)
    assert second.parameters == {"binary_data_output": True}
    assert second.inputs[1].parameters == {"note": "x"} and second.outputs[0].parameters == {"classification": 2}


def test_a_header_with_json_data_is_decoded_whole() -> None:
    header = {
        "inputs": [
            {"name": "A", "shape": [2], "datatype": "INT32", "data": [1, 2]},
            {"name": "B", "shape": [1], "datatype": "INT32", "parameters": {"binary_data_size": 4}},
        ]
    }
    body, length = _request(header, np.int32(9).tobytes())
    call = decode_infer_request(body, length, LIMIT)
    assert [t.data.tolist() for t in call.inputs] == [[1, 2], [9]] and _plain(call) == _plain(_whole(body, length))


def test_numbered_requests_share_one_plan_and_keep_their_own_ids() -> None:
    """PyTriton numbers its requests ("id": "0", "1", ...) and perf_analyzer sends "id": "": one plan each."""
    for request_id in ["", "0", "1", "2", "é-7", "3"]:
        body, length = _request({"id": request_id, **TWO}, b"\0" * 24)
        call = decode_infer_request(body, length, LIMIT)
        assert call.id == request_id and _plain(call) == _plain(_whole(body, length))
    assert len([key for key in _plans if key[0] == b"," + orjson.dumps(TWO)[1:]]) == 1  # what follows the id


def test_what_follows_a_kept_id_is_no_header_of_its_own() -> None:
    """A plan kept by what follows a leading id never serves a header that is only that (not JSON at all)."""
    rest = b"," + orjson.dumps(TWO)[1:]
    for request_id in ("a", "b", "c"):
        decode_infer_request(*_request({"id": request_id, **TWO}, b"\0" * 24), LIMIT)
    for _ in range(3):
        with pytest.raises(V2Error, match="malformed JSON"):
            decode_infer_request(rest + b"\0" * 24, len(rest), LIMIT)


@pytest.mark.parametrize(
    "header",
    [
        b'{"id":"a\\"b",' + orjson.dumps(TWO)[1:],  # an escaped quote in the id
        b'{"id":"a",' + orjson.dumps(TWO)[1:-1] + b',"id":"b"}',  # a second id, of which JSON takes the last
        b'{"id":"a",' + orjson.dumps(TWO)[1:-1] + b',"\\u0069d":"b"}',  # the same, escaped
        b'{"id":"a\x01",' + orjson.dumps(TWO)[1:],  # a control character: not JSON
    ],
    ids=["escaped quote", "second id", "escaped second id", "control character"],
)
def test_ids_that_plain_bytes_cannot_decide_go_to_the_whole_decoder(header: bytes) -> None:
    assert _leading_id(header) == (None, header)
    body = header + b"\0" * 24
    for _ in range(3):
        assert _plain(_planned(body, len(header))) == _plain(_whole(body, len(header)))


def test_a_header_seen_once_is_not_planned() -> None:
    body, length = _request({**TWO, "id": "once", "parameters": {"unique": 912}}, b"\0" * 24)
    decode_infer_request(body, length, LIMIT)
    assert not any(b"912" in key[0] for key in _plans)


_IDS = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(['a"b', "a\\b", "\x01", "é", "\u2028", "\x7f", "id"]))
_EXTRA_KEYS = st.lists(st.sampled_from(['"id":"z"', '"\\u0069d":"z"', '"parameters":{"p":1}', '"x":[1,{"id":2}]']))


@settings(max_examples=300, deadline=None)
@given(_IDS, _EXTRA_KEYS, st.sampled_from([b"\0" * 24, b"\0" * 23, b"\x01" * 24]), st.booleans())
def test_any_leading_id_and_any_other_keys_decode_as_the_whole_decoder(
    request_id: str | None, extra: list[str], data: bytes, spaced: bool
) -> None:
    """Headers written by hand around the leading id: odd ids (quotes, escapes, control and separator
    characters), later keys that are ids too (plain or escaped) or hold "id" deeper down, spaces after the colon;
    three times each (seen, planned, kept), always what the whole decoder makes of them."""
    body = orjson.dumps(TWO)[1:-1].decode()
    members = [f'"id":{" " if spaced else ""}{orjson.dumps(request_id).decode()}'] if request_id is not None else []
    header = ("{" + ",".join([*members, body, *extra]) + "}").encode()
    for _ in range(3):
        assert _plain(_planned(header + data, len(header))) == _plain(_whole(header + data, len(header)))
