"""The documented way to call the IAM-protected endpoint works: the README's botocore snippet, run as a script
against the real app on 127.0.0.1 (no network to AWS), sends a request whose SigV4 signature covers exactly what
arrived (method, path, host, body, date, token), recomputed here with botocore's signer from what the server got."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from handler.config.settings import DEMO_REPOSITORY
from handler.server import build_app
from tests.conftest import LiveServer, make_settings

ROOT = Path(__file__).resolve().parents[2]
#: Where the snippet may live: the README's Lambda section, or the AWS Lambda page of the docs.
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "aws-lambda.md"]
KEY, SECRET, TOKEN = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-example"
REGION = "eu-west-1"
AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/execute-api/aws4_request, "
    r"SignedHeaders=(?P<headers>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def snippet() -> str:
    """The documented Python block that defines ``signed``."""
    for document in DOCUMENTS:
        if not document.exists():
            continue
        for block in re.findall(r"```python\n(.*?)```", document.read_text(), flags=re.DOTALL):
            if "def signed(" in block and "SigV4Auth" in block:
                return block
    raise AssertionError("no SigV4 snippet (a python block defining signed()) in README.md or docs/aws-lambda.md")


class Recorder:
    """ASGI middleware keeping each HTTP request's method, path, query, headers and body as the server got them."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        messages = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        self.requests.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "query": scope["query_string"].decode(),
                "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
                "body": b"".join(m.get("body", b"") for m in messages),
            }
        )

        async def replay() -> dict[str, Any]:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[LiveServer, Recorder]]:
    recorder = Recorder(build_app(make_settings(DEMO_REPOSITORY)))
    live = LiveServer(recorder)  # type: ignore[arg-type]
    live.start()
    yield live, recorder
    live.stop()


def _signature(received: dict[str, Any], url: str, signed_headers: list[str], body: bytes) -> str:
    """The signature botocore makes for the request as received (only the headers it says it signed)."""
    headers = {name: received["headers"][name] for name in signed_headers if name != "host"}
    request = AWSRequest(method=received["method"], url=url, data=body, headers=headers)
    request.context["timestamp"] = received["headers"]["x-amz-date"]
    auth = SigV4Auth(Credentials(KEY, SECRET, TOKEN), "execute-api", REGION)
    return auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)


def test_the_documented_snippet_signs_what_it_sends(server: tuple[LiveServer, Recorder], tmp_path: Path) -> None:
    live, recorder = server
    script = tmp_path / "call.py"
    script.write_text(snippet())
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "API_URL": f"http://{live.url}",
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    before = len(recorder.requests)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("200 "), done.stdout  # the real app answered the inference
    (received,) = recorder.requests[before:]
    assert (received["method"], received["path"]) == ("POST", "/v2/models/iris/infer")
    headers = received["headers"]
    match = AUTHORIZATION.fullmatch(headers["authorization"])
    assert match, headers["authorization"]
    assert (match["key"], match["region"], match["date"]) == (KEY, REGION, headers["x-amz-date"][:8])
    assert headers["x-amz-security-token"] == TOKEN
    signed_headers = match["headers"].split(";")
    assert {"host", "x-amz-date", "x-amz-security-token", "content-type"} <= set(signed_headers)
    url = f"http://{headers['host']}{received['path']}"
    assert _signature(received, url, signed_headers, received["body"]) == match["signature"]
    # the check can fail: the same request with another body, or to another path, has another signature
    other_path = url.replace("iris", "tiny_image")
    assert _signature(received, url, signed_headers, received["body"] + b" ") != match["signature"]
    assert _signature(received, other_path, signed_headers, received["body"]) != match["signature"]
