"""KServe's own Python SDK clients against a real ``oip serve`` (REST and gRPC ports on 127.0.0.1):
``kserve.InferenceRESTClient`` with ``RESTConfig(protocol="v2")`` and ``kserve.InferenceGRPCClient`` (kserve 0.21.0,
in its own venv: tests/support/kserve_env.py). Requests are built with the client's ``InferRequest`` / ``InferInput`` /
``RequestedOutput`` and answers decoded with its ``InferResponse.as_numpy``; the values must equal what onnxruntime
gives for the same input. kserve 0.21.0's clients offer no model-metadata call (only live, ready, model ready and
infer), so metadata is not exercised here."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from handler.config.settings import DEMO_REPOSITORY
from tests.support import onnx_models
from tests.support.kserve_env import KServeRaised, KServeSession
from tests.support.samples import IRIS, SAMPLES, TABLE_DATATYPES, iris_outputs
from tests.support.servers import OipServer, live, oip_serve

#: The body and message limit the limits test gives its server (the default is 64 MiB).
LIMIT = 6 * 1024 * 1024

TEXT = SAMPLES["BYTES"][0]
#: A wrong input (how ``rest_infer`` / ``grpc_infer`` build it) and our answer's message, the same on both transports.
INVALID_INPUTS = [
    ({"datatype": "FP64", "dtype": "float64"}, "input 'input' has datatype FP64 but the model expects FP32"),
    ({"shape": [3, 4, 1]}, "input 'input' has shape [3, 4, 1] but the model expects [-1, 4]"),
    ({"name": "nope"}, "model 'iris' has no input 'nope'"),
]


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo iris beside identity models (FP32 and BYTES); every model loads, so the server is ready."""
    root = tmp_path_factory.mktemp("kserve_repository")
    shutil.copytree(DEMO_REPOSITORY / "iris", root / "iris")
    for datatype in TABLE_DATATYPES:
        onnx_models.save(onnx_models.identity(datatype), root, f"identity_{datatype.lower()}")
    return root


@pytest.fixture(scope="module")
def unready_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OipServer]:
    """A server whose repository holds a model that fails to load: not ready, as the spec's "server ready" says."""
    root = tmp_path_factory.mktemp("kserve_unready")
    shutil.copytree(DEMO_REPOSITORY / "iris", root / "iris")
    (root / "corrupt" / "1").mkdir(parents=True)
    (root / "corrupt" / "1" / "model.onnx").write_bytes(b"this is not an onnx file")
    with oip_serve(
        "--model-repository", str(root), "--exit-on-error", "false", grpc=True, workers=1, probe=live
    ) as found:
        yield found


@pytest.fixture(scope="module")
def served(repository: Path) -> Iterator[OipServer]:
    with oip_serve("--model-repository", str(repository), grpc=True, workers=1, probe=live) as found:
        yield found


@pytest.fixture(scope="module")
def kserve() -> Iterator[KServeSession]:
    session = KServeSession()
    yield session
    session.close()


@pytest.fixture(scope="module")
def iris_expected() -> dict[str, np.ndarray]:
    """onnxruntime's own answer for IRIS: the oracle."""
    return iris_outputs()


def array(found: dict[str, Any]) -> np.ndarray:
    """An array the driver returned (dtype, shape, values)."""
    if found["dtype"] == "object":
        return np.array(found["values"], dtype=object).reshape(found["shape"])
    return np.array(found["values"], dtype=found["dtype"]).reshape(found["shape"])


# One snippet per call, run in the kserve venv; ``url`` and the arguments are its local names.
REST_CLIENT = """
client = kserve.InferenceRESTClient(kserve.RESTConfig(protocol="v2", timeout=30, retries=0))
"""

REST_INFER = (
    REST_CLIENT
    + """
item = kserve.InferInput(name, shape, datatype)
value = np.array(data, dtype=dtype).reshape(shape) if datatype != "BYTES" else np.array(
    [s.encode() for s in data], dtype=object).reshape(shape)
item.set_data_from_numpy(value, binary_data=binary)
outputs = [RequestedOutput(o, parameters) for o in requested] if requested else None
request = kserve.InferRequest(model, [item], request_id=request_id, request_outputs=outputs,
                              parameters=request_parameters)
headers = {}
try:
    response = await client.infer(url, request, model_name=model, response_headers=headers)
finally:
    await client.close()
return {
    "id": response.id, "model_name": response.model_name,
    "binary": "inference-header-content-length" in headers,
    "outputs": {o.name: o.as_numpy() for o in response.outputs},
    "order": [o.name for o in response.outputs],
}
"""
)

GRPC_INFER = """
client = kserve.InferenceGRPCClient(url, timeout=30, retries=0)
item = kserve.InferInput(name, shape, datatype)
value = np.array(data, dtype=dtype).reshape(shape) if datatype != "BYTES" else np.array(
    [s.encode() for s in data], dtype=object).reshape(shape)
item.set_data_from_numpy(value, binary_data=binary)
outputs = [RequestedOutput(o) for o in requested] if requested else None
request = kserve.InferRequest(model, [item], request_id=request_id, request_outputs=outputs, model_version=version,
                              parameters=request_parameters)
sent = request.to_grpc()
try:
    response = await client.infer(request)
finally:
    await client.close()
return {
    "id": response.id, "model_name": response.model_name, "model_version": response.model_version,
    "raw_inputs": len(sent.raw_input_contents), "raw_outputs": len([o for o in response.outputs if o._raw_data]),
    "outputs": {o.name: o.as_numpy() for o in response.outputs},
    "order": [o.name for o in response.outputs],
}
"""


def rest_infer(kserve: KServeSession, served: OipServer, model: str, data: Any, **options: Any) -> dict[str, Any]:
    args = {"url": served.url, "model": model, "data": data, "name": "input", "shape": [len(data), 4],
            "datatype": "FP32", "dtype": "float32", "binary": False, "requested": None, "parameters": None,
            "request_id": None, "request_parameters": None, **options}  # fmt: skip
    return kserve.run(REST_INFER, **args)


def grpc_infer(kserve: KServeSession, served: OipServer, model: str, data: Any, **options: Any) -> dict[str, Any]:
    args = {"url": served.grpc, "model": model, "data": data, "name": "input", "shape": [len(data), 4],
            "datatype": "FP32", "dtype": "float32", "binary": True, "requested": None, "request_id": None,
            "version": None, "request_parameters": None, **options}  # fmt: skip
    return kserve.run(GRPC_INFER, **args)


def assert_iris(found: dict[str, Any], expected: dict[str, np.ndarray]) -> None:
    probabilities, label = array(found["outputs"]["probabilities"]), array(found["outputs"]["label"])
    assert probabilities.dtype == np.float32 and np.array_equal(probabilities, expected["probabilities"])
    assert label.dtype == np.int64 and np.array_equal(label, expected["label"])


# --- REST (protocol v2) ---------------------------------------------------------------------------------------------


def test_rest_health_and_model_ready(kserve: KServeSession, served: OipServer) -> None:
    """ "A 200 status code indicates true and a 4xx status code indicates false." (health APIs)"""
    found = kserve.run(
        REST_CLIENT
        + """
try:
    return [await client.is_server_live(url), await client.is_server_ready(url),
            await client.is_model_ready(url, "iris"), await client.is_model_ready(url, "no_such_model")]
finally:
    await client.close()
""",
        url=served.url,
    )
    assert found == [True, True, True, False]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_rest_infer_iris_equals_onnxruntime(
    kserve: KServeSession, served: OipServer, iris_expected: dict[str, np.ndarray], binary: bool
) -> None:
    """FP32 input from ``set_data_from_numpy`` as JSON ``data`` or as Triton's binary extension (the client then
    sends ``Inference-Header-Content-Length`` and ``binary_data_size``); requested outputs come back in the order
    asked for, and the id is echoed: "id: the identifier given in the request"."""
    requested = ["label", "probabilities"]
    found = rest_infer(kserve, served, "iris", IRIS.tolist(), binary=binary, requested=requested, request_id="kr-1")
    assert found["id"] == "kr-1" and found["model_name"] == "iris"
    assert found["order"] == requested
    assert not found["binary"]  # no output asked for binary data
    assert_iris(found, iris_expected)


def test_rest_binary_outputs_are_decoded_by_the_client(
    kserve: KServeSession, served: OipServer, iris_expected: dict[str, np.ndarray]
) -> None:
    """Outputs asked for with ``binary_data: true`` come back after the JSON header; ``InferResponse.from_bytes``
    slices them by ``binary_data_size``."""
    found = rest_infer(
        kserve, served, "iris", IRIS.tolist(), binary=True, requested=["probabilities", "label"],
        parameters={"binary_data": True}, request_id="kr-2",
    )  # fmt: skip
    assert found["binary"] and found["id"] == "kr-2" and found["order"] == ["probabilities", "label"]
    assert_iris(found, iris_expected)


def test_rest_all_outputs_binary_without_naming_them(
    kserve: KServeSession, served: OipServer, iris_expected: dict[str, np.ndarray]
) -> None:
    found = rest_infer(
        kserve, served, "iris", IRIS.tolist(), binary=True, request_parameters={"binary_data_output": True}
    )
    assert found["binary"] and sorted(found["order"]) == ["label", "probabilities"]
    assert_iris(found, iris_expected)


def test_rest_one_requested_output_only(
    kserve: KServeSession, served: OipServer, iris_expected: dict[str, np.ndarray]
) -> None:
    """ "outputs: The output tensors requested for this inference. [...] If not specified all outputs produced by
    the model will be returned" — so naming one returns that one."""
    found = rest_infer(kserve, served, "iris", IRIS.tolist(), requested=["label"])
    assert found["order"] == ["label"]
    assert np.array_equal(array(found["outputs"]["label"]), iris_expected["label"])


def test_rest_id_is_generated_by_the_client_when_none_is_given(kserve: KServeSession, served: OipServer) -> None:
    found = rest_infer(kserve, served, "iris", IRIS[:1].tolist())
    assert len(found["id"]) == 36  # kserve's to_rest() puts a uuid4 in every request; we echo it


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_rest_bytes_round_trip(kserve: KServeSession, served: OipServer, binary: bool) -> None:
    """BYTES as a list of strings in JSON, or Triton's 4-byte length prefix per element in binary, both ways."""
    found = rest_infer(
        kserve, served, "identity_bytes", TEXT, name="INPUT0", shape=[2, 3], datatype="BYTES", dtype="object",
        binary=binary, requested=["OUTPUT0"], parameters={"binary_data": binary},
    )  # fmt: skip
    got = array(found["outputs"]["OUTPUT0"])
    assert found["binary"] == binary and got.shape == (2, 3)
    assert list(got.ravel()) == TEXT  # InferResponse.from_bytes turns binary BYTES into str (UTF-8) too


def test_rest_unknown_model_raises_with_our_message(kserve: KServeSession, served: OipServer) -> None:
    """ "A failed inference request must be indicated by an HTTP error status [...] The HTTP body must contain the
    $inference_error_response object" — the client's HTTPStatusError carries our ``error`` text."""
    with pytest.raises(KServeRaised) as raised:
        rest_infer(kserve, served, "no_such_model", IRIS.tolist())
    assert raised.value.type == "httpx.HTTPStatusError" and raised.value.status == 404
    assert "no_such_model" in raised.value.message and "iris" in raised.value.message  # what exists is listed


@pytest.mark.parametrize(("options", "message"), INVALID_INPUTS, ids=["datatype", "shape", "name"])
@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_rest_invalid_input_is_400_with_our_message(
    kserve: KServeSession, served: OipServer, options: dict[str, Any], message: str, binary: bool
) -> None:
    with pytest.raises(KServeRaised) as raised:
        rest_infer(kserve, served, "iris", IRIS.tolist(), binary=binary, **options)
    assert raised.value.type == "httpx.HTTPStatusError" and raised.value.status == 400
    assert message in raised.value.message and "400 Bad Request" in raised.value.message


# --- gRPC -----------------------------------------------------------------------------------------------------------


def test_grpc_health_and_model_ready(kserve: KServeSession, served: OipServer) -> None:
    found = kserve.run(
        """
client = kserve.InferenceGRPCClient(url, timeout=30, retries=0)
try:
    return [await client.is_server_live(), await client.is_server_ready(), await client.is_model_ready("iris")]
finally:
    await client.close()
""",
        url=served.grpc,
    )
    assert found == [True, True, True]


def test_grpc_model_ready_of_an_unknown_model_is_not_found(kserve: KServeSession, served: OipServer) -> None:
    """ "errors are indicated by the google.rpc.Status returned for the request. The OK code indicates success and
    other codes indicate failure." """
    with pytest.raises(KServeRaised) as raised:
        kserve.run(
            """
client = kserve.InferenceGRPCClient(url, timeout=30, retries=0)
try:
    return await client.is_model_ready("no_such_model")
finally:
    await client.close()
""",
            url=served.grpc,
        )
    assert raised.value.code == "NOT_FOUND" and "no_such_model" in raised.value.message


@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
def test_grpc_infer_iris_equals_onnxruntime(
    kserve: KServeSession, served: OipServer, iris_expected: dict[str, np.ndarray], binary: bool
) -> None:
    """``set_data_from_numpy(binary_data=True)`` sends ``raw_input_contents``; False sends typed ``contents``
    (fp32_contents). Our outputs come back raw ("raw_output_contents"), which ``InferResponse.from_grpc`` reads."""
    found = grpc_infer(
        kserve, served, "iris", IRIS.tolist(), binary=binary, requested=["label", "probabilities"], request_id="kg-1"
    )
    assert found["raw_inputs"] == (1 if binary else 0)
    assert found["id"] == "kg-1" and found["model_name"] == "iris" and found["model_version"] == "1"
    assert found["order"] == ["label", "probabilities"] and found["raw_outputs"] == 2
    assert_iris(found, iris_expected)


def test_grpc_version_and_one_output(
    kserve: KServeSession, served: OipServer, iris_expected: dict[str, np.ndarray]
) -> None:
    found = grpc_infer(kserve, served, "iris", IRIS.tolist(), requested=["probabilities"], version="1")
    assert found["order"] == ["probabilities"] and found["model_version"] == "1"
    assert np.array_equal(array(found["outputs"]["probabilities"]), iris_expected["probabilities"])


@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
def test_grpc_bytes_round_trip(kserve: KServeSession, served: OipServer, binary: bool) -> None:
    found = grpc_infer(
        kserve, served, "identity_bytes", TEXT, name="INPUT0", shape=[2, 3], datatype="BYTES", dtype="object",
        binary=binary,
    )  # fmt: skip
    got = array(found["outputs"]["OUTPUT0"])
    assert got.shape == (2, 3) and [v.encode("latin-1").decode() for v in got.ravel()] == TEXT


def test_grpc_unknown_model_is_not_found_with_our_message(kserve: KServeSession, served: OipServer) -> None:
    with pytest.raises(KServeRaised) as raised:
        grpc_infer(kserve, served, "no_such_model", IRIS.tolist())
    assert raised.value.code == "NOT_FOUND"
    assert "no_such_model" in raised.value.message and "iris" in raised.value.message


@pytest.mark.parametrize(("options", "message"), INVALID_INPUTS, ids=["datatype", "shape", "name"])
@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
def test_grpc_invalid_input_is_invalid_argument_with_our_message(
    kserve: KServeSession, served: OipServer, options: dict[str, Any], message: str, binary: bool
) -> None:
    with pytest.raises(KServeRaised) as raised:
        grpc_infer(kserve, served, "iris", IRIS.tolist(), binary=binary, **options)
    assert raised.value.code == "INVALID_ARGUMENT" and message in raised.value.message


# --- every datatype of the table, both transports --------------------------------------------------------------------

ROUND_TRIPS = [
    pytest.param(transport, datatype, binary, id=f"{transport}-{datatype}-{kind}")
    for transport, kinds in (("rest", {True: "binary", False: "json"}), ("grpc", {True: "raw", False: "typed"}))
    for datatype in TABLE_DATATYPES
    for binary, kind in kinds.items()
    if binary or datatype != "FP16"  # the client refuses FP16 as JSON and has no typed FP16 contents (fp16 is raw)
]


@pytest.mark.parametrize(("transport", "datatype", "binary"), ROUND_TRIPS)
def test_every_datatype_round_trips(
    kserve: KServeSession, served: OipServer, transport: str, datatype: str, binary: bool
) -> None:
    values, expected = SAMPLES[datatype]
    infer = rest_infer if transport == "rest" else grpc_infer
    dtype = "object" if datatype == "BYTES" else str(expected.dtype)
    options = {"parameters": {"binary_data": binary}} if transport == "rest" else {}
    found = infer(
        kserve, served, f"identity_{datatype.lower()}", values, name="INPUT0", shape=[2, 3], datatype=datatype,
        dtype=dtype, binary=binary, requested=["OUTPUT0"], request_id=f"{transport}-{datatype}", **options,
    )  # fmt: skip
    got = array(found["outputs"]["OUTPUT0"])
    assert found["id"] == f"{transport}-{datatype}" and got.shape == (2, 3)
    if datatype == "BYTES":
        text = [v if transport == "rest" else v.encode("latin-1").decode() for v in got.ravel()]
        assert text == values
    else:
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


#: The end of a job: ``request`` sent over REST v2 or gRPC (``rest``), the answer's id returned.
INFER_OVER_EITHER = """
if rest:
    client = kserve.InferenceRESTClient(kserve.RESTConfig(protocol="v2", timeout=30, retries=0))
    try:
        return (await client.infer(url, request, model_name=request.model_name)).id
    finally:
        await client.close()
client = kserve.InferenceGRPCClient(url, timeout=30, retries=0)
try:
    return (await client.infer(request)).id
finally:
    await client.close()
"""

MISCOUNT = (
    """
item = kserve.InferInput("input", [2, 4], "FP32", data=[1.0] * 12)  # the shape says 8 elements, the data has 12
request = kserve.InferRequest("iris", [item])
"""
    + INFER_OVER_EITHER
)


def test_data_that_does_not_match_the_shape_is_refused_with_our_message(
    kserve: KServeSession, served: OipServer
) -> None:
    """ "shape: The shape of the input tensor." — 12 values for a [2, 4] tensor is an invalid request (400 /
    INVALID_ARGUMENT), whichever transport the client took."""
    with pytest.raises(KServeRaised) as rest:
        kserve.run(MISCOUNT, url=served.url, rest=True)
    with pytest.raises(KServeRaised) as grpc:
        kserve.run(MISCOUNT, url=served.grpc, rest=False)
    assert rest.value.status == 400 and grpc.value.code == "INVALID_ARGUMENT"
    assert "12" in grpc.value.message and "[2, 4]" in grpc.value.message
    assert grpc.value.message in rest.value.message  # the same check, made once for both


# --- a server that is not ready ---------------------------------------------------------------------------------------

UNREADY = """
rest = kserve.InferenceRESTClient(kserve.RESTConfig(protocol="v2", timeout=30, retries=0))
grpc_client = kserve.InferenceGRPCClient(grpc_url, timeout=30, retries=0)
try:
    found = {"rest_model": [await rest.is_model_ready(rest_url, "iris"),
                            await rest.is_model_ready(rest_url, "corrupt")],
             "grpc": [await grpc_client.is_server_ready(), await grpc_client.is_model_ready("iris"),
                      await grpc_client.is_model_ready("corrupt")]}
    try:
        found["rest_server"] = await rest.is_server_ready(rest_url)
    except Exception as exc:
        found["rest_server"] = {"status": exc.response.status_code, "body": exc.response.json()}
    return found
finally:
    await rest.close()
    await grpc_client.close()
"""


def test_not_ready_is_false_or_a_4xx(kserve: KServeSession, unready_served: OipServer) -> None:
    """ "The 'server ready' health API indicates if all the models are ready for inferencing." and, over REST, "A 200
    status code indicates true and a 4xx status code indicates false." kserve's ``is_server_ready`` raises on any
    non-2xx answer instead of returning False (it expects 200 ``{"ready": false}``, which KServe's own server
    sends): we keep the spec's 4xx, with ``{"ready": false}`` in the body for such clients to read."""
    found = kserve.run(UNREADY, rest_url=unready_served.url, grpc_url=unready_served.grpc)
    assert found["rest_model"] == [True, False]
    assert found["grpc"] == [False, True, False]
    assert found["rest_server"] == {"status": 400, "body": {"ready": False}}


# --- edges: parameters, empty batches, size limits --------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["rest", "grpc"])
def test_request_parameters_are_accepted(
    kserve: KServeSession, served: OipServer, iris_expected: dict[str, np.ndarray], transport: str
) -> None:
    """ "parameters: An optional object containing zero or more parameters for this inference request" — the client
    sends string, integer and boolean values (``InferParameter`` over gRPC)."""
    infer = rest_infer if transport == "rest" else grpc_infer
    parameters = {"tag": "kserve", "attempt": 3, "trace": True}
    assert_iris(infer(kserve, served, "iris", IRIS.tolist(), request_parameters=parameters), iris_expected)


@pytest.mark.parametrize(("transport", "binary"), [("rest", False), ("rest", True), ("grpc", False), ("grpc", True)])
def test_an_empty_batch_answers_empty_outputs(
    kserve: KServeSession, served: OipServer, transport: str, binary: bool
) -> None:
    infer = rest_infer if transport == "rest" else grpc_infer
    found = infer(kserve, served, "iris", [], shape=[0, 4], binary=binary)
    assert array(found["outputs"]["probabilities"]).shape == (0, 3)
    assert array(found["outputs"]["label"]).shape == (0, 1)


BIG = (
    """
item = kserve.InferInput("INPUT0", [rows, 4], "FP32")
item.set_data_from_numpy(np.zeros((rows, 4), np.float32), binary_data=True)
request = kserve.InferRequest("identity_fp32", [item])
"""
    + INFER_OVER_EITHER
)


def test_requests_over_the_limits_are_refused_with_our_message(kserve: KServeSession, repository: Path) -> None:
    """With a 6 MiB limit (``--max-body-bytes``), an 8 MB REST body is over it (413); so is an 80 MB gRPC message
    (RESOURCE_EXHAUSTED, from grpc before the message is read): the client shows why, neither hangs."""
    with oip_serve(
        "--model-repository", str(repository), "--max-body-bytes", str(LIMIT), grpc=True, workers=1, probe=live
    ) as limited:
        with pytest.raises(KServeRaised) as rest:
            kserve.run(BIG, url=limited.url, rest=True, rows=500_000)
        assert rest.value.status == 413 and "OIP_MAX_BODY_BYTES" in rest.value.message
        with pytest.raises(KServeRaised) as grpc:
            kserve.run(BIG, url=limited.grpc, rest=False, rows=5_000_000)
    assert grpc.value.code == "RESOURCE_EXHAUSTED"
    assert f"larger than max (80000070 vs. {LIMIT})" in grpc.value.message


# --- protocol v1 (RESTConfig's default) -------------------------------------------------------------------------------

V1 = """
client = kserve.InferenceRESTClient(kserve.RESTConfig(timeout=30, retries=0))  # protocol="v1" by default
try:
    found = {"live": await client.is_server_live(url), "ready": await client.is_model_ready(url, "iris"),
             "predict": await client.infer(url, {"instances": rows}, model_name="iris")}
    try:
        await client.is_model_ready(url, "no_such_model")
    except Exception as exc:
        found["unknown"] = [exc.response.status_code, str(exc)]
    return found
finally:
    await client.close()
"""


def test_v1_liveness_readiness_and_predict(
    kserve: KServeSession, served: OipServer, iris_expected: dict[str, np.ndarray]
) -> None:
    """No protocol text defines V1 liveness: KServe's client reads it from ``GET /`` as ``{"status":
    "alive"}`` (``is_server_live``: ``response.json().get("status").lower() == "alive"``), which KServe's own model
    server answers (python/kserve/kserve/protocol/rest/server.py: ``root_router.add_api_route(r"/",
    self.dataplane.live)``; dataplane.py: ``return {"status": "alive"}``), and so does this server."""
    found = kserve.run(V1, url=served.url, rows=IRIS.tolist())
    assert found["live"] is True and found["ready"] is True
    predictions = found["predict"]["predictions"]
    assert np.array_equal(
        np.array([p["probabilities"] for p in predictions], np.float32), iris_expected["probabilities"]
    )
    assert np.array_equal(np.array([p["label"] for p in predictions]), iris_expected["label"])
    status, message = found["unknown"]
    assert status == 404 and "Request for unknown model: 'no_such_model' is not found" in message
