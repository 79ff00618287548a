"""handler/runtime/startup.py: the one line of a start-up failure, and who of the workers says it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from adapters.errors import InvalidInput
from handler.config.platform import SAGEMAKER, VERTEX, Platform
from handler.runtime.startup import (
    MODEL_REPOSITORY,
    StartupFailure,
    app_failure,
    check_repository,
    first_to_say,
    repository_failure,
    say_failure,
)


class Writes(io.StringIO):
    """A stream that keeps each write apart, as an unbuffered stderr hands each to the pipe the workers share."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_the_failure_line_is_one_write_with_its_newline() -> None:
    """Workers started together share stderr, unbuffered: a line written in two parts (``print`` writes its newline
    apart) can take another worker's log line inside it."""
    stream = Writes()
    say_failure("oip serve", "model 'm' version 1 failed to load: bad (--exit-on-error false ...)", stream=stream)
    assert stream.calls == ["oip serve: error: model 'm' version 1 failed to load: bad (--exit-on-error false ...)\n"]


def test_a_missing_package_names_the_extra_that_installs_it() -> None:
    failure = repository_failure(ModuleNotFoundError("No module named 'boto3'", name="boto3"), "s3://b/p", "copy")
    assert failure.line("--model-repository, MODEL_REPOSITORY") == (
        "model repository s3://b/p needs boto3, which is not installed: pip install 'oip-serverless[s3]' "
        "(--model-repository, MODEL_REPOSITORY)"
    )
    gcs = repository_failure(ModuleNotFoundError("No module named 'google'", name="google"), "gs://b/p", "copy")
    assert gcs.cause.endswith("needs google-cloud-storage, which is not installed: pip install 'oip-serverless[gcs]'")


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (InvalidInput("no objects under s3://b/p"), "no objects under s3://b/p"),
        (InvalidInput("object key '../x' is not a plain relative path"),
         "cannot copy model repository s3://b/p: object key '../x' is not a plain relative path"),
        (PermissionError(13, "Permission denied", "/cache/x"),
         "cannot copy model repository s3://b/p: Permission denied: /cache/x"),
        (RuntimeError("boom"), "cannot copy model repository s3://b/p: RuntimeError: boom"),
    ],
)  # fmt: skip
def test_a_repository_failure_names_the_repository_once(exc: Exception, cause: str) -> None:
    failure = repository_failure(exc, "s3://b/p", "copy")
    assert (failure.cause, failure.setting) == (cause, MODEL_REPOSITORY)


def test_a_failure_without_a_setting_points_at_the_traceback() -> None:
    assert app_failure(KeyError("x")).line("--model-repository, MODEL_REPOSITORY") == (
        "the server could not be built: KeyError: 'x' (--log-level debug shows the traceback)"
    )


def test_check_repository(tmp_path: Path) -> None:
    check_repository(str(tmp_path))
    with pytest.raises(StartupFailure, match="is not a directory"):
        check_repository(str(tmp_path / "absent"))
    check_repository("s3://bucket/prefix")  # boto3 is installed here


@pytest.mark.parametrize(
    ("platform", "options"),
    [
        (Platform(), "--model-repository, MODEL_REPOSITORY"),
        (Platform(VERTEX), "--model-repository, MODEL_REPOSITORY, AIP_STORAGE_URI"),
        (Platform(SAGEMAKER), "--model-repository, MODEL_REPOSITORY, SageMaker's model data in /opt/ml/model"),
    ],
)
def test_each_platform_names_where_its_repository_is_set(platform: Platform, options: str) -> None:
    assert platform.repository_options() == options
    assert platform.repository_options(None) == options.removeprefix("--model-repository, ")


def test_the_first_to_say_it_says_it(tmp_path: Path) -> None:
    assert first_to_say(str(tmp_path), "banner", "")
    assert not first_to_say(str(tmp_path), "banner", "")
    assert first_to_say(str(tmp_path), "failure", "a", within=60)
    assert not first_to_say(str(tmp_path), "failure", "a", within=60)  # a sibling said it just now
    assert first_to_say(str(tmp_path), "failure", "b", within=60)  # another cause is said
    assert first_to_say(None, "banner", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["said-banner", "said-failure"]
