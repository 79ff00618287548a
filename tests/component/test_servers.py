"""tests/support/servers.py, the one way the tests start a server: held ports, readiness with the server's own last
lines on failure, and a stop that leaves none of its processes behind."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

import pytest

from tests.support.procfs import children
from tests.support.servers import HeldPort, ServerFailed, launch, running, wait_for

PYTHON = sys.executable


def test_a_held_port_is_given_to_no_other_bind_but_a_server_listens_on_it() -> None:
    with HeldPort() as held:
        others = []
        for _ in range(200):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            others.append(sock)
        assert held.port not in {sock.getsockname()[1] for sock in others}
        for sock in others:
            sock.close()
        with socket.socket() as plain, pytest.raises(OSError):  # no SO_REUSEADDR: refused while held
            plain.bind(("127.0.0.1", held.port))
        with socket.socket() as server:  # as uvicorn, gRPC, werkzeug and tritonserver bind
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", held.port))
            server.listen()
            with socket.create_connection(("127.0.0.1", held.port), timeout=5):
                accepted, _ = server.accept()
                accepted.close()


def test_a_server_that_exits_fails_with_its_last_lines() -> None:
    code = "import sys; print('line one'); print('no model repository at /nowhere', file=sys.stderr); sys.exit(3)"
    with pytest.raises(ServerFailed) as info, running("broken", [PYTHON, "-c", code], lambda _: False):
        pytest.fail("a server that exits is never started")
    assert "broken exited with status 3 before it was ready" in str(info.value)
    assert "line one" in str(info.value) and "no model repository at /nowhere" in str(info.value)


def test_a_server_never_ready_fails_after_the_timeout_with_its_output() -> None:
    child = launch("silent", [PYTHON, "-c", "import time; print('loading', flush=True); time.sleep(60)"])
    try:
        wait_for(lambda: "loading" in child.text(), "the child wrote its line", timeout=30)
        with pytest.raises(ServerFailed, match=r"silent was not ready within 0 s; its last lines .*\nloading"):
            child.wait_ready(lambda: False, timeout=0.2)
    finally:
        assert child.stop() == -signal.SIGTERM
    assert not child.running()


def test_stop_leaves_no_process_of_the_server_behind() -> None:
    """The server exits on SIGTERM but leaves a process of its own running (as a worker or a backend stub might):
    ``stop`` kills that one too."""
    code = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print('up', flush=True); time.sleep(120)"
    )
    with running("leaky", [PYTHON, "-c", code], lambda child: "up" in child.text()) as child:
        grandchild = wait_for(lambda: children(child.pid), "the server's own process started", timeout=30)[0]
        assert not _gone(grandchild)
    assert child.popen.returncode == -signal.SIGTERM
    wait_for(lambda: _gone(grandchild), "the server's own process was killed", timeout=10)


def _gone(pid: int) -> bool:
    """No such process, or one that has exited and waits to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
