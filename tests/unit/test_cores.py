"""handler/config/cores.py on cgroup trees the test writes: v2 ``cpu.max``, v1 ``cfs_quota_us``, none, and what
cannot be read; the cores it gives against this process's affinity, read apart from it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from handler.config.cores import available_cores, cgroup_cpu_limit


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


V1 = ("cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us")


@pytest.mark.parametrize(
    ("files", "limit"),
    [
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "50000 100000\n", V1[0]: "400000\n", V1[1]: "100000\n"}, 0.5),  # v2 first
        ({V1[0]: "250000\n", V1[1]: "100000\n"}, 2.5),
        ({V1[0]: "-1\n", V1[1]: "100000\n"}, None),  # v1: no quota
        ({"cpu.max": "lots\n"}, None),
        ({"cpu.max": "100000 0\n"}, None),
        ({V1[0]: "100000\n", V1[1]: "0\n"}, None),
        ({}, None),
    ],
)
def test_the_cgroup_quota_is_read_from_v2_then_v1(tmp_path: Path, files: dict[str, str], limit: float | None):
    assert cgroup_cpu_limit(_tree(tmp_path, files)) == limit


def test_the_quota_caps_the_affinity_rounded_up(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert available_cores(_tree(tmp_path / "one", {"cpu.max": "100000 100000"})) == 1
    assert available_cores(_tree(tmp_path / "tenth", {"cpu.max": "10000 100000"})) == 1  # at least one
    assert available_cores(_tree(tmp_path / "many", {"cpu.max": "100000000 100000"})) == affinity  # 1000 cores
    assert available_cores(_tree(tmp_path / "none", {"cpu.max": "max 100000"})) == affinity
    assert available_cores(_tree(tmp_path / "v1", {V1[0]: "150000", V1[1]: "100000"})) == min(affinity, 2)
    assert available_cores(tmp_path / "absent") == affinity
