"""What ``/proc`` says of a running ``oip serve``: its workers, the sockets they hold, the ports that listen."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tests.support.servers import children

LISTENING = "0A"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def workers(supervisor: int) -> set[int]:
    """The processes the supervisor forked (with its command line) and has not reaped."""
    command = cmdline(supervisor)
    return {pid for pid in children(supervisor) if cmdline(pid) == command}


def socket_inodes(pid: int) -> set[int]:
    """The sockets among a process's open files (none once it has ended)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def listening(port: int) -> set[int]:
    """The inodes of the sockets listening on ``port`` (IPv4), whoever holds them."""
    found = set()
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == LISTENING:
            found.add(int(fields[9]))
    return found


def group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` is left (zombies aside)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False
