"""Lambda events for every route, made with ``sam local generate-event`` and then edited.

    python -m scripts.lambda_events [OUTPUT_DIR]     # default: events/

Writes ``events/<shape>/<route>.json`` for the shapes http-api (payload 2.0), rest-api (payload 1.0) and
alb. ``generate(shape, method, path, body, headers)`` is also used by the tests to make fresh events.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

#: shape -> the ``sam local generate-event`` service and event type.
SAM_EVENTS = {
    "http-api": ("apigateway", "http-api-proxy"),
    "rest-api": ("apigateway", "aws-proxy"),
    "alb": ("alb", "request"),
}

IRIS_ROWS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], dtype=np.float32)


def _binary_iris_body() -> tuple[bytes, dict[str, str]]:
    header = json.dumps(
        {
            "inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32", "parameters": {"binary_data_size": 32}}],
            "outputs": [{"name": "label", "parameters": {"binary_data": True}}],
        },
        separators=(",", ":"),
    ).encode()
    headers = {"content-type": "application/octet-stream", "inference-header-content-length": str(len(header))}
    return header + IRIS_ROWS.tobytes(), headers


def routes() -> dict[str, tuple[str, str, bytes | None, dict[str, str]]]:
    """route name -> (method, path, body, headers)."""
    json_body = json.dumps(
        {"id": "1", "inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32", "data": IRIS_ROWS.tolist()}]}
    ).encode()
    binary_body, binary_headers = _binary_iris_body()
    return {
        "health-live": ("GET", "/v2/health/live", None, {}),
        "health-ready": ("GET", "/v2/health/ready", None, {}),
        "server-metadata": ("GET", "/v2", None, {}),
        "model-metadata": ("GET", "/v2/models/iris", None, {}),
        "model-ready": ("GET", "/v2/models/iris/versions/1/ready", None, {}),
        "infer-json": ("POST", "/v2/models/iris/infer", json_body, {"content-type": "application/json"}),
        "infer-binary": ("POST", "/v2/models/iris/infer", binary_body, binary_headers),
    }


def sam_event(shape: str, method: str, path: str) -> dict[str, Any]:
    """The event ``sam local generate-event`` prints for this shape, method and path."""
    service, kind = SAM_EVENTS[shape]
    command = ["sam", "local", "generate-event", service, kind, "--method", method, "--path", path.lstrip("/")]
    output = subprocess.run(
        command, check=True, capture_output=True, text=True, env={**os.environ, "SAM_CLI_TELEMETRY": "0"}
    ).stdout
    return json.loads(output)


def fill(
    event: dict[str, Any], shape: str, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> dict[str, Any]:
    """Set the request line, headers and body (base64 for binary) of a generated event."""
    base_headers = {"host": "example.execute-api.us-east-1.amazonaws.com", "user-agent": "oip-events"}
    all_headers = {**base_headers, **headers}
    is_binary = body is not None and headers.get("content-type") == "application/octet-stream"
    encoded = base64.b64encode(body).decode() if is_binary and body is not None else (body or b"").decode()
    event["body"] = encoded if body is not None else None
    event["isBase64Encoded"] = is_binary
    event["headers"] = all_headers
    if shape == "http-api":
        event["rawPath"] = path
        event["rawQueryString"] = ""
        event.pop("queryStringParameters", None)
        event.pop("cookies", None)
        event["routeKey"] = "$default"
        event["requestContext"]["http"].update(method=method, path=path)
    elif shape == "rest-api":
        event.update(path=path, httpMethod=method, resource="/{proxy+}", pathParameters={"proxy": path.lstrip("/")})
        event["queryStringParameters"] = None
        event["multiValueQueryStringParameters"] = None
        event["multiValueHeaders"] = {k: [v] for k, v in all_headers.items()}
        event["requestContext"].update(path=f"/prod{path}", httpMethod=method, resourcePath="/{proxy+}", stage="prod")
    else:
        event.update(path=path, httpMethod=method, queryStringParameters={})
    return event


def generate(
    shape: str, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """A fresh event from ``sam local generate-event``, filled in."""
    return fill(sam_event(shape, method, path), shape, method, path, body, headers or {})


def main(output: Path) -> None:
    for shape in SAM_EVENTS:
        (output / shape).mkdir(parents=True, exist_ok=True)
        for name, (method, path, body, headers) in routes().items():
            event = generate(shape, method, path, body, headers)
            (output / shape / f"{name}.json").write_text(json.dumps(event, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "events"))
