"""glibc's malloc told to keep freed memory for the next request instead of handing it back to the kernel.

By default glibc serves allocations above a threshold (128 KB, raised dynamically up to the largest freed
block) with fresh ``mmap`` regions and trims the heap top above 128 KB: every large request body, simdjson's
parse buffers and the decoded tensors are then new pages, and each new page is a page fault, which is dear under
a microVM (Firecracker, as on AWS Lambda): a large JSON request spends much of its decode in them. With the mmap
threshold at 32 MB (glibc's maximum) and the trim threshold at 64 MB, freed blocks go back to the heap and the
next request reuses them (bench/bench_latency.py; docs/performance.md). The cost is resident memory: up to the
trim threshold of freed memory stays in each arena.

``OIP_MALLOC_KEEP_MB`` (``Settings.malloc_keep_mb``, default 64) sets the trim threshold in MiB (the mmap threshold
is half of it, at most 32 MiB); 0 leaves glibc's defaults. Elsewhere than glibc (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Final

_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
_MMAP_THRESHOLD_MAX: Final = 32 << 20  # glibc's HEAP_MAX_SIZE / 2 on 64-bit


def keep_freed_memory(keep_mb: int = 64) -> bool:
    """Set glibc's trim and mmap thresholds to keep ``keep_mb`` MiB of freed memory; True if set."""
    if keep_mb <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only: musl's mallopt does nothing  # noqa: B018
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    keep = keep_mb << 20
    trimmed = mallopt(_M_TRIM_THRESHOLD, keep)
    return bool(trimmed and mallopt(_M_MMAP_THRESHOLD, min(keep // 2, _MMAP_THRESHOLD_MAX)))
