"""A name given twice in one JSON object is a 400 naming it, never "the last one wins": on the orjson path (small
bodies), the simdjson path (large ones), a binary-extension header and the other JSON routes; a real uvicorn
server on 127.0.0.1. Names made of ``{``, ``:``, quotes and escapes, in keys and strings, are no false alarm.
"""

# covers: handler/codecs/json_keys.py

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.errors import InvalidInput
from handler.codecs.json_keys import check_unique_keys
from handler.codecs.json_numeric import MIN_FAST_BYTES, load_infer_json
from handler.server import build_app
from tests.conftest import LiveServer, make_settings
from tests.support import onnx_models

LARGE = 10_000  # elements: a body well over MIN_FAST_BYTES, read by simdjson


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("duplicates")
    onnx_models.save(onnx_models.identity("FP32", [-1]), root, "identity")
    live = LiveServer(build_app(make_settings(root)))
    live.start()
    yield live
    live.stop()


def _input(count: int, *extra: str) -> str:
    data = ",".join(["0.5"] * count)
    return "{" + "".join(extra) + f'"name":"INPUT0","shape":[{count}],"datatype":"FP32","data":[{data}]' + "}"


def _post(server: LiveServer, body: str | bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"http://{server.url}/v2/models/identity/infer", content=body, headers=headers, timeout=30)


#: (body of `count` elements, the key given twice)
DUPLICATES = {
    "top level": (lambda n: '{"id":"a","inputs":[' + _input(n) + '],"id":"b"}', "id"),
    "an input": (lambda n: '{"inputs":[' + _input(n, '"datatype":"INT64",') + "]}", "datatype"),
    "request parameters": (lambda n: '{"parameters":{"p":1,"p":2},"inputs":[' + _input(n) + "]}", "p"),
    "an output": (lambda n: '{"inputs":[' + _input(n) + '],"outputs":[{"name":"OUTPUT0","name":"x"}]}', "name"),
    "input parameters": (lambda n: '{"inputs":[' + _input(n, '"parameters":{"q":{"r":1,"r":2}},') + "]}", "r"),
    "escaped the same": (lambda n: '{"inputs":[' + _input(n) + '],"i\\u0064":"a","id":"b"}', "id"),
}


@pytest.mark.parametrize("count", [2, LARGE], ids=["small body", "large body"])
@pytest.mark.parametrize("case", DUPLICATES.values(), ids=DUPLICATES.keys())
def test_a_duplicate_key_is_a_400_naming_it(server: LiveServer, case: tuple[Any, str], count: int) -> None:
    make, key = case
    body = make(count)
    assert (len(body) >= MIN_FAST_BYTES) == (count == LARGE)
    response = _post(server, body, {"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json() == {
        "error": f"request body gives the key '{key}' twice in one JSON object; names within an object must be unique"
    }


def test_a_duplicate_key_in_a_binary_extension_header_is_a_400(server: LiveServer) -> None:
    header = b'{"inputs":[{"name":"INPUT0","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8},' \
             b'"shape":[2]}]}'  # fmt: skip
    body = header + np.ones(2, np.float32).tobytes()
    response = _post(server, body, {"Inference-Header-Content-Length": str(len(header))})
    assert response.status_code == 400
    assert "the key 'shape' twice" in response.json()["error"]


def test_the_repository_index_body_is_checked_too(server: LiveServer) -> None:
    response = httpx.post(f"http://{server.url}/v2/repository/index", content=b'{"ready":false,"ready":true}')
    assert response.status_code == 400 and "the key 'ready' twice" in response.json()["error"]


@pytest.mark.parametrize("count", [2, LARGE], ids=["small body", "large body"])
def test_braces_colons_quotes_and_escapes_in_strings_are_no_duplicates(server: LiveServer, count: int) -> None:
    body = (
        '{"id":"a:{\\"id\\":1,\\"id\\":2}\\\\","parameters":{"k:{":"v\\\\\\":{","k:{\\"":"w"},"inputs":['
        + _input(count)
        + "]}"
    )
    assert orjson.loads(body)["id"] == 'a:{"id":1,"id":2}\\'
    response = _post(server, body)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == 'a:{"id":1,"id":2}\\'
    assert len(response.json()["outputs"][0]["data"]) == count


def test_the_large_body_path_leaves_a_duplicate_to_the_path_that_names_it() -> None:
    body = DUPLICATES["input parameters"][0](LARGE).encode()
    assert load_infer_json(body) is None
    assert load_infer_json(DUPLICATES["input parameters"][0](LARGE).replace('"r":2', '"s":2').encode()) is not None


# -- the check against the standard library's reading, on texts built to be tricky ---------------------------------


class Pairs(list):  # type: ignore[type-arg]
    """An object as its (key, value) pairs, duplicates kept."""


TRICKY = ':{}[]"\\aé/'
KEYS = st.sampled_from(["a", "data", "x:y", "{", '"', "\\", 'b\\"c', "é", "d\\\\"]) | st.text(TRICKY, max_size=3)
LEAVES = st.one_of(st.integers(-5, 5), st.text(TRICKY, max_size=6), st.booleans(), st.none())
TREES = st.recursive(
    LEAVES,
    lambda children: st.lists(children, max_size=4) | st.lists(st.tuples(KEYS, children), max_size=4).map(Pairs),
    max_leaves=25,
)


def _dump(node: Any, ascii_only: bool) -> str:
    if isinstance(node, Pairs):
        members = (f"{json.dumps(key, ensure_ascii=ascii_only)} : {_dump(value, ascii_only)}" for key, value in node)
        return "{" + ", ".join(members) + "}"
    if isinstance(node, list):
        return "[" + ",".join(_dump(item, ascii_only) for item in node) + "]"
    return json.dumps(node, ensure_ascii=ascii_only)


def _has_duplicate(text: str) -> bool:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in pairs}) != len(pairs):
            raise KeyError
        return dict(pairs)

    try:
        json.loads(text, object_pairs_hook=hook)
    except KeyError:
        return True
    return False


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(KEYS, TREES), max_size=5).map(Pairs), st.booleans(), st.booleans())
def test_the_check_agrees_with_the_standard_librarys_reading(root: Pairs, ascii_only: bool, large: bool) -> None:
    text = _dump(root, ascii_only)
    if large:  # past the size where numpy counts
        text = text[:-1] + (", " if len(root) else "") + '"pad" : "' + " " * 5000 + '"}'
    raw = text.encode()
    document = orjson.loads(raw)
    if _has_duplicate(text):
        with pytest.raises(InvalidInput, match="twice in one JSON object"):
            check_unique_keys(raw, document)
    else:
        check_unique_keys(raw, document)
        check_unique_keys(memoryview(b"xx" + raw)[2:], document)
