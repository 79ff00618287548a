"""glibc's malloc thresholds (handler/runtime/memory.py), set in a child process: they cannot be read back, so a
test that set them in the test process could not restore them for the tests after it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from handler.config.settings import Settings
from handler.runtime.memory import keep_freed_memory

#: Sets the thresholds (``sys.argv[1]`` MiB), then mallocs 16 MiB: glibc serves a block above its mmap threshold
#: (128 KiB by default) with an mmap region of its own, one below it from the heap (``[heap]`` in /proc/self/maps).
CHILD = """
import ctypes, sys
from handler.runtime.memory import keep_freed_memory
kept = keep_freed_memory(int(sys.argv[1]))
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
block = libc.malloc(16 << 20)
maps = open("/proc/self/maps").read().splitlines()
low, high = (int(end, 16) for end in next(line for line in maps if line.endswith("[heap]")).split()[0].split("-"))
print(kept, low <= block < high)
"""


def _in_child(keep_mb: int) -> list[str]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(keep_mb)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
@pytest.mark.parametrize(("keep_mb", "expected"), [(64, ["True", "True"]), (0, ["False", "False"])])
def test_a_16_mib_block_comes_from_the_heap_only_with_the_thresholds_set(keep_mb: int, expected: list[str]) -> None:
    assert _in_child(keep_mb) == expected


def test_oip_malloc_keep_mb_0_switches_it_off() -> None:
    assert Settings.from_env({"OIP_MALLOC_KEEP_MB": "0"}).malloc_keep_mb == 0
    assert keep_freed_memory(Settings.from_env({"OIP_MALLOC_KEEP_MB": "0"}).malloc_keep_mb) is False
