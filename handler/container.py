"""What one Lambda container (or process) builds once and shares: settings and the loaded data plane.

The HTTP and batch entry points both take the data plane from here, so a function wired to HTTP and queue
events at once loads its models once.
"""

from __future__ import annotations

from functools import cache

from handler.dataplane import DataPlane, build_dataplane
from handler.settings import Settings


@cache
def settings() -> Settings:
    """Settings from the environment, read once."""
    return Settings.from_env()


@cache
def dataplane() -> DataPlane:
    """The data plane over the configured repository, default versions loaded."""
    return build_dataplane(settings())
