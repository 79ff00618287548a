"""``oip serve`` on an ``s3://`` repository that cannot be copied (moto's server, a bucket that does not exist): the
failure is found by the workers, after the fork, and still ends ``oip serve`` with exit code 3 and the cause said
once, with no traceback. (A repository without boto3 installed is refused before the fork by the same check as a
missing directory; it is not run here, as that would need an interpreter without boto3.)"""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.conftest import AWS_TEST_ENV
from tests.support.servers import STARTUP_TIMEOUT, HeldPort, environment, serve_command, unique_name


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_s3_repository_that_cannot_be_copied_stops_oip_serve(moto_server: str, workers: str) -> None:
    uri = f"s3://{unique_name('absent')}/models"
    variables = environment(
        {**AWS_TEST_ENV, "AWS_ENDPOINT_URL": moto_server, "OIP_LOG_LEVEL": "info", "OIP_METRICS_PORT": "0"},
        ("OIP_", "MODEL_REPOSITORY", "AIP_", "SAGEMAKER_", "AWS_PROFILE"),
    )
    with HeldPort() as port:
        command = serve_command("--model-repository", uri, "--port", str(port.port), "--workers", workers)
        result = subprocess.run(command, capture_output=True, text=True, timeout=STARTUP_TIMEOUT, env=variables)
    assert result.returncode == 3, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("oip serve: error:")]
    assert len(said) == 1, result.stderr
    prefix, _, reason = said[0].partition(": An error occurred (NoSuchBucket) when calling the ListObjectsV2 ")
    assert prefix.startswith(f"oip serve: error: cannot copy model repository {uri}: "), said
    assert reason == "operation: The specified bucket does not exist (--model-repository, MODEL_REPOSITORY)"
    assert "Traceback" not in result.stderr
