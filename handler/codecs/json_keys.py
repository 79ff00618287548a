"""Duplicate names in a JSON object are refused: ``{"id": "a", "id": "b"}`` is a 400, not "the last one wins".

RFC 8259 says names within an object SHOULD be unique and that receivers of an object with duplicate names
disagree on what it means; a proxy or a WAF reading the first value while the server reads the last is a
classic way to slip a request past a check. orjson (and simdjson's ``as_dict``) keep the last value silently, so
the parsed document is compared with its text instead of being parsed again:

- Every object in the text has one ``{``, and each of its members one ``:``, outside strings. When the ``{``
  and ``:`` bytes of the whole text are exactly as many as the parsed objects and their (distinct) keys, no key
  was given twice: two ``bytes.count`` (numpy's for a large text) and a walk of the parsed objects that skips
  arrays of numbers or strings (a tensor's data). This is the answer for nearly every request.
- Otherwise (a ``{`` or ``:`` inside a string, an object inside a skipped array, or a duplicate), the two are
  counted again outside strings only, with escapes taken out first, and compared with a walk of everything.
- Only a text that does have a duplicate is parsed once more (the standard library's ``json`` with an
  ``object_pairs_hook``) to name the key in the message.
"""

from __future__ import annotations

import json
from typing import Any, Final

import numpy as np

from adapters.errors import InvalidInput

#: Above this many bytes numpy counts a byte faster than ``bytes.count`` (measured).
_NUMPY_BYTES: Final = 4096
_OPEN: Final = ord("{")
_COLON: Final = ord(":")
_QUOTE: Final = ord('"')


def _tally(document: Any, whole: bool) -> tuple[int, int]:
    """Objects and their keys in a parsed JSON value. Unless ``whole``, an array whose first item is neither an
    object nor an array is left out (a tensor's numbers or strings): an object inside one leaves the parsed count
    short of the text's, and the caller then walks the whole value."""
    objects = keys = 0
    stack = [document]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            objects += 1
            keys += len(value)
            stack.extend([item for item in value.values() if type(item) is dict or type(item) is list])
        elif whole or (value and (type(value[0]) is dict or type(value[0]) is list)):
            stack.extend([item for item in value if type(item) is dict or type(item) is list])
    return objects, keys


def _counts(text: bytes | memoryview) -> tuple[int, int]:
    """``{`` and ``:`` bytes in the whole text."""
    if len(text) < _NUMPY_BYTES:
        return text.count(b"{"), text.count(b":")
    array = np.frombuffer(text, np.uint8)
    return int(np.count_nonzero(array == _OPEN)), int(np.count_nonzero(array == _COLON))


def _counts_outside_strings(text: bytes) -> tuple[int, int]:
    """``{`` and ``:`` bytes outside strings. Escaped backslashes, then escaped quotes, are removed first (left to
    right, as a JSON reader pairs them), so the quotes left are exactly the strings' delimiters, and a byte is
    outside strings when an even number of them come before it."""
    plain = text.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in text else text
    array = np.frombuffer(plain, np.uint8)
    quotes = np.flatnonzero(array == _QUOTE)

    def outside(byte: int) -> int:
        return int(np.count_nonzero(np.searchsorted(quotes, np.flatnonzero(array == byte)) % 2 == 0))

    return outside(_OPEN), outside(_COLON)


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise _Duplicate(key)
        document[key] = value
    return document


def _duplicate_key(text: bytes) -> str | None:
    try:
        json.loads(text, object_pairs_hook=_refuse_duplicates)
    except _Duplicate as found:
        return found.key
    except (ValueError, RecursionError):
        return None
    return None


def _raw(text: bytes | memoryview) -> bytes:
    if isinstance(text, memoryview):
        return text.obj if isinstance(text.obj, bytes) and text.nbytes == len(text.obj) else text.tobytes()
    return text


def counts_match(text: bytes | memoryview, objects: int, keys: int) -> bool:
    """Whether the ``{`` and ``:`` bytes of the whole ``text`` are ``objects`` and ``keys``: when a walk of its
    parsed objects finds as many, no key was given twice."""
    return _counts(_raw(text)) == (objects, keys)


def check_unique_keys(text: bytes | memoryview, document: Any, what: str = "request body") -> None:
    """InvalidInput when an object of the JSON ``text``, parsed as ``document``, gives a name twice."""
    raw = _raw(text)
    objects, keys = _tally(document, whole=False)
    if _counts(raw) == (objects, keys):
        return
    braces, colons = _counts_outside_strings(raw)
    if braces != objects:
        objects, keys = _tally(document, whole=True)
    if colons == keys:
        return
    key = _duplicate_key(raw)
    named = f"the key {key!r}" if key is not None else "a key"
    raise InvalidInput(f"{what} gives {named} twice in one JSON object; names within an object must be unique")
