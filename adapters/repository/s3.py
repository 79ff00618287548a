"""Copy an ``s3://bucket/prefix`` model repository to local disk once, at start-up."""

from __future__ import annotations

import os
from pathlib import Path

from adapters.errors import InvalidInput
from adapters.repository.object_uri import local_copy, local_target, parse_object_uri


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> ``("bucket", "some/prefix/")``."""
    return parse_object_uri(uri, "s3")


def download_repository(uri: str, destination: Path | None = None, client: object | None = None) -> Path:
    """Download every object under the prefix, keeping relative paths; returns the local root.

    The local copy goes under ``OIP_CACHE_DIR`` (default: the temp dir, /tmp on Lambda) and is
    reused by later calls in the same container. A key that would leave it stops the copy (``local_target``).
    """
    bucket, prefix = parse_s3_uri(uri)
    destination = destination or local_copy(uri)
    marker = destination / ".complete"
    if marker.exists():
        return destination
    if client is None:
        import boto3

        client = boto3.client("s3")  # honours AWS_ENDPOINT_URL(_S3)
    paginator = client.get_paginator("list_objects_v2")  # type: ignore[attr-defined]
    found = 0
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            target = local_target(destination, item["Key"], prefix)
            if target is None:
                continue
            client.download_file(bucket, item["Key"], str(target))  # type: ignore[attr-defined]
            if "LastModified" in item:  # createTime of a version comes from the repository, not the copy
                os.utime(target, (item["LastModified"].timestamp(), item["LastModified"].timestamp()))
            found += 1
    if not found:
        raise InvalidInput(f"no objects under {uri}")
    marker.touch()
    return destination
