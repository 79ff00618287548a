"""The built package under the real Lambda Runtime Interface Client (awslambdaric from PyPI, python3.12), against a
runtime API server written here (the Runtime Interface Emulator binary is not obtainable): init, every HTTP event
in events/ (API Gateway HTTP and REST APIs, ALB), SQS batch events through moto, and an init failure reported on
POST /runtime/init/error. The init time is printed."""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest

from scripts.tool_env import executable
from tests.support.servers import unique_name, wait_for

ROOT = Path(__file__).resolve().parents[2]
API = "/2018-06-01/runtime"
RESULTS_BUCKET = unique_name("ric-results")  # in the session's shared moto server
HTTP_EVENTS = sorted(p for shape in ("http-api", "rest-api", "alb") for p in (ROOT / "events" / shape).glob("*.json"))

pytestmark = pytest.mark.integration


@dataclass
class RuntimeApi:
    """Lambda's runtime API (next / response / error / init error), one invocation at a time."""

    #: (request id, event, ms the invocation has left when it is handed out: ``Lambda-Runtime-Deadline-Ms``)
    events: queue.Queue[tuple[str, bytes, int]] = field(default_factory=queue.Queue)
    results: dict[str, queue.Queue[tuple[str, Any, dict[str, str]]]] = field(default_factory=dict)
    init_errors: list[tuple[dict[str, str], Any]] = field(default_factory=list)
    first_next: float | None = None

    def invoke(
        self, event: dict[str, Any], timeout: float = 60, left_ms: int = 30_000
    ) -> tuple[str, Any, dict[str, str]]:
        """Invoke the function with ``event``, its deadline ``left_ms`` after the runtime receives it."""
        request_id = str(uuid.uuid4())
        self.results[request_id] = queue.Queue()
        self.events.put((request_id, json.dumps(event).encode(), left_ms))
        return self.results[request_id].get(timeout=timeout)


def _handler(api: RuntimeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _reply(self, status: int, body: bytes = b"{}", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path != f"{API}/invocation/next":
                return self._reply(404)
            if api.first_next is None:
                api.first_next = time.monotonic()
            request_id, body, left_ms = api.events.get()
            headers = {
                "Lambda-Runtime-Aws-Request-Id": request_id,
                "Lambda-Runtime-Deadline-Ms": str(int(time.time() * 1000) + left_ms),
                "Lambda-Runtime-Invoked-Function-Arn": "arn:aws:lambda:us-east-1:123456789012:function:oip",
                "Lambda-Runtime-Trace-Id": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
            }
            self._reply(200, body, headers)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            payload = json.loads(body) if body else None
            parts = self.path.removeprefix(API).strip("/").split("/")
            if parts == ["init", "error"]:
                api.init_errors.append((dict(self.headers), payload))
            elif len(parts) == 3 and parts[0] == "invocation" and parts[2] in ("response", "error"):
                api.results[parts[1]].put((parts[2], payload, dict(self.headers)))
            else:
                return self._reply(404)
            self._reply(202, b'{"status":"OK"}')

    return Handler


@dataclass
class Runtime:
    api: RuntimeApi
    process: subprocess.Popen[str]
    started: float


def _start(code: Path, layer: Path, env: dict[str, str], handler: str = "handler.http.lambda_handler") -> Runtime:
    api = RuntimeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # As Lambda starts a python3.12 function: the code in LAMBDA_TASK_ROOT (the working directory), the layer's
    # python/ on the path, the runtime API's address, and the RIC as the process.
    python = str(Path(executable("awslambdaric", "python")))
    environment = {
        "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
        "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{server.server_address[1]}", "LAMBDA_TASK_ROOT": str(code),
        "PYTHONPATH": str(layer), "PYTHONDONTWRITEBYTECODE": "1", "AWS_LAMBDA_FUNCTION_NAME": "oip",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1", "MODEL_REPOSITORY": str(code / "models"), "OIP_TRACING": "0", **env,
    }  # fmt: skip
    started = time.monotonic()
    process = subprocess.Popen(
        [python, "-m", "awslambdaric", handler], cwd=code, env=environment,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    runtime = Runtime(api, process, started)
    runtime.server = server  # type: ignore[attr-defined]
    return runtime


def _stop(runtime: Runtime) -> str:
    runtime.process.kill()
    output, _ = runtime.process.communicate(timeout=30)
    runtime.server.shutdown()  # type: ignore[attr-defined]
    return output


@pytest.fixture(scope="module")
def runtime(x86_build: tuple[Path, Path], moto_server: str) -> Iterator[Runtime]:
    code, layer = x86_build
    env = {
        "AWS_ENDPOINT_URL": moto_server, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "OIP_RESULTS_S3_URI": f"s3://{RESULTS_BUCKET}/results/",
    }  # fmt: skip
    boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=RESULTS_BUCKET)  # fmt: skip
    started = _start(code, layer, env)
    started.moto = moto_server  # type: ignore[attr-defined]
    yield started
    _stop(started)


def test_init_then_every_http_event(runtime: Runtime) -> None:
    kind, response, _ = runtime.api.invoke(json.loads(HTTP_EVENTS[0].read_text()), timeout=120)
    assert runtime.api.first_next is not None and not runtime.api.init_errors
    print(f"\ninit under awslambdaric (python3.12, process start to first /next): "
          f"{(runtime.api.first_next - runtime.started) * 1000:.0f} ms")  # fmt: skip
    assert kind == "response" and response["statusCode"] == 200
    for path in HTTP_EVENTS:
        kind, response, _ = runtime.api.invoke(json.loads(path.read_text()))
        assert kind == "response", (path, response)
        assert response["statusCode"] == 200, (path, response)
        assert response["isBase64Encoded"] is path.name.endswith("binary.json"), path
        if path.name == "infer-json.json":
            body = json.loads(base64.b64decode(response["body"]) if response["isBase64Encoded"] else response["body"])
            assert body["outputs"][1]["data"] == [0, 2]


def test_sqs_batch_event(runtime: Runtime) -> None:
    event = json.loads((ROOT / "events" / "batch" / "sqs.json").read_text())
    kind, response, _ = runtime.api.invoke(event)
    assert kind == "response" and response == {"batchItemFailures": []}, response
    s3 = boto3.client("s3", endpoint_url=runtime.moto,  # type: ignore[attr-defined]
                      region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")  # fmt: skip
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=RESULTS_BUCKET, Prefix="results/").get("Contents", [])}
    assert {f"results/iris/{r['messageId']}.json" for r in event["Records"]} <= keys, keys


def test_init_failure_is_reported_on_init_error(x86_build: tuple[Path, Path]) -> None:
    code, layer = x86_build
    runtime = _start(code, layer, {"OIP_MAX_BODY_BYTES": "not-a-number"})
    try:
        # awslambdaric posts the init error, then exits: whatever it asked for before its end is recorded.
        wait_for(lambda: runtime.process.poll() is not None, "the runtime's exit after its init error")
    finally:
        output = _stop(runtime)
    assert runtime.api.init_errors, output[-3000:]
    headers, payload = runtime.api.init_errors[0]
    # The error type in the header and the body (awslambdaric names the exception), the message and a stack trace.
    assert headers["Lambda-Runtime-Function-Error-Type"] == payload["errorType"] == "SettingsError", (headers, payload)
    assert payload["errorMessage"] == "OIP_MAX_BODY_BYTES='not-a-number': expected an integer from 1", payload
    assert payload["stackTrace"], payload
    assert runtime.api.first_next is None  # no invocation was asked for after a failed init


def _http(method: str, path: str, body: str = "") -> dict[str, Any]:
    """events/http-api/infer-json.json as a ``method`` request to ``path``."""
    event = json.loads((ROOT / "events" / "http-api" / "infer-json.json").read_text())
    http = {**event["requestContext"]["http"], "method": method, "path": path}
    return {**event, "rawPath": path, "body": body or None, "requestContext": {**event["requestContext"], "http": http}}


def _iris_counts(runtime: Runtime) -> dict[str, int]:
    kind, response, _ = runtime.api.invoke(_http("GET", "/v2/models/iris/stats"))
    assert kind == "response" and response["statusCode"] == 200, response
    (stats,) = json.loads(response["body"])["model_stats"]
    success = stats["inference_stats"]["success"]["count"]
    return {"inference": stats["inference_count"], "execution": stats["execution_count"], "success": success}


def test_an_invocation_whose_deadline_is_nearer_than_the_margin_answers_504_and_never_runs(runtime: Runtime) -> None:
    """Lambda's deadline as awslambdaric hands it over (``Lambda-Runtime-Deadline-Ms``, read back through its
    context's ``get_remaining_time_in_millis``): 300 ms left, within the 500 ms ``OIP_DEADLINE_MARGIN_MS`` keeps
    for answering, so the request's deadline has passed before it starts: 504, and the model's statistics show no
    run."""
    infer = json.loads((ROOT / "events" / "http-api" / "infer-json.json").read_text())
    assert runtime.api.invoke(infer)[1]["statusCode"] == 200  # the model is loaded and has run (the init is over)
    before = _iris_counts(runtime)
    kind, response, _ = runtime.api.invoke(infer, left_ms=300)
    assert kind == "response" and response["statusCode"] == 504, response
    assert "Lambda invocation's remaining time" in json.loads(response["body"])["error"], response
    assert _iris_counts(runtime) == before
