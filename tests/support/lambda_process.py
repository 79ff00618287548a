"""The Lambda HTTP handler (``handler.http.lambda_handler``) in a process of its own, which wires its repository
once (handler/runtime): API Gateway HTTP API events made from ``events/http-api/infer-json.json``, each invoked with
a ``LocalLambdaContext`` of the timeout given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EVENT = ROOT / "events" / "http-api" / "infer-json.json"

#: Calls the handler once per event of the JSON list in argv[1], each with ``LocalLambdaContext(timeout_ms=argv[2])``;
#: writes each answer and the time its invocation had left when it was answered to argv[3] (stdout is the EMF's).
SCRIPT = """
import json, sys
from handler.cli.lambda_context import LocalLambdaContext
from handler.http import lambda_handler
results = []
for event in json.loads(open(sys.argv[1]).read()):
    context = LocalLambdaContext(timeout_ms=int(sys.argv[2]))
    answer = lambda_handler(event, context)
    results.append({"answer": answer, "left_ms": context.get_remaining_time_in_millis()})
open(sys.argv[3], "w").write(json.dumps(results))
"""


def http_event(body: dict[str, Any], path: str) -> dict[str, Any]:
    """The HTTP API event of a POST of ``body`` (as JSON) to ``path``."""
    event = json.loads(EVENT.read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["body"] = json.dumps(body)
    return event


@dataclass(frozen=True)
class Invoked:
    """What the process gave: each invocation's answer and the milliseconds it had left then, and its output."""

    answers: list[dict[str, Any]]
    left_ms: list[int]
    stdout: str
    stderr: str


def invoke(
    events: list[dict[str, Any]],
    repository: Path,
    directory: Path,
    timeout_ms: int = 60_000,
    env: Mapping[str, str] | None = None,
    **variables: str,
) -> Invoked:
    """The ``events``, one invocation each, in a fresh process over ``repository`` (warm-up off), in ``env`` (default:
    this process's environment) with ``variables``; its files in ``directory``. It must exit 0."""
    (directory / "events.json").write_text(json.dumps(events))
    environment = {**(os.environ if env is None else env), "MODEL_REPOSITORY": str(repository), "OIP_WARM_UP": "0"}
    command = [sys.executable, "-c", SCRIPT, str(directory / "events.json"), str(timeout_ms)]
    done = subprocess.run(
        [*command, str(directory / "answers.json")],
        env=environment | variables,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((directory / "answers.json").read_text())
    return Invoked([r["answer"] for r in results], [r["left_ms"] for r in results], done.stdout, done.stderr)
