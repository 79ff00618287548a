"""How many cores this process may use: CPU affinity, capped by the cgroup's CPU quota (``oip serve``'s default
worker count, the admission bound's default)."""

from __future__ import annotations

import math
import os
from pathlib import Path

#: Where the kernel mounts the cgroup file system.
CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_cpu_limit(root: Path = CGROUP_ROOT) -> float | None:
    """The CPU quota of the cgroup mounted at ``root`` (v2 ``cpu.max``, else v1 ``cpu/cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``) in cores, or None when there is none or it cannot be read."""
    try:
        quota, period = (root / "cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError, ZeroDivisionError):
        return None


def available_cores(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The cores this process may use, as a container sees them: CPU affinity, capped by the quota of the cgroup
    mounted at ``cgroup_root`` (rounded up, at least one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpu_limit(cgroup_root)
    if limit is not None and limit > 0:
        cores = min(cores, max(1, math.ceil(limit)))
    return max(1, cores)
