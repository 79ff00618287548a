"""``oip invoke``, ``oip batch`` and the Lambda init with a repository that is not there: the same one line as
``oip serve`` (handler/runtime/startup.py), once, and no traceback from the commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.servers import STARTUP_TIMEOUT, environment

PLATFORM_VARIABLES = ("OIP_", "MODEL_REPOSITORY", "AIP_", "SAGEMAKER_")


def run(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=STARTUP_TIMEOUT, env=environment(env, PLATFORM_VARIABLES)
    )


def test_oip_invoke_with_a_missing_repository_from_the_environment(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text("{}")
    missing = tmp_path / "nope"
    result = run([sys.executable, "-m", "handler.cli", "invoke", str(event)], {"MODEL_REPOSITORY": str(missing)})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"oip invoke: error: model repository {missing} is not a directory (--model-repository, MODEL_REPOSITORY)"
    ]
    assert result.stdout == ""


def test_oip_batch_with_a_missing_repository(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"inputs": []}\n')
    missing = tmp_path / "nope"
    command = [sys.executable, "-m", "handler.cli", "batch", str(rows), "--model-repository", str(missing)]
    result = run([*command, "--quiet"])
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"oip batch: error: model repository {missing} is not a directory (--model-repository, MODEL_REPOSITORY)"
    ]


def test_the_lambda_init_logs_one_structured_line_and_fails(tmp_path: Path) -> None:
    """A fresh interpreter imports the HTTP handler as Lambda's init does: one JSON log line naming the cause and
    MODEL_REPOSITORY, and the init fails (Lambda reports it) with the same cause."""
    missing = tmp_path / "nope"
    result = run([sys.executable, "-c", "import handler.http"], {"MODEL_REPOSITORY": str(missing)})
    assert result.returncode != 0
    records = [json.loads(line) for line in result.stdout.splitlines()]
    cause = f"model repository {missing} is not a directory"
    assert [(r["level"], r["message"]) for r in records] == [("ERROR", f"{cause} (MODEL_REPOSITORY)")]
    assert records[0]["setting"] == "model_repository"
    assert result.stderr.splitlines()[-1] == f"handler.runtime.startup.StartupFailure: {cause}"
