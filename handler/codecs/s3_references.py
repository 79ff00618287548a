"""The ``s3_tensors`` extension's wire: tensors passed by reference to an S3 object instead of by value.

An input whose ``parameters`` name ``s3_uri`` (optionally ``s3_offset`` and ``s3_byte_size``, as Triton's
shared-memory parameters name a region, its offset and size) carries no data: its bytes are in that object, in the
binary extension's layout. A requested output whose ``parameters`` name ``s3_uri`` is written there, and answered
with ``s3_uri`` and ``s3_byte_size`` in place of its data. tritonclient's ``set_shared_memory(region, byte_size,
offset)`` sets Triton's names, which mean the same when the region is an ``s3://`` URI.

The decoders give such an input ``PENDING`` as its data (``handler/inference/s3_tensors.py`` reads it); the
encoders leave out the data of an output whose data is ``STORED``. Where a location may be read or written is
``allowed``'s to say, against the configured prefixes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

import numpy as np

from adapters.errors import InvalidInput

EXTENSION: Final = "s3_tensors"
S3_URI: Final = "s3_uri"
S3_OFFSET: Final = "s3_offset"
S3_BYTE_SIZE: Final = "s3_byte_size"
#: Triton's shared-memory parameters, which tritonclient's public ``set_shared_memory`` sets.
SHM_REGION: Final = "shared_memory_region"
SHM_OFFSET: Final = "shared_memory_offset"
SHM_BYTE_SIZE: Final = "shared_memory_byte_size"
#: Every parameter that belongs to a reference (none of them reaches the model).
REFERENCE_PARAMETERS: Final = frozenset({S3_URI, S3_OFFSET, S3_BYTE_SIZE, SHM_REGION, SHM_OFFSET, SHM_BYTE_SIZE})

#: The data of an input still in S3, and of an output written to S3 (compared by identity).
PENDING: Final = np.empty(0, dtype=np.uint8)
PENDING.flags.writeable = False
STORED: Final = np.empty(0, dtype=np.uint8)
STORED.flags.writeable = False


class Location(NamedTuple):
    """An object (or part of one) in S3."""

    bucket: str
    key: str
    #: The first byte of the tensor in the object, and how many bytes it has (None: to the object's end).
    offset: int = 0
    size: int | None = None

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def is_reference(parameters: Mapping[str, Any] | None) -> bool:
    """Whether a tensor's parameters name an S3 location (``s3_uri``, or an ``s3://`` shared-memory region)."""
    if not parameters:
        return False
    region = parameters.get(SHM_REGION)
    return S3_URI in parameters or (isinstance(region, str) and region.startswith("s3://"))


def _count(what: str, parameters: Mapping[str, Any], names: tuple[str, str]) -> int | None:
    for name in names:
        value = parameters.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"{what}: '{name}' must be a non-negative integer")
        return value
    return None


def parse_uri(what: str, uri: Any) -> tuple[str, str]:
    """``(bucket, key)`` of an ``s3://bucket/key`` URI naming one object; InvalidInput for anything else (no key,
    a key ending in ``/``, an empty, ``.`` or ``..`` segment, control characters or backslashes)."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise InvalidInput(f"{what}: '{S3_URI}' must be an s3://bucket/key URI")
    bucket, _, key = uri[5:].partition("/")
    segments = key.split("/")
    if (
        not bucket
        or not key
        or any(part in ("", ".", "..") for part in segments)
        or "\\" in key
        or not uri.isprintable()
    ):
        raise InvalidInput(
            f"{what}: {uri[:200]!r} is not an s3://bucket/key URI naming one object (no empty, '.' or '..' "
            "segments, no control characters or backslashes)"
        )
    return bucket, key


def location(what: str, parameters: Mapping[str, Any]) -> Location:
    """The location a tensor's parameters name (``what``: ``input 'x'`` or ``output 'y'``)."""
    uri = parameters.get(S3_URI, parameters.get(SHM_REGION))
    bucket, key = parse_uri(what, uri)
    offset = _count(what, parameters, (S3_OFFSET, SHM_OFFSET)) or 0
    size = _count(what, parameters, (S3_BYTE_SIZE, SHM_BYTE_SIZE))
    return Location(bucket, key, offset, size)


def allowed(place: Location, prefixes: Sequence[str]) -> bool:
    """Whether ``place`` lies under one of ``prefixes`` (``s3://bucket/prefix/``, as the settings normalise them)."""
    uri = place.uri
    return any(uri.startswith(prefix) for prefix in prefixes)


def model_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tensor's parameters without those of its reference (which are this server's, not the model's)."""
    return {k: v for k, v in parameters.items() if k not in REFERENCE_PARAMETERS}


class ViewReader(io.RawIOBase):
    """A read-only stream over a memoryview, so that s3transfer uploads an array part by part, never a copy of it
    whole."""

    def __init__(self, data: memoryview) -> None:
        self._data = data
        self._position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        count = min(len(target), len(self._data) - self._position)
        target[:count] = self._data[self._position : self._position + count]
        self._position += count
        return count
