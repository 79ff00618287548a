"""Client helpers and the codec registry: encode_request / decode_response without a server, lazy pandas,
user codecs through the register call and through an entry point."""

# covers: handler/codecs/content_types/base.py
# covers: handler/codecs/content_types/client.py
# covers: handler/codecs/content_types/registry.py
# covers: handler/codecs/response.py

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from adapters.errors import InvalidInput
from adapters.types import InferCall, InferResult, Tensor
from handler.codecs import decode_response, encode_request
from handler.codecs.content_types import (
    InputCodec,
    NumpyCodec,
    StringCodec,
    find_input_codec,
    register_input_codec,
    registry,
)
from handler.codecs.content_types.base import object_array
from handler.codecs.content_types.client import to_binary
from handler.codecs.response import encode_infer_response


def test_import_handler_http_does_not_import_pandas() -> None:
    """pandas is an optional extra: the Lambda entry point never imports it."""
    code = "import sys, handler.http; assert 'pandas' not in sys.modules, 'pandas was imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-2000:]


def test_numpy_codec_encodes_n_as_n_by_1_and_nan_as_null() -> None:
    """ "the Numpy codec will always explicitly encode [N] arrays as [N, 1]"; NaN is written as null."""
    entry = NumpyCodec.encode_input("foo", np.array([1.2, np.nan]))
    assert entry == {"name": "foo", "datatype": "FP64", "shape": [2, 1], "data": [1.2, None],
                     "parameters": {"content_type": "np"}}  # fmt: skip
    back = NumpyCodec.decode_input(entry)
    assert back.shape == (2, 1) and np.isnan(back[1, 0])


def test_encode_request_picks_codecs_by_type() -> None:
    request = encode_request({"a": np.zeros((2, 2), np.int8), "b": ["x"], "c": [b"\x00"], "d": [datetime(2022, 1, 1)]})
    assert [(i["name"], i["datatype"], i["parameters"]["content_type"]) for i in request["inputs"]] == [
        ("a", "INT8", "np"),
        ("b", "BYTES", "str"),
        ("c", "BYTES", "base64"),
        ("d", "BYTES", "datetime"),
    ]
    assert "parameters" not in request
    assert encode_request(["a"], content_type="datetime")["inputs"][0]["parameters"] == {"content_type": "datetime"}


def test_encode_request_errors() -> None:
    with pytest.raises(ValueError, match="unknown content type 'yaml'; the choices are base64, datetime, np, pd, str"):
        encode_request(np.zeros(1), content_type="yaml")
    with pytest.raises(TypeError, match="input 'input-1': no codec encodes a object"):
        encode_request(object())
    with pytest.raises(InvalidInput, match="not UTF-8 text and JSON cannot carry it"):
        encode_request(np.array([b"\xff"], dtype=object))


def test_decode_response_reads_binary_answers() -> None:
    outputs = (
        Tensor("p", "FP32", (2,), np.array([0.5, np.nan], np.float32), {"content_type": "np"}),
        Tensor("s", "BYTES", (1,), object_array([b"caf\xc3\xa9"]), {"content_type": "str"}),
    )
    body, length = encode_infer_response(
        InferResult("m", "1", outputs, "1"), InferCall((), (), None, {"binary_data_output": True})
    )
    decoded = decode_response(body, length)
    assert decoded["s"] == ["café"] and decoded["p"][0] == 0.5 and np.isnan(decoded["p"][1])


def test_binary_request_has_the_extension_headers() -> None:
    body, headers = encode_request(["é"], binary=True)
    length = int(headers["Inference-Header-Content-Length"])
    assert body[length:] == b"\x02\x00\x00\x00\xc3\xa9"
    assert headers["Content-Type"] == "application/octet-stream"
    assert to_binary(encode_request(["é"]))[0] == body


def test_pd_round_trip_through_the_codec() -> None:
    import pandas  # the dev extra has it; the product never needs it

    frame = pandas.DataFrame(
        {"x": [1.5, np.nan], "name": ["a", "日本"], "t": [datetime(2020, 1, 1), datetime(2021, 1, 1)]}
    )
    request = encode_request(frame)
    assert request["parameters"] == {"content_type": "pd"}
    back = decode_response({"parameters": {"content_type": "pd"}, "outputs": request["inputs"]})
    assert back["name"].tolist() == ["a", "日本"] and np.isnan(back["x"][1]) and back["t"][1] == datetime(2021, 1, 1)


class Shout(InputCodec):
    """A user's codec: text in, upper-case text to the model."""

    ContentType = "shout"
    Datatypes: ClassVar = frozenset({"BYTES"})

    @classmethod
    def encode_array(cls, payload: Any) -> np.ndarray:
        return StringCodec.encode_array(payload)

    @classmethod
    def decode_array(cls, array: np.ndarray) -> list[str]:
        return [text.upper() for text in StringCodec.decode_array(array)]


def test_register_input_codec_adds_a_content_type() -> None:
    register_input_codec(Shout)
    try:
        assert find_input_codec("shout") is Shout
        assert registry.input_content_types()[-1] == "shout"
        assert Shout.decode_input(encode_request(["hé"], content_type="shout")["inputs"][0]) == ["HÉ"]
    finally:
        registry._INPUT.pop("shout")


def test_entry_point_codecs_are_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package declares ``[project.entry-points."oip_serverless.codecs"]`` and its codec is found."""
    (tmp_path / "shout_codec.py").write_text(
        "from handler.codecs.content_types import InputCodec, StringCodec\n"
        "class Whisper(InputCodec):\n"
        "    ContentType = 'whisper'\n"
        "    @classmethod\n"
        "    def decode_array(cls, array):\n"
        "        return [t.lower() for t in StringCodec.decode_array(array)]\n"
    )
    dist = tmp_path / "shout_codec-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shout-codec\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[oip_serverless.codecs]\nwhisper = shout_codec:Whisper\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    try:
        codec = find_input_codec("whisper")
        assert codec is not None and codec.__name__ == "Whisper"
    finally:
        registry._INPUT.pop("whisper", None)
