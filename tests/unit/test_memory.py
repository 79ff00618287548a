"""glibc's malloc thresholds (handler/runtime/memory.py)."""

from __future__ import annotations

import sys

import pytest

from handler.protocol.settings import Settings
from handler.runtime.memory import keep_freed_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_malloc_thresholds_are_set_unless_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert keep_freed_memory(0) is False
    assert keep_freed_memory(64) is True
    monkeypatch.setenv("OIP_MALLOC_KEEP_MB", "0")
    assert keep_freed_memory(Settings.from_env().malloc_keep_mb) is False
