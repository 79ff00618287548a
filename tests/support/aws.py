"""AWS as the tests reach it: moto's server with dummy credentials, and the Lambda function run by ``oip invoke`` in
a process of its own against it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3

from tests.support.servers import environment

ROOT = Path(__file__).resolve().parents[2]
AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def aws_environment(moto: str | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without ``OIP_RESULTS_*`` and ``AWS_*``; with the dummy credentials and moto's
    endpoint when ``moto`` is given, and ``extra``."""
    aws = (AWS_TEST_ENV | {"AWS_ENDPOINT_URL": moto}) if moto is not None else {}
    return environment(aws | extra, drop=("OIP_RESULTS_", "AWS_"))


def s3_client(moto: str) -> Any:
    """An S3 client of moto's server, with the dummy credentials (whatever this process's environment says)."""
    return boto3.session.Session(
        aws_access_key_id=AWS_TEST_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=AWS_TEST_ENV["AWS_SESSION_TOKEN"],
        region_name=AWS_TEST_ENV["AWS_DEFAULT_REGION"],
    ).client("s3", endpoint_url=moto)


def oip_invoke(event: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``oip invoke EVENT`` from the project's root in ``env``: its exit status and output."""
    command = [sys.executable, "-m", "handler.cli", "invoke", str(event)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
