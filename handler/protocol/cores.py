"""How many cores this process may use: CPU affinity, capped by the cgroup's CPU quota (``oip serve``'s default
worker count, the admission bound's default)."""

from __future__ import annotations

import math
import os
from pathlib import Path


def _cgroup_cpu_limit() -> float | None:
    """The CPU quota of this process's cgroup (v2 ``cpu.max``, else v1 ``cfs_quota/period``), or None."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period_us = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def available_cores() -> int:
    """The cores this process may use, as a container sees them: CPU affinity, capped by the cgroup quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = _cgroup_cpu_limit()
    if limit is not None:
        cores = min(cores, max(1, math.ceil(limit)))
    return max(1, cores)
