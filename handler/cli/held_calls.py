"""A listening socket's ``accept`` and a connection's peek, made without letting the interpreter go.

Python's socket methods release the GIL around every system call. A thread that releases it for a call that returns
at once must then wait to take it back while another thread runs Python: up to the switch interval (5 ms) a call.
The thread that accepts a worker's connections (``acceptor.py``) makes two such calls for each, an ``accept`` and a
peek at its first bytes; at the onset of a sudden load, while the event loop runs Python, its pass over the
hundreds of connections opening at once took a few hundred milliseconds, and a health check on a new connection
waited behind it. Made through libc with ctypes' ``PyDLL`` (whose calls keep the GIL), the two cost microseconds.
Neither can block: ``accept`` holds the GIL only on a non-blocking socket, and the peek asks ``MSG_DONTWAIT``. Where
libc has no ``accept4`` (not Linux), the socket methods.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
from typing import Any


def _libc_calls() -> tuple[Any, Any] | None:
    """libc's ``accept4`` and ``recv`` as calls that keep the GIL, or None where libc has no ``accept4``."""
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        accept4, recv = libc.accept4, libc.recv
    except (OSError, AttributeError):
        return None
    accept4.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    accept4.restype = ctypes.c_int
    recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    recv.restype = ctypes.c_ssize_t
    return accept4, recv


_CALLS = _libc_calls() if hasattr(socket, "SOCK_CLOEXEC") else None
_WOULD_BLOCK = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR})


def accept(sock: socket.socket) -> socket.socket:
    """A connection waiting on ``sock``, as ``sock.accept()`` gives it (blocking, not inherited), or its
    ``OSError`` as that raises it (``BlockingIOError`` when none is waiting)."""
    if _CALLS is None or sock.gettimeout() != 0.0:
        return sock.accept()[0]
    fd = _CALLS[0](sock.fileno(), None, None, socket.SOCK_CLOEXEC)
    if fd < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))  # its subclass by the number, as the socket's own calls raise
    return socket.socket(sock.family, sock.type, sock.proto, fileno=fd)


def peek(conn: socket.socket, most: int) -> bytes | None:
    """Up to ``most`` bytes waiting on ``conn``, left there (empty when it has closed or was reset); None when none
    came yet."""
    if _CALLS is None:
        try:
            return conn.recv(most, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError:
            return b""
    buffer = ctypes.create_string_buffer(most)
    count = _CALLS[1](conn.fileno(), buffer, most, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    if count < 0:
        return None if ctypes.get_errno() in _WOULD_BLOCK else b""
    return buffer.raw[:count]
