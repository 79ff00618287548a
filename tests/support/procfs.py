"""What ``/proc`` says of a running server process: its children and workers, resident memory now and at its peak,
CPU time, open files, the sockets it holds and the ports that listen."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

LISTENING = "0A"


def children(pid: int) -> list[int]:
    """The processes ``pid`` started and has not reaped; none once it has exited."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


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


def _listening_rows(port: int) -> Iterator[list[str]]:
    """The fields of ``/proc/net/tcp``'s and ``tcp6``'s rows for the sockets listening on ``port``."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == LISTENING:
                yield fields


def listening(port: int) -> set[int]:
    """The inodes of the sockets listening on ``port``, IPv4 and IPv6 (gRPC listens on ``127.0.0.1`` through an
    IPv6 socket, as ``::ffff:127.0.0.1``), whoever holds them."""
    return {int(fields[9]) for fields in _listening_rows(port)}


def accept_queue(port: int) -> int:
    """The connections waiting to be accepted on ``port``'s listening sockets (a listening socket's ``rx_queue``:
    its accept queue)."""
    return sum(int(fields[4].split(":")[1], 16) for fields in _listening_rows(port))


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


def status(pid: int, key: str) -> str:
    """A field of ``/proc/<pid>/status`` (``VmRSS``, ``Threads``, ``SigCgt``...), as written there."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return line.split(":", 1)[1].strip()
    raise KeyError(key)


def rss(pid: int) -> int:
    """Resident memory now, in bytes."""
    return int(status(pid, "VmRSS").split()[0]) * 1024


def peak_rss(pid: int) -> int:
    """The most resident memory so far, in bytes."""
    return int(status(pid, "VmHWM").split()[0]) * 1024


def cpu_seconds(pid: int) -> float:
    """User and system CPU time so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_files(pid: int) -> int:
    """How many file descriptors it holds open."""
    return len(os.listdir(f"/proc/{pid}/fd"))
