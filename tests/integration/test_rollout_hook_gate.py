"""The agreement gate wired through the pre-traffic hook's ``lambda_handler``: a CodeDeploy lifecycle event in, the
hook's own boto3 clients out, ``PutLifecycleEventHookExecutionStatus`` reported.

S3 (the comparison requests) is moto's standalone server. moto has no Lambda ``Invoke`` that runs a Python function
without Docker and no ``PutLifecycleEventHookExecutionStatus``, so those two operations are served here by a small
HTTP endpoint (``AWS_ENDPOINT_URL_LAMBDA``, ``AWS_ENDPOINT_URL_CODEDEPLOY``): an invocation is answered by the real
``handler.http.lambda_handler`` of the version it names (the ``live`` alias: ``clf`` version 1 the default; the new
version 7: version 2 the default, as a deployment of ``DefaultModelVersions=clf=2``), each in a process of its own,
and CodeDeploy's call is recorded. The gate refuses a perturbed candidate and passes an identical one.
"""

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
from urllib.parse import parse_qs, unquote, urlparse

import boto3
import numpy as np
import onnxruntime as ort
import pytest

from handler.cli.lambda_context import LocalLambdaContext
from handler.rollout import hook
from tests.integration.conftest import AWS_TEST_ENV
from tests.support.servers import unique_name
from tests.support.shadow_models import classifier_repository, rows

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:oip"
NEW_VERSION = "7"
REQUESTS = 40
HOOK_EVENT = {"DeploymentId": "d-GATE12345", "LifecycleEventHookExecutionId": "hook-execution-gate"}
MARK = "ANSWER "

#: A function version: each line of stdin an event for ``handler.http.lambda_handler``, each answer a stdout line
#: after ``MARK`` (the function's own log and EMF lines share stdout).
HOST = f"""
import json, sys
from handler.cli.lambda_context import LocalLambdaContext
from handler.http import lambda_handler
print({MARK!r} + "ready", flush=True)
for line in sys.stdin:
    answer = lambda_handler(json.loads(line), LocalLambdaContext())
    print({MARK!r} + json.dumps(answer), flush=True)
"""


class FunctionVersion:
    """One version of the function in a process of its own, answering one event at a time."""

    def __init__(self, repository: Path, default_versions: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OIP_ROLLOUT_"))}
        env |= {"MODEL_REPOSITORY": str(repository), "OIP_DEFAULT_VERSIONS": default_versions, "OIP_WARM_UP": "0"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOST], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.lock = threading.Lock()
        assert self._answer() == "ready"

    def _answer(self) -> str:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(MARK):
                return line[len(MARK) :].strip()
        raise AssertionError(f"the function version exited with status {self.process.wait()}")

    def invoke(self, payload: bytes) -> bytes:
        assert self.process.stdin is not None
        with self.lock:
            self.process.stdin.write(json.dumps(json.loads(payload)) + "\n")
            self.process.stdin.flush()
            return self._answer().encode()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


class Endpoint(BaseHTTPRequestHandler):
    """Lambda's ``Invoke`` (REST) and CodeDeploy's ``PutLifecycleEventHookExecutionStatus`` (JSON 1.1)."""

    versions: dict[str, FunctionVersion]
    reports: list[dict[str, Any]]
    invoked: list[str]

    def do_POST(self) -> None:
        payload = self.rfile.read(int(self.headers.get("content-length", 0)))
        target = self.headers.get("x-amz-target", "")
        if target.endswith(".PutLifecycleEventHookExecutionStatus"):
            report = json.loads(payload)
            self.reports.append(report)
            answer = {"lifecycleEventHookExecutionId": report["lifecycleEventHookExecutionId"]}
            return self._send(200, json.dumps(answer).encode(), "application/x-amz-json-1.1")
        url = urlparse(self.path)
        name = unquote(url.path.split("/functions/", 1)[1].rsplit("/invocations", 1)[0])
        qualifier = parse_qs(url.query).get("Qualifier", [None])[0]
        if qualifier is None and name.count(":") == 7:
            name, qualifier = name.rsplit(":", 1)
        if name != FUNCTION or qualifier not in self.versions:
            message = json.dumps({"Type": "User", "message": f"Function not found: {name}:{qualifier}"}).encode()
            return self._send(404, message, "application/json", {"x-amzn-errortype": "ResourceNotFoundException"})
        self.invoked.append(qualifier)
        return self._send(200, self.versions[qualifier].invoke(payload), "application/json")

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {"content-type": content_type, "content-length": str(len(body)), **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def endpoint(repository: Path) -> Iterator[tuple[str, type[Endpoint]]]:
    """The Lambda and CodeDeploy endpoint on 127.0.0.1 (a port it chose itself), with the two versions."""
    versions = {"live": FunctionVersion(repository, "clf=1"), NEW_VERSION: FunctionVersion(repository, "clf=2")}
    handler = type("Handler", (Endpoint,), {"versions": versions, "reports": [], "invoked": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        for version in versions.values():
            version.close()


def comparison_lines(data: np.ndarray) -> str:
    requests = [
        {"model": "clf", "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row.tolist()}]}
        for row in data
    ]
    return "".join(json.dumps(request) + "\n" for request in requests)


def agreeing_by_onnxruntime(model: Path, data: np.ndarray) -> int:
    one, two = (ort.InferenceSession(str(model / v / "model.onnx"), providers=["CPUExecutionProvider"]) for v in "12")
    return int((one.run(["label"], {"input": data})[0] == two.run(["label"], {"input": data})[0]).sum())


def run_hook(tmp_path: Path, moto: str, perturbed: bool, monkeypatch: pytest.MonkeyPatch):
    """The hook's lambda_handler on a CodeDeploy event; (its answer, CodeDeploy's reports, the invoked qualifiers,
    the agreement by onnxruntime)."""
    repository = tmp_path / "models"
    classifier_repository(repository, "clf", perturbed)
    data = rows(REQUESTS, seed=31)
    bucket = unique_name("gate")
    s3 = boto3.client("s3", endpoint_url=moto, region_name="us-east-1", **_credentials())
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="requests.jsonl", Body=comparison_lines(data).encode())
    with endpoint(repository) as (url, handler):
        for key, value in AWS_TEST_ENV.items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", moto)  # S3
        monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_CODEDEPLOY", url)
        monkeypatch.setenv("OIP_ROLLOUT_TARGET", f"{FUNCTION}:{NEW_VERSION}")
        monkeypatch.setenv("OIP_ROLLOUT_CHECKS", json.dumps([{"name": "ready", "path": "/v2/health/ready"}]))
        monkeypatch.setenv("OIP_ROLLOUT_AGREEMENT_REQUESTS", str(REQUESTS))
        monkeypatch.setenv("OIP_ROLLOUT_MIN_AGREEMENT", "0.99")
        monkeypatch.setenv("OIP_ROLLOUT_COMPARISON_S3_URI", f"s3://{bucket}/requests.jsonl")
        monkeypatch.setenv("OIP_ROLLOUT_ALIAS", "live")
        answer = hook.lambda_handler(HOOK_EVENT, LocalLambdaContext())
        return answer, list(handler.reports), list(handler.invoked), agreeing_by_onnxruntime(repository / "clf", data)


def _credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": AWS_TEST_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"],
        "aws_session_token": AWS_TEST_ENV["AWS_SESSION_TOKEN"],
    }


def reported(status: str) -> list[dict[str, str]]:
    return [
        {
            "deploymentId": HOOK_EVENT["DeploymentId"],
            "lifecycleEventHookExecutionId": HOOK_EVENT["LifecycleEventHookExecutionId"],
            "status": status,
        }
    ]


def test_the_hook_refuses_a_perturbed_version_and_reports_failed(
    tmp_path: Path, moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer, reports, invoked, agreeing = run_hook(tmp_path, moto_server, True, monkeypatch)
    assert 0 < agreeing < REQUESTS  # some rows change class, most do not
    failure = f"agreement gate: {agreeing} of {REQUESTS} requests agree ({agreeing / REQUESTS:.4f} < 0.99)"
    assert answer == {"status": "Failed", "failures": [failure]}
    assert reports == reported("Failed")
    # the check through the new version, then each request through the alias and the new version
    assert invoked == [NEW_VERSION] + ["live", NEW_VERSION] * REQUESTS


def test_the_hook_passes_an_identical_version_and_reports_succeeded(
    tmp_path: Path, moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer, reports, invoked, agreeing = run_hook(tmp_path, moto_server, False, monkeypatch)
    assert agreeing == REQUESTS
    assert answer == {"status": "Succeeded", "failures": []}
    assert reports == reported("Succeeded")
    assert invoked == [NEW_VERSION] + ["live", NEW_VERSION] * REQUESTS
