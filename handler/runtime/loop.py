"""One event loop per Lambda container, shared by Mangum and the batch handlers.

``asyncio.run`` closes its loop and leaves none behind, which breaks Mangum (it calls
``asyncio.get_event_loop``) and, under Lambda's freeze/thaw, anything holding loop-bound clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def event_loop() -> asyncio.AbstractEventLoop:
    """The thread's current loop, created and installed when there is none (or it was closed)."""
    try:
        loop = asyncio.get_event_loop()
        if not loop.is_closed():
            return loop
    except RuntimeError:
        pass
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on the container's loop (never ``asyncio.run``)."""
    return event_loop().run_until_complete(coroutine)
