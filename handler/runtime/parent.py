"""A forked process that ends with its parent: Linux's ``PR_SET_PDEATHSIG`` through ctypes.

gunicorn's workers check their parent's pid on every heartbeat; the kernel's parent-death signal does it without
a poll. ``oip serve``'s workers also notice a closed heartbeat pipe (handler/runtime/heartbeat.py), which covers
the systems without ``prctl``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

#: ``PR_SET_PDEATHSIG`` from <linux/prctl.h>.
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, signum: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``signum`` to this process when ``parent`` (the process that forked it) ends; the
    signal is sent at once if it has already ended. False where ``prctl`` is not available."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signum), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # ended between the fork and the prctl: no signal will come
        os.kill(os.getpid(), signum)
    return True
