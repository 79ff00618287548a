"""Identifiers for answers to requests that carried none."""

from __future__ import annotations

import random
from typing import Final

_VERSION_4: Final = 0x4000 << 64  # the version nibble, as in uuid.uuid4()
_VARIANT: Final = 0x8000 << 48  # RFC 4122's variant bits
_CLEARED: Final = ~((0xF000 << 64) | (0xC000 << 48))


def answer_id() -> str:
    """A random UUID (version 4, RFC 4122's text form), as ``str(uuid.uuid4())`` gives, for about a seventh of
    its cost: the ``random`` module's generator instead of ``os.urandom`` (an id, not a secret). ``random``
    reseeds itself in a forked child, and the Lambda handler reseeds it after a SnapStart restore."""
    text = f"{(random.getrandbits(128) & _CLEARED) | _VERSION_4 | _VARIANT:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
