"""``SelectorWaker`` (handler/cli/selector_waker.py): another thread's ``wake`` ends a selector's wait, ``woken`` tells
its end from the selector's other files and reads what woke it, ``stop`` ends the thread and closes the pair."""

from __future__ import annotations

import selectors
import socket
import threading

from handler.cli.selector_waker import SelectorWaker


def test_a_wake_from_another_thread_ends_the_wait_and_stop_ends_the_thread() -> None:
    selector = selectors.DefaultSelector()
    waker = SelectorWaker(selector)
    other, unused = socket.socketpair()
    selector.register(other, selectors.EVENT_READ)
    wakes: list[int] = []
    stopping = threading.Event()

    def wait() -> None:
        while not stopping.is_set():
            for key, _ in selector.select():  # no timeout: only a wake ends it
                assert key.fileobj is not other, "nothing was sent on the other socket"
                if waker.woken(key.fileobj):
                    wakes.append(1)

    thread = threading.Thread(target=wait)
    thread.start()
    waker.wake()
    stopping.set()
    waker.stop(thread)
    assert not thread.is_alive()
    assert wakes, "the wait did not end at the wake"
    assert waker.reader.fileno() == -1 and waker.writer.fileno() == -1
    assert not waker.woken(other)
    selector.close()
    other.close()
    unused.close()


def test_a_wake_after_the_pair_is_closed_is_nothing() -> None:
    selector = selectors.DefaultSelector()
    waker = SelectorWaker(selector)
    thread = threading.Thread(target=lambda: None)
    thread.start()
    waker.stop(thread)
    waker.wake()  # a thread handing over a connection as the worker stops: no error
    selector.close()
