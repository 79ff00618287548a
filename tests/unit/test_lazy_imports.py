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
