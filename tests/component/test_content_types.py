"""Content types through a real uvicorn on 127.0.0.1 and real onnxruntime sessions: every content type for
every datatype it allows, JSON and binary, request and input level, mixed; the seed document's sentences quoted
(https://mlserver.readthedocs.io/en/latest/user-guide/content-type.html); every error a 400 naming the content
type, the tensor and the choices.
"""

# covers: handler/codecs/content_types/b64.py
# covers: handler/codecs/content_types/bridge.py
# covers: handler/codecs/content_types/dataframe.py
# covers: handler/codecs/content_types/dates.py
# covers: handler/codecs/content_types/ndarray.py
# covers: handler/codecs/content_types/single.py
# covers: handler/codecs/content_types/string.py

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest

from handler.codecs import decode_response, encode_request
from tests.support.content_type_models import content_server  # noqa: F401  (fixture)
from tests.support.mlserver_env import mlserver_python
from tests.support.samples import SAMPLES, TABLE_DATATYPES
from tests.support.servers import LiveServer


@pytest.fixture(scope="module")
def http(content_server: LiveServer) -> Iterator[httpx.Client]:  # noqa: F811
    with httpx.Client(base_url=f"http://{content_server.url}", timeout=30) as client:
        yield client


def infer(http: httpx.Client, model: str, request: Any, binary: bool = False) -> httpx.Response:
    """POST a request dict (JSON) or, with ``binary``, the same request through the binary extension."""
    if binary:
        from handler.codecs.content_types.client import to_binary

        body, headers = to_binary(request)
        return http.post(f"/v2/models/{model}/infer", content=body, headers=headers)
    return http.post(f"/v2/models/{model}/infer", json=request)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return decode_response(response)


def error(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"error"}
    return str(response.json()["error"])


def texts(values: Any) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(values, dtype=object).ravel()]


# -- np: every datatype, request and input level, JSON and binary, [N] and [N, 1] graphs ---------------------


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("level", ["request", "input"])
@pytest.mark.parametrize("graph", ["flat", "column"])
@pytest.mark.parametrize("datatype", TABLE_DATATYPES)
def test_np_round_trips_every_datatype(http: httpx.Client, datatype: str, graph: str, level: str, binary: bool) -> None:
    """ "By default, MLServer will always assume that an array with a single-dimensional shape, e.g. [N], is
    equivalent to [N, 1]" and "the Numpy codec will always explicitly encode [N] arrays as [N, 1]": the [N, 1]
    request reaches both a [N] and a [N, 1] graph."""
    values = SAMPLES[datatype][1].ravel()
    if datatype == "BYTES":
        values = np.array(values.tolist())
    request = encode_request(values) if level == "request" else encode_request({"INPUT0": values})
    assert request["inputs"][0]["shape"] == [6, 1]
    decoded = ok(infer(http, f"{graph}_{datatype.lower()}", request, binary))
    out = decoded["OUTPUT0"]
    if datatype == "BYTES":  # a BYTES output is tagged str, and decodes to a list of str
        assert out == values.tolist()
    else:
        assert out.shape == ((6,) if graph == "flat" else (6, 1))
        assert out.dtype == values.dtype
        np.testing.assert_array_equal(out.ravel(), values)


def test_np_output_and_response_content_types(http: httpx.Client) -> None:
    """ "output parameters.content_type says how outputs were encoded"; the response names the request's."""
    answer = infer(http, "flat_fp32", encode_request(np.array([1.0, 2.0], dtype=np.float32))).json()
    assert answer["parameters"] == {"content_type": "np"}
    assert answer["outputs"][0]["parameters"] == {"content_type": "np"}


def test_nan_is_null_both_ways(http: httpx.Client) -> None:
    """ "any null value within your tensor payload will be converted to NaN" (FP16, FP32, FP64; REST)."""
    for datatype in ("FP16", "FP32", "FP64"):
        request = {
            "inputs": [
                {
                    "name": "INPUT0",
                    "parameters": {"content_type": "np"},
                    "data": [1.5, None, 4.5],
                    "datatype": datatype,
                    "shape": [3],
                }
            ]
        }
        answer = infer(http, f"flat_{datatype.lower()}", request).json()
        assert answer["outputs"][0]["data"] == [1.5, None, 4.5]
        out = decode_response(answer)["OUTPUT0"]
        assert math.isnan(out[1]) and out[0] == 1.5


def test_seed_example_foo_2x2(http: httpx.Client) -> None:
    """The seed's np example: "data": [1, 2, 3, 4], "datatype": "INT32", "shape": [2, 2]."""
    request = {"inputs": [{"name": "INPUT0", "parameters": {"content_type": "np"}, "data": [1, 2, 3, 4],
                           "datatype": "INT32", "shape": [2, 2]}]}  # fmt: skip
    answer = infer(http, "column_int32", {**request, "inputs": [{**request["inputs"][0], "shape": [4, 1]}]})
    np.testing.assert_array_equal(ok(answer)["OUTPUT0"], [[1], [2], [3], [4]])


# -- str, base64, datetime: BYTES ---------------------------------------------------------------------------

WORDS = ["", "bar", "naïve café", "日本語", "emoji 🚀", "tab\tnewline\n"]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("level", ["request", "input"])
def test_str_round_trips_unicode(http: httpx.Client, level: str, binary: bool) -> None:
    """ "The str content type lets you encode / decode a V2 input into a UTF-8 Python string"; "the shape field
    represents the number of strings"."""
    request = encode_request(WORDS) if level == "request" else encode_request({"INPUT0": WORDS})
    assert request["inputs"][0]["shape"] == [len(WORDS), 1]
    decoded = ok(infer(http, "flat_bytes", request, binary))
    assert decoded["OUTPUT0"] == WORDS


def test_seed_str_example(http: httpx.Client) -> None:
    """The seed's request-level str payload: ["bar", "bar2"], shape [2], reaches the model's one input."""
    request = {"parameters": {"content_type": "str"},
               "inputs": [{"name": "foo", "data": ["bar", "bar2"], "datatype": "BYTES", "shape": [2]}]}  # fmt: skip
    answer = infer(http, "flat_bytes", request).json()
    assert answer["parameters"] == {"content_type": "str"}
    assert answer["outputs"][0] == {"name": "OUTPUT0", "datatype": "BYTES", "shape": [2], "data": ["bar", "bar2"],
                                    "parameters": {"content_type": "str"}}  # fmt: skip


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_base64_reaches_string_and_uint8_graphs(http: httpx.Client, binary: bool) -> None:
    """ "The data field should contain the base64-encoded binary strings": decoded to bytes before the model."""
    seed = {"inputs": [{"name": "INPUT0", "parameters": {"content_type": "base64"},
                        "data": ["UHl0aG9uIGlzIGZ1bg=="], "datatype": "BYTES", "shape": [1]}]}  # fmt: skip
    assert texts(ok(infer(http, "flat_bytes", seed, binary))["OUTPUT0"]) == ["Python is fun"]
    raw = bytes(range(256))
    decoded = ok(infer(http, "flat_uint8", encode_request({"INPUT0": [raw]}), binary))
    assert decoded["OUTPUT0"].dtype == np.uint8 and decoded["OUTPUT0"].tobytes() == raw


def test_base64_output_and_round_trip(http: httpx.Client) -> None:
    """An output asked for as base64 comes back base64 text and decodes to the bytes."""
    request = encode_request({"INPUT0": ["héllo".encode(), b"x"]})
    request["outputs"] = [{"name": "OUTPUT0", "parameters": {"content_type": "base64"}}]
    answer = infer(http, "flat_bytes", request).json()
    assert answer["outputs"][0]["data"] == ["aMOpbGxv", "eA=="]
    assert decode_response(answer)["OUTPUT0"] == ["héllo".encode(), b"x"]


DATES = [
    datetime(2022, 1, 11, 11, 0, 0),
    datetime(1999, 12, 31, 23, 59, 59, 250000),
    datetime(2022, 1, 11, 11, 0, tzinfo=timezone(timedelta(hours=2))),
    datetime(2024, 2, 29, tzinfo=UTC),
]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_datetime_as_iso_text(http: httpx.Client, binary: bool) -> None:
    """ "The data field should contain the dates serialised following the ISO 8601 standard": naive and aware."""
    request = encode_request({"INPUT0": DATES})
    request["outputs"] = [{"name": "OUTPUT0", "parameters": {"content_type": "datetime"}}]
    assert request["inputs"][0]["data"][0] == "2022-01-11T11:00:00"
    assert ok(infer(http, "flat_bytes", request, binary))["OUTPUT0"] == DATES


def test_datetime_to_int64_epoch_seconds(http: httpx.Client) -> None:
    """A graph that wants integers gets Unix epoch seconds (naive = UTC); a datetime output is UTC ISO text."""
    request = encode_request({"INPUT0": DATES})
    plain = ok(infer(http, "flat_int64", request))["OUTPUT0"]
    assert plain.tolist() == [1641898800, 946684799, 1641891600, 1709164800]
    request["outputs"] = [{"name": "OUTPUT0", "parameters": {"content_type": "datetime"}}]
    back = ok(infer(http, "flat_int64", request))["OUTPUT0"]
    assert back[0] == datetime(2022, 1, 11, 11, tzinfo=UTC) and back[2] == DATES[2]


def test_datetime_to_fp64_keeps_fraction(http: httpx.Client) -> None:
    out = ok(infer(http, "flat_fp64", encode_request({"INPUT0": DATES[1:2]})))["OUTPUT0"]
    assert out.tolist() == [946684799.25]


@pytest.mark.parametrize("content_type", ["np", "str", "base64", "datetime"])
def test_empty_inputs(http: httpx.Client, content_type: str) -> None:
    request = {"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [0], "data": [],
                           "parameters": {"content_type": content_type}}]}  # fmt: skip
    answer = infer(http, "flat_bytes", request).json()
    assert answer["outputs"][0]["shape"] == [0] and answer["outputs"][0]["data"] == []


# -- pd ------------------------------------------------------------------------------------------------------


def test_seed_pd_example(http: httpx.Client) -> None:
    """ "The whole set of inputs should be decoded as a Pandas Dataframe" and "The First Name column should be
    decoded as a UTF-8 string": the seed's payload, verbatim, reaches the columns by name."""
    request = {
        "parameters": {"content_type": "pd"},
        "inputs": [
            {"name": "First Name", "datatype": "BYTES", "parameters": {"content_type": "str"}, "shape": [2],
             "data": ["Joanne", "Michael"]},
            {"name": "Age", "datatype": "INT32", "shape": [2], "data": [34, 22]},
        ],
    }  # fmt: skip
    answer = infer(http, "people", request).json()
    assert answer["parameters"] == {"content_type": "pd"}
    frame = decode_response(answer)
    assert isinstance(frame, pd.DataFrame)
    assert frame["First Name_out"].tolist() == ["Joanne", "Michael"] and frame["Age_out"].tolist() == [34, 22]


def mixed_frame(rows: int = 3) -> pd.DataFrame:
    return pd.DataFrame({
        "i32": np.arange(rows, dtype=np.int32) - 1,
        "f64": [1.5, np.nan, -2.25][:rows],
        "flag": [True, False, True][:rows],
        "text": ["Joanne", "Michaël", "日本"][:rows],
        "when": [datetime(2022, 1, 11, 11), datetime(2023, 5, 1, 8, 30), datetime(2000, 1, 1)][:rows],
        "u8": np.array([0, 128, 255][:rows], dtype=np.uint8),
    })  # fmt: skip


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_pd_mixed_column_types_round_trip(http: httpx.Client, binary: bool) -> None:
    """ "Each entry of the inputs list ... will represent a column of the DataFrame", with a content type per
    column stacked on pd ("The pd content type can be stacked with other content types")."""
    frame = mixed_frame()
    request = encode_request(frame)
    request["outputs"] = [{"name": "when_out", "parameters": {"content_type": "datetime"}}] + [
        {"name": f"{name}_out"} for name in frame.columns if name != "when"
    ]
    result = ok(infer(http, "mixed", request, binary))
    assert isinstance(result, pd.DataFrame)
    assert result["i32_out"].tolist() == [-1, 0, 1] and result["i32_out"].dtype == np.int32
    assert result["f64_out"][0] == 1.5 and math.isnan(result["f64_out"][1])
    assert result["flag_out"].tolist() == [True, False, True]
    assert texts(result["text_out"]) == ["Joanne", "Michaël", "日本"]
    assert result["u8_out"].tolist() == [0, 128, 255]
    assert [d.replace(tzinfo=None) for d in result["when_out"]] == frame["when"].tolist()


def test_pd_columns_stack_into_a_matrix_input(http: httpx.Client) -> None:
    """Columns that are not input names fill a one-input [N, C] model side by side, cast to its datatype."""
    frame = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan], "c": np.array([7, 8], dtype=np.int16)})
    out = ok(infer(http, "matrix", encode_request(frame)))  # a pd response: [N, 3] rows in one column
    matrix = np.stack(out["OUTPUT0"].tolist())
    np.testing.assert_array_equal(matrix, np.array([[1, 0.5, 7], [2, np.nan, 8]], dtype=np.float32))


def test_pd_empty_frame(http: httpx.Client) -> None:
    frame = mixed_frame().iloc[:0]
    request = encode_request(frame)
    assert request["inputs"][0]["shape"] == [0, 1]
    result = ok(infer(http, "mixed", request))
    assert len(result) == 0 and set(result.columns) == {f"{c}_out" for c in frame.columns}


def test_model_defaults_from_config_and_request_wins(http: httpx.Client) -> None:
    """ "content types passed explicitly as part of the request will always take precedence over the model's
    metadata": config.pbtxt makes the request pd and First Name str; a request's np is kept over the default."""
    request = {"inputs": [
        {"name": "First Name", "datatype": "BYTES", "shape": [2], "data": ["Joanne", "Michael"]},
        {"name": "Age", "datatype": "INT32", "shape": [2, 1], "data": [34, 22]},
    ]}  # fmt: skip
    answer = infer(http, "people_defaults", request).json()
    assert answer["parameters"] == {"content_type": "pd"}
    assert answer["outputs"][0]["parameters"] == {"content_type": "str"}
    request["parameters"] = {"content_type": "np"}
    assert "exactly one input" in error(infer(http, "people_defaults", request))
    request["inputs"][0]["parameters"] = {"content_type": "base64"}
    request["parameters"] = {"content_type": "pd"}
    assert "needs base64 text" in error(infer(http, "people_defaults", request))


def test_no_content_type_leaves_responses_as_they_were(http: httpx.Client) -> None:
    request = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]}]}
    answer = infer(http, "flat_fp32", request).json()
    assert "parameters" not in answer and "parameters" not in answer["outputs"][0]


# -- errors: 400 naming the content type, the tensor and the choices ----------------------------------------


def one(content_type: Any, datatype: str = "BYTES", data: list[Any] | None = None) -> dict[str, Any]:
    data = ["x"] if data is None else data
    return {"inputs": [{"name": "INPUT0", "datatype": datatype, "shape": [len(data)], "data": data,
                        "parameters": {"content_type": content_type}}]}  # fmt: skip


@pytest.mark.parametrize(
    ("model", "request_body", "expected"),
    [
        ("flat_bytes", one("yaml"), "input 'INPUT0': unknown content type 'yaml'; the input-level choices are np, str, base64, datetime"),  # noqa: E501
        ("flat_bytes", one(7), "input 'INPUT0': unknown content type 7"),
        ("flat_bytes", one("pd"), "input 'INPUT0': content type 'pd' applies to whole requests only; the input-level choices are np, str, base64, datetime"),  # noqa: E501
        ("flat_int32", one("str", "INT32", [1]), "input 'INPUT0': content type 'str' does not fit datatype INT32 (it needs BYTES); the choices for INT32 are np"),  # noqa: E501
        ("flat_fp32", one("base64", "FP32", [1.0]), "content type 'base64' does not fit datatype FP32"),
        ("flat_fp32", one("datetime", "FP32", [1.0]), "content type 'datetime' does not fit datatype FP32"),
        ("flat_bytes", one("base64", data=["not base64!"]), "input 'INPUT0': content type 'base64' needs base64 text"),
        ("flat_bytes", one("datetime", data=["yesterday"]), "input 'INPUT0': content type 'datetime' needs ISO 8601 text"),  # noqa: E501
        ("int8", one("datetime", data=["2022-01-11T11:00:00"]), "reaches a model as ISO 8601 text (BYTES) or Unix epoch seconds (INT64, FP64, FP32), but the model's input is INT8"),  # noqa: E501
        ("flat_bytes", {**one("str"), "parameters": {"content_type": "base64"}}, "request: content type 'base64' applies to single inputs only; the request-level choices are np, pd, str"),  # noqa: E501
        ("flat_bytes", {**one("str"), "parameters": {"content_type": "xml"}}, "request: unknown content type 'xml'; the request-level choices are np, pd, str"),  # noqa: E501
        ("flat_bytes", {**one("str"), "outputs": [{"name": "OUTPUT0", "parameters": {"content_type": "nope"}}]}, "output 'OUTPUT0': unknown content type 'nope'; the output-level choices are"),  # noqa: E501
        ("flat_fp32", {**one("np", "FP32", [1.0]), "outputs": [{"name": "OUTPUT0", "parameters": {"content_type": "str"}}]}, "output 'OUTPUT0': content type 'str' does not fit datatype FP32"),  # noqa: E501
        ("flat_fp32", {**one("np", "FP32", [1.0]), "outputs": [{"name": "OUTPUT0", "parameters": {"content_type": "pd"}}]}, "output 'OUTPUT0': content type 'pd' applies to whole requests only"),  # noqa: E501
    ],
)  # fmt: skip
def test_content_type_errors(http: httpx.Client, model: str, request_body: dict[str, Any], expected: str) -> None:
    assert expected in error(infer(http, model, request_body))


def test_request_level_single_input_codecs_take_one_input(http: httpx.Client) -> None:
    """ "When using the NumPy Array content type at the request-level, it will decode the entire request by
    considering only the first input element": a second input is refused, not silently dropped."""
    request = encode_request({"i32": np.array([1]), "f64": np.array([1.0])}, content_type="np")
    message = error(infer(http, "mixed", request))
    assert message == "content type 'np' at request level takes exactly one input, got 2; set it per input instead"


def test_pd_errors(http: httpx.Client) -> None:
    ragged = {"parameters": {"content_type": "pd"}, "inputs": [
        {"name": "First Name", "datatype": "BYTES", "shape": [1], "data": ["a"]},
        {"name": "Age", "datatype": "INT32", "shape": [2], "data": [1, 2]},
    ]}  # fmt: skip
    assert "content type 'pd': every input is a column" in error(infer(http, "people", ragged))
    unknown = encode_request(pd.DataFrame({"First Name": ["a"], "Height": [1.8]}))
    assert "content type 'pd': column(s) ['Height'] are not inputs of the model" in error(
        infer(http, "people", unknown)
    )
    text = encode_request(pd.DataFrame({"a": [1.0], "b": ["x"], "c": [2.0]}))
    assert "content type 'pd': column 'b' (object) cannot become the model's FP32 input" in error(
        infer(http, "matrix", text)
    )


# -- MLServer's own codecs at the other end: every content type, both directions -----------------------------

MLSERVER_CODECS = Path(__file__).resolve().parents[1] / "tool_scripts" / "mlserver_codecs.py"
STAMP = [datetime(2022, 1, 11, 11, 0, 0), datetime(1999, 12, 31, 23, 59, 59, 250000),
         datetime(2022, 1, 11, 11, 0, tzinfo=timezone(timedelta(hours=2)))]  # fmt: skip
BLOBS = [bytes(range(128)), "héllo ☃".encode(), b""]  # UTF-8: the identity model's ONNX string tensor takes it


def tagged(found: Any, kind: str) -> dict[str, Any]:
    """A value as tests/tool_scripts/mlserver_codecs.py tags it (flat numpy data, NaN as None, bytes as latin-1)."""
    if kind == "pd":
        columns = {str(n): (tagged(c.to_numpy(), "np") if pd.api.types.is_numeric_dtype(c) else tagged(c, "str"))
                   for n, c in found.items()}  # fmt: skip
        return {"pd": columns}
    if kind == "np":
        array = np.asarray(found)
        data = [None if isinstance(x, float) and math.isnan(x) else x for x in array.ravel().tolist()]
        return {"np": {"dtype": array.dtype.str, "shape": list(array.shape), "data": data}}
    items = list(found)
    if kind == "base64":
        return {"base64": [item.decode("latin-1") for item in items]}
    if kind == "datetime":
        return {"datetime": [item.isoformat() for item in items]}
    return {"str": [item.decode() if isinstance(item, bytes) else item for item in items]}


def _case(name: str, content_type: str, level: str, model: str, value: Any) -> dict[str, Any]:
    return {"name": name, "content_type": content_type, "level": level, "model": model, "value": value,
            "tagged": tagged(value, content_type)}  # fmt: skip


CODEC_CASES = [
    *[_case(f"np-{level}-{datatype}", "np", level, f"flat_{datatype.lower()}", SAMPLES[datatype][1].ravel())
      for datatype in TABLE_DATATYPES if datatype != "BYTES" for level in ("input", "request")],
    _case("str-input", "str", "input", "flat_bytes", WORDS),
    _case("str-request", "str", "request", "flat_bytes", WORDS),
    _case("base64-input", "base64", "input", "flat_bytes", BLOBS),
    _case("datetime-input", "datetime", "input", "flat_bytes", STAMP),
    _case("pd-request", "pd", "request", "people",
          pd.DataFrame({"First Name": ["Joanne", "Michaël"], "Age": np.array([34, 22], dtype=np.int32)})),
]  # fmt: skip


def _comparable(found: dict[str, Any]) -> Any:
    """A tagged value without what [N] versus [N, 1] changes ("[N] is equivalent to [N, 1]"), per column."""
    ((kind, body),) = found.items()
    if kind == "np":
        return {"np": {"dtype": body["dtype"], "data": body["data"]}}
    if kind == "pd":
        return {"pd": {name.removesuffix("_out"): _comparable(column) for name, column in body.items()}}
    return found


def _mlserver_job(**documents: dict[str, Any]) -> dict[str, Any]:
    cases = [{key: case[key] for key in ("name", "content_type", "level")} | {"value": case["tagged"]}
             for case in CODEC_CASES]  # fmt: skip
    done = subprocess.run([mlserver_python(), str(MLSERVER_CODECS)], input=json.dumps({"cases": cases, **documents}),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _ours(case: dict[str, Any]) -> dict[str, Any]:
    if case["level"] == "request":
        return encode_request(case["value"], content_type=case["content_type"])
    return encode_request({"INPUT0": case["value"]})


@pytest.fixture(scope="module")
def mlserver_codecs(http: httpx.Client) -> dict[str, dict[str, Any]]:
    """MLServer's requests and responses for every case, its reading of our requests (encode_request) and of our
    server's answers to its requests; the answers themselves."""
    first = _mlserver_job(requests={case["name"]: _ours(case) for case in CODEC_CASES})
    answers = {}
    for case in CODEC_CASES:
        request = first["encoded_requests"][case["name"]]
        if case["level"] == "input" and case["content_type"] in ("base64", "datetime"):
            request["outputs"] = [{"name": "OUTPUT0", "parameters": {"content_type": case["content_type"]}}]
        response = http.post(f"/v2/models/{case['model']}/infer", json=request)
        assert response.status_code == 200, (case["name"], response.text)
        answers[case["name"]] = response.json()
    second = _mlserver_job(responses=answers)
    return {**first, "decoded_responses": second["decoded_responses"], "answers": answers}


@pytest.mark.parametrize("case", CODEC_CASES, ids=[case["name"] for case in CODEC_CASES])
def test_mlservers_request_is_answered_as_mlserver_reads_it(
    mlserver_codecs: dict[str, dict[str, Any]], case: dict[str, Any]
) -> None:
    """MLServer's codec encodes the request, our server answers it, MLServer's codec reads the answer back to
    the values sent; the answer names the content type where MLServer looks for it."""
    answer = mlserver_codecs["answers"][case["name"]]
    named = answer.get("parameters", {}) if case["level"] == "request" else answer["outputs"][0].get("parameters", {})
    assert named.get("content_type") == case["content_type"], answer
    assert _comparable(mlserver_codecs["decoded_responses"][case["name"]]) == _comparable(case["tagged"])


@pytest.mark.parametrize("case", CODEC_CASES, ids=[case["name"] for case in CODEC_CASES])
def test_our_request_reads_in_mlserver_as_the_values_encoded(
    mlserver_codecs: dict[str, dict[str, Any]], case: dict[str, Any]
) -> None:
    assert _comparable(mlserver_codecs["decoded_requests"][case["name"]]) == _comparable(case["tagged"])


@pytest.mark.parametrize("case", CODEC_CASES, ids=[case["name"] for case in CODEC_CASES])
def test_mlservers_response_decodes_to_the_values_encoded(
    mlserver_codecs: dict[str, dict[str, Any]], case: dict[str, Any]
) -> None:
    decoded = decode_response(mlserver_codecs["encoded_responses"][case["name"]])
    if not isinstance(decoded, pd.DataFrame):
        (decoded,) = decoded.values()
    assert _comparable(tagged(decoded, case["content_type"])) == _comparable(case["tagged"])
