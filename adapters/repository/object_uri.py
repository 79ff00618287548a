"""Object-store repositories (``s3://bucket/prefix``, ``gs://bucket/prefix``): their URIs, and where their objects
go in the local copy."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from urllib.parse import urlparse

from adapters.errors import InvalidInput


def parse_object_uri(uri: str, scheme: str) -> tuple[str, str]:
    """``scheme://bucket/some/prefix`` -> ``("bucket", "some/prefix/")``; InvalidInput for anything else."""
    parsed = urlparse(uri)
    if parsed.scheme != scheme or not parsed.netloc:
        article = "an" if scheme[0] in "aeiosx" else "a"
        raise InvalidInput(f"'{uri}' is not {article} {scheme}://bucket/prefix URI")
    prefix = parsed.path.lstrip("/")
    return parsed.netloc, prefix if not prefix or prefix.endswith("/") else prefix + "/"


def local_copy(uri: str, cache_dir: str | None = None) -> Path:
    """Where the copy of ``uri`` goes: under ``cache_dir`` (``OIP_CACHE_DIR``; None: the temp dir, /tmp on Lambda),
    one directory per URI, so later calls in the same container reuse it."""
    cache = Path(cache_dir or tempfile.gettempdir())
    return cache / "oip-model-repository" / hashlib.sha256(uri.encode()).hexdigest()[:16]


def local_target(destination: Path, key: str, prefix: str) -> Path | None:
    """The local file of object ``key`` under ``prefix``; None for folder markers (keys ending in ``/``).

    A key must name a plain relative path under the prefix (no absolute path, no empty, ``.`` or ``..`` segment,
    no backslash or NUL) whose file resolves inside ``destination``; any other is InvalidInput and stops the copy:
    whoever can write to the bucket must not be able to write anywhere else on this machine.
    """
    relative = key[len(prefix) :]
    if key.startswith(prefix) and (not relative or relative.endswith("/")):
        return None
    parts = relative.split("/")
    root = destination.resolve()
    target = root.joinpath(*parts)
    if (
        not key.startswith(prefix)
        or any(part in ("", ".", "..") or "\\" in part or "\x00" in part for part in parts)
        or not target.resolve().is_relative_to(root)
    ):
        raise InvalidInput(
            f"object key {key!r} is not a plain relative path under {prefix!r} (an absolute path, an empty, '.' "
            "or '..' segment, a backslash or a NUL, or a file outside the local copy): the copy is refused"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    return target
