"""What the Lambda init imports: only what answers a first request (a short cold start). The Triton adapter,
the dynamic batcher and the request-log sampler are imported when a deployment uses them, and then work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio

from adapters.onnx.backend import OnnxBackend
from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.triton.backend import TritonBackend
from adapters.triton.passthrough import TritonPassthrough
from adapters.triton.settings import TritonRoute, TritonSettings

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
