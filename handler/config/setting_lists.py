"""The settings that are lists, parsed from their comma-separated text: ``OIP_DEFAULT_VERSIONS``' ``model=version``
pairs and ``OIP_S3_TENSOR_PREFIXES``' locations."""

from __future__ import annotations

import re

from handler.config.variables import SettingsError

#: A bucket name as S3 accepts it.
_S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def parse_default_versions(text: str) -> dict[str, str]:
    """``OIP_DEFAULT_VERSIONS``: ``model=version`` pairs, comma-separated; SettingsError for anything else."""
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, wanted = item.partition("=")
        if not sep or not name.strip() or not wanted.strip().isdigit():
            raise SettingsError("OIP_DEFAULT_VERSIONS", text, "model=version pairs, comma-separated (iris=2,bert=1)")
        pairs[name.strip()] = wanted.strip()
    return pairs


def checked_default_versions(text: str, variable: str) -> str:
    """``OIP_DEFAULT_VERSIONS`` as given, once it parses."""
    parse_default_versions(text)
    return text


def parse_s3_prefixes(text: str, name: str = "OIP_S3_TENSOR_PREFIXES") -> tuple[str, ...]:
    """``s3://bucket/prefix/`` locations, comma-separated, each ending in ``/`` (one is added); SettingsError for
    anything else (another scheme, no bucket, an empty, ``.`` or ``..`` segment)."""
    prefixes: list[str] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        bucket, _, key = item.removeprefix("s3://").partition("/")
        segments = key.split("/")[:-1] if key.endswith("/") else key.split("/")
        if (
            not item.startswith("s3://")
            or not _S3_BUCKET.fullmatch(bucket)
            or (key and any(part in ("", ".", "..") for part in segments))
            or not item.isprintable()
        ):
            raise SettingsError(name, text, "s3://bucket/prefix/ locations, comma-separated")
        prefixes.append(f"s3://{bucket}/{key}" if not key or key.endswith("/") else f"s3://{bucket}/{key}/")
    return tuple(prefixes)
