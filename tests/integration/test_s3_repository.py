"""``MODEL_REPOSITORY=s3://bucket/prefix``: copied once to local disk at start-up, over a real S3 API (moto)."""

# covers: adapters/repository/s3.py

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from adapters.errors import InvalidInput
from adapters.repository.object_uri import local_copy
from adapters.repository.s3 import download_repository, parse_s3_uri
from handler.config.settings import DEMO_REPOSITORY, Settings
from handler.runtime.container import build_dataplane
from tests.support.servers import unique_name

pytestmark = pytest.mark.integration


def _upload(bucket: str, prefix: str) -> int:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    count = 0
    for path in DEMO_REPOSITORY.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(DEMO_REPOSITORY).as_posix()}")
            count += 1
    return count


def test_parse_s3_uri() -> None:
    assert parse_s3_uri("s3://b/p/q") == ("b", "p/q/")
    assert parse_s3_uri("s3://b") == ("b", "")
    with pytest.raises(InvalidInput):
        parse_s3_uri("/local/path")


def test_s3_repository_serves_the_models(aws_env: str, tmp_path: Path) -> None:
    bucket = unique_name("models")
    files = _upload(bucket, "prod/repo")
    settings = Settings.from_env({"OIP_CACHE_DIR": str(tmp_path)}, model_repository=f"s3://{bucket}/prod/repo")
    dataplane = build_dataplane(settings)
    assert dataplane.repository.names() == ["iris", "tiny_image"]
    local = dataplane.repository.root
    assert local.is_relative_to(tmp_path)
    assert sum(1 for p in local.rglob("*") if p.is_file() and p.name != ".complete") == files
    # A second start in the same container reuses the copy (no new download).
    uri = f"s3://{bucket}/prod/repo"
    assert download_repository(uri, local_copy(uri, str(tmp_path))) == local


def test_empty_prefix_is_a_clear_error(aws_env: str, tmp_path: Path) -> None:
    bucket = unique_name("empty")
    boto3.client("s3").create_bucket(Bucket=bucket)
    with pytest.raises(InvalidInput, match=f"no objects under s3://{bucket}/none"):
        download_repository(f"s3://{bucket}/none", tmp_path / "copy")
