"""handler/cli/held_calls.py: ``accept`` and ``peek`` answer as the socket's own calls do, keeping the interpreter;
and ``oip serve``'s listening socket accepts a connection once its first bytes are there."""

from __future__ import annotations

import selectors
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from uvicorn import Config

from handler.cli import held_calls
from handler.cli.serve import listen

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libc's accept4 is Linux's")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    yield sock
    sock.close()


def _readable(sock: socket.socket) -> None:
    """Once ``sock`` is readable (a connection waiting on a listener; bytes, or the end, on a connection)."""
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        selector.select()


def _waiting(listener: socket.socket) -> socket.socket:
    """A connection to ``listener`` (the client's end), waiting in its queue."""
    client = socket.create_connection(listener.getsockname())
    _readable(listener)
    return client


def test_accept_gives_a_connection_as_the_socket_does(listener: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        held_calls.accept(listener)
    with _waiting(listener) as client:
        conn = held_calls.accept(listener)
        with conn:
            assert (conn.family, conn.type, conn.proto) == (listener.family, listener.type, listener.proto)
            assert conn.gettimeout() is None, "blocking, as socket.accept gives it"
            assert not conn.get_inheritable()
            assert conn.getpeername() == client.getsockname()
        with _waiting(listener):
            own, _ = listener.accept()  # the socket's own call, for its attributes
            with own:
                assert (own.gettimeout(), own.get_inheritable()) == (None, False)


def test_a_blocking_socket_is_accepted_by_its_own_call() -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as sock,
        socket.create_connection(sock.getsockname()) as client,
        held_calls.accept(sock) as conn,
    ):
        assert conn.getpeername() == client.getsockname()


def test_peek_leaves_the_bytes_and_tells_none_from_closed(listener: socket.socket) -> None:
    with _waiting(listener) as client:
        conn = held_calls.accept(listener)
        with conn:
            assert held_calls.peek(conn, 100) is None, "nothing came yet"
            client.sendall(b"GET /v2 HTTP/1.1\r\n")
            _readable(conn)
            assert held_calls.peek(conn, 100) == b"GET /v2 HTTP/1.1\r\n"
            assert held_calls.peek(conn, 4) == b"GET "
            assert conn.recv(100) == b"GET /v2 HTTP/1.1\r\n", "left there"
            client.close()
            _readable(conn)
            assert held_calls.peek(conn, 100) == b"", "closed"


@linux
def test_the_calls_keep_the_interpreter(listener: socket.socket) -> None:
    """Another thread waits for the interpreter throughout: a call that let it go would let that thread run (for a
    whole switch interval, a second here, before this one could take it back), and its count would move."""
    with _waiting(listener) as client, held_calls.accept(listener) as conn:
        client.sendall(b"GET /v2 HTTP/1.1\r\n")
        _readable(conn)
        runs = [0]
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                runs[0] += 1

        switch = sys.getswitchinterval()
        sys.setswitchinterval(1.0)
        spinner = threading.Thread(target=spin)
        try:
            spinner.start()
            time.sleep(0)  # the spinner takes the interpreter, and gives it back after an interval: it waits now
            before = runs[0]
            for _ in range(3):
                assert held_calls.peek(conn, 100) == b"GET /v2 HTTP/1.1\r\n"
                with pytest.raises(BlockingIOError):
                    held_calls.accept(listener)
            after = runs[0]
        finally:
            stop.set()
            sys.setswitchinterval(switch)
            spinner.join()
    assert after == before


@linux
def test_oip_serve_listens_for_connections_with_their_first_bytes() -> None:
    sock = listen(Config(app=None, host="127.0.0.1", port=0))
    with sock:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT) > 0
