"""Copy a ``gs://bucket/prefix`` model repository to local disk once, at start-up (Vertex AI's
``AIP_STORAGE_URI``). Needs the ``gcs`` extra (google-cloud-storage); credentials come from the
environment as google-auth finds them (on Vertex: the serving service account).
"""

from __future__ import annotations

import os
from pathlib import Path

from adapters.errors import InvalidInput
from adapters.repository.object_uri import local_copy, local_target, parse_object_uri


def parse_gcs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/some/prefix`` -> ``("bucket", "some/prefix/")``."""
    return parse_object_uri(uri, "gs")


def download_gcs_repository(uri: str, destination: Path | None = None, client: object | None = None) -> Path:
    """Download every object under the prefix, keeping relative paths and update times; returns the root. A name
    that would leave the local copy stops the copy (``local_target``)."""
    bucket, prefix = parse_gcs_uri(uri)
    destination = destination or local_copy(uri)
    marker = destination / ".complete"
    if marker.exists():
        return destination
    if client is None:
        try:
            from google.cloud import storage  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise InvalidInput(
                f"{uri}: reading a gs:// repository needs google-cloud-storage (pip install 'oip-serverless[gcs]')"
            ) from None
        client = storage.Client()
    found = 0
    for blob in client.list_blobs(bucket, prefix=prefix):  # type: ignore[attr-defined]
        target = local_target(destination, blob.name, prefix)
        if target is None:
            continue
        blob.download_to_filename(str(target))
        if blob.updated is not None:  # createTime of a version comes from the repository, not the copy
            os.utime(target, (blob.updated.timestamp(), blob.updated.timestamp()))
        found += 1
    if not found:
        raise InvalidInput(f"no objects under {uri}")
    marker.touch()
    return destination
