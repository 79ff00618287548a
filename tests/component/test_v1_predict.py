"""KServe V1 / TF Serving REST through a real uvicorn, with the request bodies of the TF Serving REST API page
(tensorflow_serving/g3doc/api_rest.md), and through the Lambda handler (the ``:predict`` colon included)."""

# covers: handler/codecs/tfserving.py

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from handler.cli.lambda_context import LocalLambdaContext
from handler.server import build_app
from scripts.lambda_events import SAM_EVENTS, fill
from tests.conftest import LiveServer, make_settings
from tests.support import platform_models

EVENTS = Path(__file__).resolve().parents[2] / "events"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = platform_models.build(tmp_path_factory.mktemp("tfserving"))
    server = LiveServer(build_app(make_settings(root)))
    server.start()
    yield f"http://{server.url}"
    server.stop()


def predict(url: str, path: str, document: Any) -> httpx.Response:
    return httpx.post(f"{url}{path}", content=json.dumps(document), headers={"Content-Type": "application/json"})


# "A predict call would look as follows:
#  $ curl -d '{"instances": [1.0,2.0,5.0]}' -X POST http://localhost:8501/v1/models/half_plus_three:predict
#  { "predictions": [3.5, 4.0, 5.5] }"
@pytest.mark.parametrize(
    "path", ["/v1/models/half_plus_three:predict", "/v1/models/half_plus_three/versions/1:predict"]
)
def test_the_api_pages_predict_example(url: str, path: str) -> None:
    response = predict(url, path, {"instances": [1.0, 2.0, 5.0]})
    assert (response.status_code, response.json()) == (200, {"predictions": [3.5, 4.0, 5.5]})


# "$ curl http://localhost:8501/v1/models/half_plus_three
#  { "model_version_status": [ { "version": "123", "state": "AVAILABLE",
#    "status": { "error_code": "OK", "error_message": "" } } ] }"  -- KServe V1 adds {"name", "ready"}.
@pytest.mark.parametrize("path", ["/v1/models/half_plus_three", "/v1/models/half_plus_three/versions/1"])
def test_model_status_is_tf_servings_and_kserves(url: str, path: str) -> None:
    response = httpx.get(f"{url}{path}")
    assert response.status_code == 200
    assert response.json() == {
        "name": "half_plus_three",
        "ready": True,
        "model_version_status": [
            {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        ],
    }


def test_model_list(url: str) -> None:
    assert httpx.get(f"{url}/v1/models").json() == {"models": ["half_plus_three", "tag_signal_sensor", "text_bytes"]}


# "For multiple named inputs, each item is expected to be an object containing input name/tensor value pair"
# (the page's second instance has a stray ']' after "signal"; this is the well-formed version).
ROWS = {
    "instances": [
        {"tag": "foo", "signal": [1, 2, 3, 4, 5], "sensor": [[1, 2], [3, 4]]},
        {"tag": "bar", "signal": [3, 4, 1, 2, 5], "sensor": [[4, 5], [6, 8]]},
    ]
}
# "Columnar representation of the previous example is as follows:"
COLUMNS = {
    "inputs": {
        "tag": ["foo", "bar"],
        "signal": [[1, 2, 3, 4, 5], [3, 4, 1, 2, 5]],
        "sensor": [[[1, 2], [3, 4]], [[4, 5], [6, 8]]],
    }
}


def test_row_format_with_named_inputs_answers_a_list_of_objects(url: str) -> None:
    # "If the model outputs multiple named tensors, we output a list of objects instead"
    response = predict(url, "/v1/models/tag_signal_sensor:predict", ROWS)
    assert response.status_code == 200
    assert response.json() == {
        "predictions": [
            {"tag_out": "foo", "signal_out": [1, 2, 3, 4, 5], "sensor_out": [[1, 2], [3, 4]]},
            {"tag_out": "bar", "signal_out": [3, 4, 1, 2, 5], "sensor_out": [[4, 5], [6, 8]]},
        ]
    }


def test_columnar_format_answers_an_object_of_outputs(url: str) -> None:
    # "If the model outputs multiple named tensors, we output an object instead."
    response = predict(url, "/v1/models/tag_signal_sensor:predict", COLUMNS)
    assert response.status_code == 200
    assert response.json() == {
        "outputs": {"tag_out": ["foo", "bar"], "signal_out": COLUMNS["inputs"]["signal"],
                    "sensor_out": COLUMNS["inputs"]["sensor"]}
    }  # fmt: skip


def test_columnar_single_input_and_output_are_unnamed(url: str) -> None:
    # "The value for inputs key can either a single input tensor or a map of input name to tensors"
    assert predict(url, "/v1/models/half_plus_three:predict", {"inputs": [1.0, 3.0]}).json() == {"outputs": [3.5, 4.5]}
    assert predict(url, "/v1/models/half_plus_three:predict", {"inputs": {"x": [1.0]}}).json() == {"outputs": [3.5]}


def test_binary_values_travel_as_b64(url: str) -> None:
    # "encapsulate it in a JSON object having b64 as the key ... The same format is used to encode output
    # response as well." and "Named tensors that have _bytes as a suffix in their name are considered to have
    # binary values."
    raw = "héllo".encode()
    response = predict(
        url, "/v1/models/text_bytes:predict", {"instances": [{"b64": base64.b64encode(raw).decode()}, "x"]}
    )
    assert response.status_code == 200
    assert response.json() == {
        "predictions": [
            {"text": "héllo", "text_bytes": {"b64": base64.b64encode(raw).decode()}},
            {"text": "x", "text_bytes": {"b64": "eA=="}},
        ]
    }


@pytest.mark.parametrize(
    ("path", "document", "named"),
    [
        # an instance one value short of the model's width
        ("/v1/models/tag_signal_sensor:predict", {"instances": [{**ROWS["instances"][0], "signal": [1, 2, 3, 4]}]},
         "signal"),
        # instances of different widths
        ("/v1/models/tag_signal_sensor:predict",
         {"instances": [ROWS["instances"][0], {**ROWS["instances"][1], "sensor": [[4, 5], [6]]}]}, "sensor"),
        # text where the model takes numbers, a number where it takes text, a float for an integer
        ("/v1/models/half_plus_three:predict", {"instances": [1.0, "two"]}, "x"),
        ("/v1/models/tag_signal_sensor:predict", {"instances": [{**ROWS["instances"][0], "tag": 7}]}, "tag"),
        ("/v1/models/tag_signal_sensor:predict", {"instances": [{**ROWS["instances"][0], "signal": [1.5] * 5}]},
         "signal"),
        # a missing and an unknown input
        ("/v1/models/tag_signal_sensor:predict", {"instances": [{"tag": "a", "signal": [1] * 5}]}, "sensor"),
        ("/v1/models/half_plus_three:predict", {"inputs": {"x": [1.0], "z": [2.0]}}, "z"),
        # a row-shaped tensor for a vector input
        ("/v1/models/half_plus_three:predict", {"instances": [[1.0, 2.0]]}, "x"),
    ],
)  # fmt: skip
def test_a_wrong_instance_is_400_naming_the_input(url: str, path: str, document: Any, named: str) -> None:
    response = predict(url, path, document)
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"error"}
    assert f"'{named}'" in response.json()["error"] or f"['{named}']" in response.json()["error"]


@pytest.mark.parametrize(
    ("document", "status"),
    [({}, 400), ({"instances": [1.0], "inputs": [1.0]}, 400), ({"instances": []}, 400), ([1.0], 400)],
)
def test_malformed_bodies_are_400(url: str, document: Any, status: int) -> None:
    response = predict(url, "/v1/models/half_plus_three:predict", document)
    assert response.status_code == status and "error" in response.json()


def test_unknown_model_or_version_is_404(url: str) -> None:
    # "$ curl -i -d '{"instances": [1.0,5.0]}' -X POST http://localhost:8501/v1/models/half:predict
    #  HTTP/1.1 404 Not Found ... { "error": "Servable not found for request: Latest(half)" }"
    for path in ("/v1/models/half:predict", "/v1/models/half_plus_three/versions/9:predict", "/v1/models/half"):
        response = httpx.request("GET" if path.endswith("half") else "POST", f"{url}{path}", json={"instances": [1.0]})
        assert response.status_code == 404 and set(response.json()) == {"error"}


# On Lambda, through the real handler: API Gateway and ALB pass ':' as it is (or percent-encoded).
@pytest.mark.parametrize("shape", list(SAM_EVENTS))
@pytest.mark.parametrize(
    "path", ["/v1/models/iris:predict", "/v1/models/iris%3Apredict", "/v1/models/iris/versions/1:predict"]
)
def test_predict_through_the_lambda_handler(shape: str, path: str) -> None:
    from handler.http import lambda_handler

    body = json.dumps({"instances": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}).encode()
    event = json.loads((EVENTS / shape / "infer-json.json").read_text())  # made by sam local generate-event
    event = fill(event, shape, "POST", path, body, {"content-type": "application/json"})
    response = lambda_handler(event, LocalLambdaContext())
    assert response["statusCode"] == 200, response
    assert response["isBase64Encoded"] is False
    predictions = json.loads(response["body"])["predictions"]
    assert [p["label"] for p in predictions] == [[0], [2]]  # setosa, virginica
