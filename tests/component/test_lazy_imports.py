"""What the Lambda init imports: only what answers a first request (a short cold start). The Triton adapter,
the dynamic batcher and the request-log sampler are imported when a deployment uses them, and then work; no heavy
optional library (boto3, grpc, tritonclient, prometheus_client, OpenTelemetry, FastAPI, pydantic) is imported by the
init or a first ordinary request, and the first request to each feature that needs one loads it and is answered."""

# covers: handler/runtime/warmup.py

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

from adapters.onnx.backend import OnnxBackend
from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.triton.backend import TritonBackend
from adapters.triton.passthrough import TritonPassthrough
from adapters.triton.settings import TritonRoute, TritonSettings
from tests.support.servers import LOOPBACK, moto_server, unique_name

ROOT = Path(__file__).resolve().parents[2]
DEFERRED = ("adapters.triton", "adapters.onnx.batcher", "handler.observability.request_log")


def _imported_by_http_init(**env: str) -> list[str]:
    """Modules from ``DEFERRED`` that a fresh ``import handler.http`` imports (the demo repository, no warm-up)."""
    code = (
        "import json, sys, handler.http; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({DEFERRED!r}))))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OIP_TRITON_", "OIP_REQUEST_LOG_"))}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "MODEL_REPOSITORY": str(ROOT / "models"), "OIP_WARM_UP": "0", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_lambda_init_does_not_import_what_the_deployment_does_not_use() -> None:
    assert _imported_by_http_init() == []


def test_triton_settings_and_client_are_imported_when_a_triton_url_is_set() -> None:
    imported = _imported_by_http_init(OIP_TRITON_URL="localhost:1", OIP_TRITON_MODELS="remote=iris")
    assert {"adapters.triton.settings", "adapters.triton.client", "adapters.triton.passthrough"} <= set(imported)


def _repository() -> ModelRepository:
    return ModelRepository(ROOT / "models", lambda name, ver, path, config: OnnxBackend(name, ver, path, config))


def test_a_router_with_triton_routes_builds_its_client_and_backends() -> None:
    settings = TritonSettings(url="localhost:1", routes={"remote": TritonRoute("iris", "2")})
    router = ModelRouter(_repository(), settings)
    assert router.client is not None and isinstance(router.passthrough, TritonPassthrough)
    backend = router.backend("remote")
    assert isinstance(backend, TritonBackend) and router.backend("remote") is backend  # cached per name
    assert router.route("iris") is None and not isinstance(router.backend("iris"), TritonBackend)
    assert anyio.run(router.remote_config, "iris") is None  # a local model has no remote configuration


def test_a_proxying_router_forwards_unknown_names() -> None:
    settings = TritonSettings(url="localhost:1", protocol="grpc", proxy_all=True)
    router = ModelRouter(_repository(), settings)
    assert router.passthrough is None  # bodies pass through over HTTP only
    assert router.route("elsewhere") == TritonRoute("elsewhere")
    assert isinstance(router.backend("elsewhere", "3"), TritonBackend)


def test_a_router_without_triton_has_no_client() -> None:
    router = ModelRouter(_repository(), None)
    assert router.client is None and router.passthrough is None and router.route("anything") is None


#: Run in a fresh interpreter: the Lambda init, a first ordinary inference request, then a request only pydantic's
#: schema can judge, then the documents.
_COLD_PATH = """
import json, sys
from pathlib import Path

class Context:
    function_name = "lazy"; memory_limit_in_mb = 1024; aws_request_id = "lazy"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:lazy"

def loaded():
    return sorted({m.split(".")[0] for m in sys.modules} & {"fastapi", "pydantic", "pydantic_core"})

def request(method, path, body=""):
    http = {**event["requestContext"]["http"], "method": method, "path": path}
    answer = handler.http.lambda_handler(
        {**event, "rawPath": path, "body": body, "requestContext": {**event["requestContext"], "http": http}},
        Context(),
    )
    return answer["statusCode"], answer["headers"].get("content-type"), answer["body"]

import handler.http
seen = {"init": loaded()}
event = json.loads(Path("events/http-api/infer-json.json").read_text())
seen["first"] = request("POST", "/v2/models/iris/infer", event["body"])[0]
seen["infer"] = loaded()
odd = {"inputs": [{"name": "input", "shape": [1, "4"], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
seen["odd"] = request("POST", "/v2/models/iris/infer", json.dumps(odd))
seen["after_odd"] = loaded()
seen["pages"] = {path: request("GET", path)[:2] for path in ("/docs", "/redoc", "/static-offline-docs/swagger-ui.css")}
status, kind, body = request("GET", "/openapi.json")
seen["openapi"] = [status, kind, sorted(json.loads(body)["paths"])]
print(json.dumps(seen))
"""


def test_fastapi_and_pydantic_stay_off_the_cold_path_and_the_documents_still_work() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OIP_", "POWERTOOLS_"))}
    result = subprocess.run(
        [sys.executable, "-c", _COLD_PATH],
        cwd=ROOT,
        env={**clean, "MODEL_REPOSITORY": str(ROOT / "models")},
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["init"] == [] and seen["infer"] == [], seen  # neither the init nor an ordinary request needs them
    assert seen["first"] == 200
    status, _, body = seen["odd"]  # a document the hand check leaves to pydantic's schema: its account of it
    assert status == 400 and "inputs.0.shape.1" in json.loads(body)["error"], seen["odd"]
    assert seen["after_odd"] == ["pydantic", "pydantic_core"]
    assert seen["pages"] == {
        "/docs": [200, "text/html; charset=utf-8"],
        "/redoc": [200, "text/html; charset=utf-8"],
        "/static-offline-docs/swagger-ui.css": [200, "text/css; charset=utf-8"],
    }
    status, kind, paths = seen["openapi"]
    assert (status, kind) == (200, "application/json")
    assert {"/v2/models/{model_name}/infer", "/v2/health/ready", "/v2/repository/index"} <= set(paths)


#: Heavy optional libraries, by top-level package, that neither the init nor a first ordinary request may import.
HEAVY = ("boto3", "s3transfer", "grpc", "tritonclient", "aiohttp", "prometheus_client", "opentelemetry")
HEAVY += ("fastapi", "pydantic", "pydantic_core")
#: What may be loaded under a heavy package's name: Triton's model-configuration schema, loaded from its file
#: without ``tritonclient/__init__`` (adapters/repository/model_config.py), and botocore's package module alone,
#: which Powertools' user-agent module imports (no session, client or endpoint code).
ALLOWED = ("tritonclient.grpc.model_config_pb2", "botocore")

#: Run in a fresh interpreter with a Triton route (``remote``, served by the stand-in at argv[1]) and S3 tensors
#: (moto): the Lambda init, a first ordinary request, then the first request to each lazily loaded feature.
_FEATURES = """
import json, sys
from pathlib import Path

HEAVY = set(json.loads(sys.argv[1]))

class Context:
    function_name = "lazy"; memory_limit_in_mb = 1024; aws_request_id = "lazy"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:lazy"

def heavy():
    return sorted(m for m in sys.modules if m.split(".")[0] in HEAVY or m.split(".")[0] == "botocore")

def request(method, path, body=""):
    http = {**event["requestContext"]["http"], "method": method, "path": path}
    answer = handler.http.lambda_handler(
        {**event, "rawPath": path, "body": body, "requestContext": {**event["requestContext"], "http": http}},
        Context(),
    )
    return [answer["statusCode"], json.loads(answer["body"])]

import handler.http
seen = {"init": heavy()}
event = json.loads(Path("events/http-api/infer-json.json").read_text())
seen["first"] = request("POST", "/v2/models/iris/infer", event["body"])
seen["after_first"] = heavy()
seen["metadata"] = request("GET", "/v2/models/remote")
seen["passed"] = request("POST", "/v2/models/remote/infer", event["body"])
nan = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, None, 4]}]}
seen["decoded"] = request("POST", "/v2/models/remote/infer", json.dumps(nan))
seen["after_triton"] = heavy()
reference = {"name": "input", "shape": [1, 4], "datatype": "FP32", "parameters": {"s3_uri": sys.argv[2]}}
by_reference = {"inputs": [reference]}
seen["s3"] = request("POST", "/v2/models/iris/infer", json.dumps(by_reference))
seen["after_s3"] = heavy()
print(json.dumps(seen))
"""

#: The stand-in Triton's answers: metadata of ``iris`` and one inference answer the test recognises.
_METADATA = {
    "name": "iris",
    "versions": ["1"],
    "platform": "onnxruntime_onnx",
    "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "label", "datatype": "INT64", "shape": [-1, 1]}],
}
_ANSWER = {
    "model_name": "iris",
    "model_version": "1",
    "outputs": [{"name": "label", "datatype": "INT64", "shape": [1, 1], "data": [41]}],
}


class _StandInTriton(BaseHTTPRequestHandler):
    """Enough of Triton's V2 HTTP endpoint for forwarding: readiness, ``iris``'s metadata and configuration, and
    one fixed inference answer; every request line is kept in ``server.seen``."""

    protocol_version = "HTTP/1.1"
    server: Any

    def _answer(self, status: int, document: dict[str, Any]) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.seen.append(f"GET {self.path}")
        if self.path.endswith("/config"):
            self._answer(200, {"name": "iris", "platform": "onnxruntime_onnx", "max_batch_size": 256})
        elif self.path.endswith("/ready"):
            self._answer(200, {})
        elif self.path.startswith("/v2/models/iris"):
            self._answer(200, _METADATA)
        else:
            self._answer(404, {"error": f"unknown path {self.path}"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.seen.append(f"POST {self.path}")
        self._answer(200, _ANSWER)

    def log_message(self, *_: Any) -> None:
        pass


@contextmanager
def _stand_in_triton() -> Iterator[ThreadingHTTPServer]:
    """The stand-in on 127.0.0.1, at a port it binds itself (port 0), in a thread of this process."""
    server = ThreadingHTTPServer((LOOPBACK, 0), _StandInTriton)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m not in ALLOWED]


def test_heavy_libraries_stay_off_the_cold_path_and_each_feature_loads_its_own_on_first_use() -> None:
    import boto3

    from tests.integration.conftest import AWS_TEST_ENV

    with moto_server() as s3_url, _stand_in_triton() as triton:
        aws = {**AWS_TEST_ENV, "AWS_ENDPOINT_URL": s3_url}
        bucket = unique_name("lazy")
        s3 = boto3.client("s3", endpoint_url=s3_url, **_credentials(aws))
        s3.create_bucket(Bucket=bucket)
        first_row = json.loads(json.loads((ROOT / "events/http-api/infer-json.json").read_text())["body"])
        s3.put_object(Bucket=bucket, Key="tensors/x", Body=_fp32(first_row["inputs"][0]["data"][0]))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OIP_", "POWERTOOLS_", "AWS_", "OTEL_"))}
        env = {
            **clean,
            **aws,
            "MODEL_REPOSITORY": str(ROOT / "models"),
            "OIP_TRITON_URL": f"{LOOPBACK}:{triton.server_address[1]}",
            "OIP_TRITON_MODELS": "remote=iris",
            "OIP_S3_TENSOR_PREFIXES": f"s3://{bucket}/tensors/",
        }
        result = subprocess.run(
            [sys.executable, "-c", _FEATURES, json.dumps(HEAVY), f"s3://{bucket}/tensors/x"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        seen = json.loads(result.stdout.strip().splitlines()[-1])
        stand_in_saw = list(triton.seen)

    assert _heavy(seen["init"]) == [] and _heavy(seen["after_first"]) == [], seen  # init and an ordinary request
    assert seen["first"][0] == 200
    # Triton: metadata through tritonclient, a plain JSON body passed through (aiohttp), one the decoding path
    # reads (a null is NaN) through tritonclient's inference; each answered by the stand-in.
    assert seen["metadata"] == [200, {**_METADATA, "name": "remote"}], seen["metadata"]
    for answer in (seen["passed"], seen["decoded"]):
        assert answer[0] == 200 and answer[1]["outputs"][0]["data"] == [41], answer
    assert stand_in_saw.count("POST /v2/models/iris/infer") == 2, stand_in_saw
    assert {"tritonclient.http.aio", "aiohttp"} <= set(seen["after_triton"])
    assert not any(m.split(".")[0] in ("boto3", "grpc") for m in seen["after_triton"])  # HTTP needs no grpc
    # S3 tensors: the input read from moto by boto3, on the first request that names one.
    assert seen["s3"][0] == 200, seen["s3"]
    by_reference, inline = seen["s3"][1]["outputs"], seen["first"][1]["outputs"]  # the event's first row, inline
    assert [o["data"] for o in by_reference] == [inline[0]["data"][:3], inline[1]["data"][:1]], by_reference
    assert "boto3" in seen["after_s3"] and "boto3" not in seen["after_triton"]


def _credentials(aws: dict[str, str]) -> dict[str, str]:
    return {
        "aws_access_key_id": aws["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": aws["AWS_SECRET_ACCESS_KEY"],
        "aws_session_token": aws["AWS_SESSION_TOKEN"],
        "region_name": aws["AWS_DEFAULT_REGION"],
    }


def _fp32(values: list[float]) -> bytes:
    import numpy as np

    return np.asarray(values, dtype="<f4").tobytes()
