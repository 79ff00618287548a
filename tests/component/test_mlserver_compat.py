"""MLServer compatibility, both ways, with MLServer 1.7 in its own venv (tests/support/mlserver_env.py):
requests made by our helpers validate as MLServer's pydantic ``InferenceRequest`` and decode with MLServer's own
codecs to the same values; requests built by MLServer's codecs are answered correctly by our real server."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest

from handler.codecs import decode_response, encode_request
from tests.conftest import LiveServer
from tests.support.content_type_models import content_server  # noqa: F401  (fixture)
from tests.support.mlserver_env import run_mlserver

VALIDATE = """
import json, sys
import numpy as np
from mlserver.types import InferenceRequest
from mlserver.codecs import PandasCodec, NumpyRequestCodec, StringRequestCodec, Base64Codec, DatetimeCodec, NumpyCodec
from mlserver.codecs.utils import decode_inference_request

out = []
for body in json.load(sys.stdin):
    request = InferenceRequest(**body)  # pydantic validation
    decoded = decode_inference_request(request)
    if hasattr(decoded, "to_dict"):
        decoded = {k: [None if isinstance(v, float) and v != v else str(v) if not isinstance(v, (int, float))
                       else v for v in col] for k, col in decoded.to_dict(orient="list").items()}
    elif isinstance(decoded, np.ndarray):
        decoded = decoded.tolist()
    elif isinstance(decoded, list):
        decoded = [x.decode() if isinstance(x, bytes) else str(x) for x in decoded]
    else:
        decoded = {i.name: [x.decode("latin-1") if isinstance(x, bytes) else str(x)
                            for x in (i.parameters._decoded_payload if i.parameters and
                            hasattr(i.parameters, "_decoded_payload") else i.data.root)]
                   for i in decoded.inputs}
    out.append(decoded)
print(json.dumps(out))
"""

BUILD = """
import datetime, json, sys
import numpy as np, pandas as pd
from mlserver.types import InferenceRequest
from mlserver.codecs import PandasCodec, NumpyRequestCodec, StringRequestCodec, Base64Codec, DatetimeCodec, NumpyCodec
from mlserver.codecs.string import StringCodec

frame = pd.DataFrame({"First Name": ["Joanne", "Michaël"], "Age": np.array([34, 22], dtype=np.int32)})
mixed = pd.DataFrame({
    "i32": np.array([-1, 0], dtype=np.int32), "f64": [1.5, np.nan], "flag": [True, False],
    "text": ["a", "日本"], "u8": np.array([0, 255], dtype=np.uint8),
})
requests = {
    "pd": PandasCodec.encode_request(frame),
    "pd_mixed": PandasCodec.encode_request(mixed),
    "np": NumpyRequestCodec.encode_request(np.array([1.5, np.nan, 3.0], dtype=np.float32)),
    "np_2d": InferenceRequest(inputs=[NumpyCodec.encode_input("INPUT0", np.arange(1, 7, dtype="f4").reshape(2, 3))]),
    "str": StringRequestCodec.encode_request(["bar", "bär2"], use_bytes=False),
    "str_bytes": InferenceRequest(inputs=[StringCodec.encode_input("INPUT0", ["x", "ÿ"])]),
    "base64": InferenceRequest(inputs=[Base64Codec.encode_input("INPUT0", [b"Python is fun"], use_bytes=False)]),
    "datetime": InferenceRequest(inputs=[DatetimeCodec.encode_input(
        "INPUT0", [datetime.datetime(2022, 1, 11, 11, 0, 0)], use_bytes=False)]),
}
print(json.dumps({name: json.loads(r.model_dump_json(exclude_none=True)) for name, r in requests.items()}))
"""


@pytest.fixture(scope="module")
def http(content_server: LiveServer) -> Iterator[httpx.Client]:  # noqa: F811
    with httpx.Client(base_url=f"http://{content_server.url}", timeout=30) as client:
        yield client


def test_our_requests_are_valid_mlserver_requests() -> None:
    """Validated by MLServer's pydantic types and decoded by MLServer's codecs to the values we encoded."""
    bodies = [
        encode_request(pd.DataFrame({"First Name": ["Joanne", "Michaël"], "Age": [34, 22], "x": [0.5, np.nan]})),
        encode_request(np.array([[1, 2], [3, 4]], dtype=np.int32)),
        encode_request(["bar", "bär2"]),
        encode_request({"b": [b"Python is fun"], "d": [datetime(2022, 1, 11, 11)]}),
    ]
    frame, array, strings, inputs = run_mlserver(VALIDATE, bodies)
    assert frame == {"First Name": ["Joanne", "Michaël"], "Age": [34, 22], "x": [0.5, None]}
    assert array == [[1, 2], [3, 4]]
    assert strings == ["bar", "bär2"]
    assert inputs == {"b": ["Python is fun"], "d": ["2022-01-11 11:00:00"]}


@pytest.fixture(scope="module")
def mlserver_requests() -> dict[str, Any]:
    return run_mlserver(BUILD)


def post(http: httpx.Client, model: str, body: dict[str, Any]) -> Any:
    response = http.post(f"/v2/models/{model}/infer", json=body)
    assert response.status_code == 200, response.text
    return decode_response(response)


def test_mlserver_pandas_requests_are_answered(http: httpx.Client, mlserver_requests: dict[str, Any]) -> None:
    frame = post(http, "people", mlserver_requests["pd"])
    assert frame["First Name_out"].tolist() == ["Joanne", "Michaël"] and frame["Age_out"].tolist() == [34, 22]
    mixed = mlserver_requests["pd_mixed"]
    mixed["inputs"].append({"name": "when", "datatype": "BYTES", "shape": [2, 1],
                            "data": ["2022-01-11T11:00:00", "2023-01-01T00:00:00+02:00"],
                            "parameters": {"content_type": "datetime"}})  # fmt: skip
    result = post(http, "mixed", mixed)
    assert result["i32_out"].tolist() == [-1, 0] and result["u8_out"].tolist() == [0, 255]
    assert result["f64_out"][0] == 1.5 and math.isnan(result["f64_out"][1])
    assert result["text_out"].tolist() == ["a", "日本"] and result["flag_out"].tolist() == [True, False]
    assert result["when_out"].tolist() == ["2022-01-11T11:00:00", "2023-01-01T00:00:00+02:00"]


def test_mlserver_numpy_string_base64_datetime_requests(http: httpx.Client, mlserver_requests: dict[str, Any]) -> None:
    out = post(http, "flat_fp32", mlserver_requests["np"])["OUTPUT0"]
    assert out[0] == 1.5 and math.isnan(out[1]) and out[2] == 3.0
    np.testing.assert_array_equal(post(http, "matrix", mlserver_requests["np_2d"])["OUTPUT0"], [[1, 2, 3], [4, 5, 6]])
    assert post(http, "flat_bytes", mlserver_requests["str"])["OUTPUT0"] == ["bar", "bär2"]
    assert post(http, "column_bytes", mlserver_requests["str_bytes"])["OUTPUT0"] == ["x", "ÿ"]
    assert post(http, "flat_bytes", mlserver_requests["base64"])["OUTPUT0"] == ["Python is fun"]
    assert post(http, "flat_int64", mlserver_requests["datetime"])["OUTPUT0"].tolist() == [1641898800]
