"""``oip invoke``, ``oip --version``, help texts and the gRPC extra hint, each in a real subprocess."""

# covers: handler/cli/errors.py
# covers: handler/cli/invoke.py

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def oip(
    *args: str, cwd: Path = ROOT, prefix: tuple[str, ...] = ("-m", "handler.cli")
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *prefix, *args], cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=120
    )


def test_invoke_prints_the_response_alone_on_stdout() -> None:
    result = oip("invoke", "events/http-api/infer-json.json")
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)  # nothing else on stdout: `oip invoke ev.json | jq` works
    assert response["statusCode"] == 200
    assert json.loads(response["body"])["model_name"] == "iris"
    assert '"_aws"' in result.stderr  # the EMF metrics record went to stderr


def test_invoke_missing_or_non_json_event_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    for name, message in [("nope.json", "no such file"), ("bad.json", "not JSON"), ("list.json", "JSON object")]:
        result = oip("invoke", str(tmp_path / name))
        assert result.returncode == 1 and result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], result.stderr


def test_version() -> None:
    result = oip("--version")
    assert result.returncode == 0 and result.stdout.strip() == "oip 0.1.0"


def test_help_texts_show_the_defaults() -> None:
    serve = oip("serve", "--help").stdout
    text = " ".join(serve.split())
    for option, default in [("OIP_HOST", "127.0.0.1"), ("OIP_PORT", "8000"), ("OIP_GRPC_PORT", "0")]:
        assert re.search(rf"env {option}.{{0,40}}default:? {re.escape(default)}\b", text), (option, text)
    assert "(env OIP_LOG_LEVEL; default: info)" in text and "(env OIP_ACCESS_LOG; default: off)" in text
    batch = " ".join(oip("batch", "--help").stdout.split())
    assert "(default: 256)" in batch and "INPUT.predictions.jsonl" in batch and "env OIP_BATCH_MODEL" in batch


def test_grpc_port_without_grpcio_is_a_one_line_hint() -> None:
    block_grpc = "import sys; sys.modules['grpc'] = None; from handler.cli import main; raise SystemExit(main())"
    result = oip("serve", "--grpc-port", "50999", "--port", "0", prefix=("-c", block_grpc))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'oip-serverless[grpc]'" in lines[0], result.stderr
