"""Content type -> codec, for input codecs and request codecs. Users add their own with
``register_input_codec`` / ``register_request_codec`` (usable as class decorators) or through the
``oip_serverless.codecs`` entry-point group (each entry point names a codec class), read once on first lookup.
"""

from __future__ import annotations

from typing import Final, TypeVar

from handler.codecs.content_types.base import InputCodec, RequestCodec

ENTRY_POINT_GROUP: Final = "oip_serverless.codecs"
#: The built-in content types, in the seed document's order; they are listed first, then users' own.
BUILTIN_ORDER: Final = ("np", "pd", "str", "base64", "datetime")

_INPUT: dict[str, type[InputCodec]] = {}
_REQUEST: dict[str, type[RequestCodec]] = {}
_entry_points_loaded = False

InputT = TypeVar("InputT", bound=type[InputCodec])
RequestT = TypeVar("RequestT", bound=type[RequestCodec])


def register_input_codec(codec: InputT) -> InputT:
    """Make ``codec`` the input codec of its ``ContentType`` (a later registration replaces an earlier one)."""
    if not codec.ContentType:
        raise ValueError(f"{codec.__name__} has no ContentType")
    _INPUT[codec.ContentType] = codec
    return codec


def register_request_codec(codec: RequestT) -> RequestT:
    """Make ``codec`` the request codec of its ``ContentType``."""
    if not codec.ContentType:
        raise ValueError(f"{codec.__name__} has no ContentType")
    _REQUEST[codec.ContentType] = codec
    return codec


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points  # the entry-point scan happens on the first lookup, not at import

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        codec = entry.load()
        if isinstance(codec, type) and issubclass(codec, RequestCodec):
            register_request_codec(codec)
        elif isinstance(codec, type) and issubclass(codec, InputCodec):
            register_input_codec(codec)
        else:
            raise TypeError(f"entry point {entry.name} ({entry.value}) is not a codec class")


def find_input_codec(content_type: str) -> type[InputCodec] | None:
    """The input codec of ``content_type``, or None."""
    _load_entry_points()
    return _INPUT.get(content_type)


def find_request_codec(content_type: str) -> type[RequestCodec] | None:
    """The request codec of ``content_type``, or None."""
    _load_entry_points()
    return _REQUEST.get(content_type)


def _order(content_type: str) -> int:
    return BUILTIN_ORDER.index(content_type) if content_type in BUILTIN_ORDER else len(BUILTIN_ORDER)


def input_content_types() -> list[str]:
    """Every registered input-level content type: the built-ins first, then in registration order."""
    _load_entry_points()
    return sorted(_INPUT, key=_order)


def request_content_types() -> list[str]:
    """Every registered request-level content type: the built-ins first, then in registration order."""
    _load_entry_points()
    return sorted(_REQUEST, key=_order)


def input_codecs() -> list[type[InputCodec]]:
    """Every registered input codec, in the order of ``input_content_types``."""
    return [_INPUT[name] for name in input_content_types()]


def request_codecs() -> list[type[RequestCodec]]:
    """Every registered request codec, in the order of ``request_content_types``."""
    return [_REQUEST[name] for name in request_content_types()]
