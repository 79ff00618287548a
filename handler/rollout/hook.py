"""CodeDeploy pre-/post-traffic hook: send known requests through the new function version, check the answers.

SAM's ``DeploymentPreference`` calls this function before traffic shifts to the new version (``PreTraffic``)
and after it has all of it (``PostTraffic``). It invokes the version under deployment (``OIP_ROLLOUT_TARGET``,
the version ARN the template passes) with HTTP API events, compares the answers with what they must be, and
reports ``Succeeded`` or ``Failed`` to CodeDeploy; ``Failed`` rolls the alias back to the old version.

The checks are the demo repository's (iris: setosa and virginica through V2 and V1) unless
``OIP_ROLLOUT_CHECKS`` holds a JSON list of ``{"name", "method", "path", "body", "status", "expect"}``, where
``expect`` maps dotted paths into the JSON answer (``outputs.1.data``) to the values they must hold.
Only the standard library and boto3 (in the Lambda runtime) are imported here; the agreement gate
(handler/rollout/gate.py: the new version's answers against the current alias's, ``OIP_ROLLOUT_AGREEMENT_*``)
is imported only when it is on.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)
logger.setLevel(logging.INFO)

Invoke = Callable[[dict[str, Any]], dict[str, Any]]

IRIS_ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]  # setosa (0), virginica (2)

DEMO_CHECKS: list[dict[str, Any]] = [
    {"name": "server ready", "method": "GET", "path": "/v2/health/ready", "status": 200, "expect": {"ready": True}},
    {
        "name": "iris V2 infer",
        "method": "POST",
        "path": "/v2/models/iris/infer",
        "body": {
            "inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32", "data": IRIS_ROWS}],
            "outputs": [{"name": "label"}],
        },
        "status": 200,
        "expect": {"outputs.0.name": "label", "outputs.0.data": [0, 2]},
    },
    {
        "name": "iris V1 predict",
        "method": "POST",
        "path": "/v1/models/iris:predict",
        "body": {"instances": IRIS_ROWS},
        "status": 200,
        "expect": {"predictions.0.label": [0], "predictions.1.label": [2]},
    },
]


def http_event(method: str, path: str, body: Any = None) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event, as the function receives one behind the API."""
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "user-agent": "oip-rollout-hook"},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
                     "userAgent": "oip-rollout-hook"},
            "requestId": "oip-rollout-hook",
            "routeKey": "$default",
            "stage": "$default",
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }  # fmt: skip


def _lookup(document: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


def run_check(invoke: Invoke, check: dict[str, Any]) -> str | None:
    """None when the answer is right, else what was wrong."""
    name = check.get("name", check["path"])
    response = invoke(http_event(check.get("method", "GET"), check["path"], check.get("body")))
    status = response.get("statusCode")
    if status != check.get("status", 200):
        return f"{name}: status {status}, expected {check.get('status', 200)}: {str(response.get('body'))[:300]}"
    try:
        document = json.loads(response.get("body") or "null")
    except ValueError:
        return f"{name}: the answer is not JSON"
    for dotted, wanted in (check.get("expect") or {}).items():
        try:
            got = _lookup(document, dotted)
        except (KeyError, IndexError, TypeError, ValueError):
            return f"{name}: the answer has no {dotted}"
        if got != wanted:
            return f"{name}: {dotted} is {got!r}, expected {wanted!r}"
    return None


def run_checks(invoke: Invoke, checks: list[dict[str, Any]] | None = None) -> list[str]:
    """Every check's failure (empty when the version answers right)."""
    if checks is None:
        configured = os.environ.get("OIP_ROLLOUT_CHECKS", "").strip()
        checks = json.loads(configured) if configured else DEMO_CHECKS
    failures = []
    for check in checks:
        try:
            failure = run_check(invoke, check)
        except Exception as exc:  # an invoke that fails is a failed check, never a stuck deployment
            failure = f"{check.get('name', check.get('path'))}: {type(exc).__name__}: {exc}"
        if failure is not None:
            failures.append(failure)
    return failures


def lambda_invoker(function: str, client: Any = None) -> Invoke:
    """Invoke ``function`` (a version ARN) synchronously with boto3."""
    if client is None:
        import boto3

        client = boto3.client("lambda")

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        reply = client.invoke(FunctionName=function, Payload=json.dumps(event).encode())
        payload = json.loads(reply["Payload"].read() or b"{}")
        if reply.get("FunctionError"):
            return {"statusCode": None, "body": json.dumps(payload)}
        return payload

    return invoke


def check_and_report(
    event: dict[str, Any], invoke: Invoke, codedeploy: Any, gate: Callable[[], list[str]] | None = None
) -> dict[str, Any]:
    """Run the checks through ``invoke`` (then ``gate``, the agreement gate of handler/rollout/gate.py, when
    given) and report the outcome to CodeDeploy: ``Failed`` also when they cannot run at all (a malformed
    ``OIP_ROLLOUT_CHECKS``, an unreadable comparison object), so a deployment never waits for its hook's timeout."""
    try:
        failures = run_checks(invoke)
        if gate is not None:
            failures += gate()
    except Exception as exc:  # whatever stops the checks fails the rollout; it is logged in full
        logger.exception("rollout checks could not run")
        failures = [f"the checks could not run: {type(exc).__name__}: {exc}"]
    status = "Failed" if failures else "Succeeded"
    for failure in failures:
        logger.error("rollout check failed: %s", failure)
    codedeploy.put_lifecycle_event_hook_execution_status(
        deploymentId=event["DeploymentId"],
        lifecycleEventHookExecutionId=event["LifecycleEventHookExecutionId"],
        status=status,
    )
    return {"status": status, "failures": failures}


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """CodeDeploy's lifecycle hook: check the version under deployment, report Succeeded or Failed."""
    import boto3

    target = os.environ.get("OIP_ROLLOUT_TARGET", "")
    logger.info("checking %s", target)
    gate: Callable[[], list[str]] | None = None
    if os.environ.get("OIP_ROLLOUT_AGREEMENT_REQUESTS", "").strip() not in ("", "0"):
        from handler.rollout import gate as agreement  # numpy and the comparison rules: the pre-traffic hook only

        def compare() -> list[str]:  # inside check_and_report: a malformed setting is reported as Failed too
            settings = agreement.GateSettings.from_environ()
            lambda_client, s3 = boto3.client("lambda"), boto3.client("s3")
            return agreement.gate_failures(settings, target, lambda_client, s3, http_event)

        gate = compare

    return check_and_report(event, lambda_invoker(target), boto3.client("codedeploy"), gate)
