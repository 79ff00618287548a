"""``str``: a BYTES tensor as a list of UTF-8 strings; "the ``shape`` field represents the number of strings"."""

from __future__ import annotations

from typing import Any

import numpy as np

from handler.codecs.content_types.base import InputCodec, object_array
from handler.codecs.content_types.registry import register_input_codec, register_request_codec
from handler.codecs.content_types.single import SingleInputRequestCodec
from handler.codecs.json_data import utf8_text


def as_text(item: Any) -> str:
    """A BYTES element as text: str as is, bytes decoded as UTF-8."""
    return utf8_text(item, "content type 'str': an element is not valid UTF-8")


def is_list_of(payload: Any, kind: type | tuple[type, ...]) -> bool:
    """A list (or tuple) whose every element is a ``kind``."""
    return isinstance(payload, list | tuple) and all(isinstance(item, kind) for item in payload)


@register_input_codec
class StringCodec(InputCodec):
    """A BYTES tensor <-> ``list[str]``."""

    ContentType = "str"

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return is_list_of(payload, str)

    @classmethod
    def encode_array(cls, payload: Any) -> np.ndarray:
        items = list(payload)
        return object_array([as_text(item) for item in items], (len(items), 1))

    @classmethod
    def decode_array(cls, array: np.ndarray) -> list[str]:
        return [as_text(item) for item in array.ravel()]


@register_request_codec
class StringRequestCodec(SingleInputRequestCodec):
    """A request whose one input is a list of strings."""

    ContentType = "str"
    InputCodec = StringCodec
