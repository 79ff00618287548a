"""The servers the tests start: ``oip serve``, tritonserver and moto's standalone server as child processes, and an
app under uvicorn in a thread of the test process (``LiveServer``).

A child listens on a loopback port held for it (``HeldPort``: bound but never listening, so that no other ``bind``
to port 0 is given it, while the server binds it beside the holder), writes its output to a file, is started when
its probe says so within ``STARTUP_TIMEOUT`` (one timeout for every server), and is stopped with its whole process
group when the block ends. A server that exits or is not ready in time fails the test with the last lines it wrote.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import httpx

from tests.support import procfs

if TYPE_CHECKING:
    from fastapi import FastAPI

#: How long any server may take to answer its probe, on a busy 2-core machine.
STARTUP_TIMEOUT = 90.0
#: How long a server may take to stop after SIGTERM before its process group is killed.
STOP_TIMEOUT = 30.0
#: How many of a server's last output lines a failure shows.
TAIL_LINES = 40
POLL_SECONDS = 0.1
LOOPBACK = "127.0.0.1"
T = TypeVar("T")


class ServerFailed(RuntimeError):
    """A server exited or was not ready in time; the message ends with its last lines of output."""


class HeldPort:
    """A loopback port bound with ``SO_REUSEADDR`` and ``SO_REUSEPORT`` and never listening, until ``close``.

    The kernel gives a held port to no other ``bind`` to port 0; a server told to listen on it binds beside the
    holder (uvicorn, gRPC, werkzeug and tritonserver set ``SO_REUSEADDR``), and connections go to the listener
    only. Held for a server's whole life, the port stays its own across restarts."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self.socket.bind((LOOPBACK, 0))
        self.port: int = self.socket.getsockname()[1]

    def close(self) -> None:
        self.socket.close()

    def __enter__(self) -> HeldPort:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@dataclass
class Child:
    """A server process in a session of its own, its stdout and stderr in ``output``."""

    name: str
    popen: subprocess.Popen[bytes]
    output: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def text(self) -> str:
        """Everything it wrote so far."""
        return self.output.read_text(errors="replace")

    def failure(self, what: str) -> ServerFailed:
        lines = self.text().splitlines()[-TAIL_LINES:]
        return ServerFailed(f"{self.name} {what}; its last lines ({self.output}):\n" + "\n".join(lines))

    def wait_ready(self, probe: Callable[[], bool], timeout: float = STARTUP_TIMEOUT) -> None:
        """Poll ``probe`` until it is true; ``ServerFailed`` if the process exits first or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise self.failure(f"exited with status {self.popen.returncode} before it was ready")
            if probe():
                return
            if time.monotonic() > deadline:
                raise self.failure(f"was not ready within {timeout:.0f} s")
            time.sleep(POLL_SECONDS)

    def stop(self, graceful: bool = True) -> int:
        """SIGTERM (unless not ``graceful``) and a wait of ``STOP_TIMEOUT``, then SIGKILL to whatever is left of
        its process group (workers, backend stubs); its exit status."""
        if graceful and self.running():
            self.popen.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        return self.popen.wait(timeout=STOP_TIMEOUT)


def wait_for(
    condition: Callable[[], T], what: str, timeout: float = STARTUP_TIMEOUT, detail: Callable[[], object] = str
) -> T:
    """Poll ``condition`` until it returns something true, and return that; AssertionError saying ``what`` did not
    happen (with the last value, and ``detail()`` where given) once ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what} (within {timeout:.0f} s; last seen: {value!r}) {detail()}"
        time.sleep(POLL_SECONDS)
    return value


def _output_file(name: str) -> Path:
    """A new file under the temporary directory's ``oip-test-servers/`` (where files a day old are removed)."""
    directory = Path(tempfile.gettempdir()) / "oip-test-servers"
    directory.mkdir(exist_ok=True)
    for old in directory.glob("*.log"):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > 86_400:
                old.unlink()
    handle, path = tempfile.mkstemp(prefix=re.sub(r"\W+", "-", name) + "-", suffix=".log", dir=directory)
    os.close(handle)
    return Path(path)


def launch(
    name: str,
    command: list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    output: Path | None = None,
) -> Child:
    """Start ``command`` in a session of its own (``env`` default: this process's), output appended to ``output``
    (default: a new file under the temporary directory's ``oip-test-servers/``)."""
    output = output or _output_file(name)
    with output.open("ab") as sink:
        popen = subprocess.Popen(
            command, env=dict(os.environ if env is None else env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=sink,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return Child(name, popen, output)


@contextmanager
def running(
    name: str,
    command: list[str],
    probe: Callable[[Child], bool],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[Child]:
    """``launch``, wait until ``probe`` is true, and stop the server when the block ends."""
    child = launch(name, command, env=env, cwd=cwd)
    try:
        child.wait_ready(lambda: probe(child))
        yield child
    finally:
        child.stop()


def environment(env: Mapping[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment without the variables whose names start with ``drop``, updated with ``env``."""
    return {k: v for k, v in os.environ.items() if not (drop and k.startswith(drop))} | dict(env or {})


def http_ok(url: str, timeout: float = 5.0) -> bool:
    """Whether a GET of ``url`` answers 200."""
    try:
        return httpx.get(url, timeout=timeout).status_code == 200
    except httpx.TransportError:
        return False


def grpc_ready(address: str, live: bool = False) -> bool:
    """Whether the V2 gRPC service at ``address`` says it is ready (or ``live``), asked with tritonclient."""
    import tritonclient.grpc as triton_grpc
    from tritonclient.utils import InferenceServerException

    client = triton_grpc.InferenceServerClient(address)
    try:
        return bool(client.is_server_live(client_timeout=5) if live else client.is_server_ready(client_timeout=5))
    except InferenceServerException:
        return False
    finally:
        client.close()


def serve_command(*args: str) -> list[str]:
    """``oip serve ARGS`` with this interpreter."""
    return [sys.executable, "-m", "handler.cli", "serve", *args]


@dataclass(frozen=True)
class OipServer:
    """A running ``oip serve``: where it listens, and what ``/proc`` says of its process (with one worker, the
    server itself; else the supervisor, whose ``workers`` serve)."""

    child: Child
    port: int
    grpc_port: int | None
    metrics_port: int | None = None

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def address(self) -> str:
        """127.0.0.1:port, as tritonclient takes it."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def grpc(self) -> str | None:
        return f"{LOOPBACK}:{self.grpc_port}" if self.grpc_port else None

    def output(self) -> str:
        """Everything it wrote so far."""
        return self.child.text()

    def workers(self) -> set[int]:
        """The worker processes its supervisor forked and has not reaped (none with ``--workers 1``)."""
        return procfs.workers(self.pid)

    def rss(self) -> int:
        """Resident memory now, in bytes."""
        return procfs.rss(self.pid)

    def peak_rss(self) -> int:
        """The most resident memory so far, in bytes."""
        return procfs.peak_rss(self.pid)

    def cpu_seconds(self) -> float:
        """User and system CPU time so far."""
        return procfs.cpu_seconds(self.pid)

    def open_files(self) -> int:
        return procfs.open_files(self.pid)


def ready(server: OipServer) -> bool:
    """``/v2/health/ready`` answers 200, and so does the gRPC service's readiness when it has one."""
    return http_ok(f"{server.url}/v2/health/ready") and (server.grpc is None or grpc_ready(server.grpc))


def live(server: OipServer) -> bool:
    """``/v2/health/live`` answers 200, and so does the gRPC service's liveness when it has one (a repository
    with a model that cannot load is live but never ready)."""
    return http_ok(f"{server.url}/v2/health/live") and (server.grpc is None or grpc_ready(server.grpc, live=True))


@contextmanager
def oip_serve(
    *args: str,
    env: Mapping[str, str] | None = None,
    drop: tuple[str, ...] = (),
    grpc: bool = False,
    workers: int | None = None,
    access_log: bool | None = False,
    log_level: str | None = None,
    metrics: bool = False,
    probe: Callable[[OipServer], bool] = ready,
    prefix: tuple[str, ...] = (),
) -> Iterator[OipServer]:
    """``oip serve ARGS`` on a held port (and a gRPC port with ``grpc``, a metrics port with ``metrics``, else
    metrics off: ``OIP_METRICS_PORT``), with ``--workers`` when given (else its default, the cores it may use),
    ``--no-access-log`` unless ``access_log`` says otherwise (None: neither flag), ``--log-level`` when given, in
    ``environment(env, drop)``, run through ``prefix`` when given (e.g. ``("taskset", "-c", "0")``), until
    ``probe`` is true."""
    with contextlib.ExitStack() as held:
        port = held.enter_context(HeldPort()).port
        grpc_port = held.enter_context(HeldPort()).port if grpc else None
        metrics_port = held.enter_context(HeldPort()).port if metrics else None
        flags = ["--port", str(port), *(["--grpc-port", str(grpc_port)] if grpc_port else [])]
        flags += ["--workers", str(workers)] if workers else []
        flags += [] if access_log is None else ["--access-log" if access_log else "--no-access-log"]
        flags += ["--log-level", log_level] if log_level else []
        variables = environment(env, drop) | {"OIP_METRICS_PORT": str(metrics_port or 0)}
        child = launch("oip serve", [*prefix, *serve_command(*flags, *args)], env=variables)
        server = OipServer(child, port, grpc_port, metrics_port)
        try:
            child.wait_ready(lambda: probe(server))
            yield server
        finally:
            child.stop()


@contextmanager
def moto_server(
    env: Mapping[str, str] | None = None, drop: tuple[str, ...] = (), cwd: Path | None = None
) -> Iterator[str]:
    """moto's standalone server (S3, SQS, ... over HTTP, from its tool venv) until it answers, in
    ``environment(env, drop)`` and ``cwd`` when given (e.g. ``MOTO_RECORDER_FILEPATH`` for its request recorder);
    its URL."""
    from scripts.tool_env import executable

    with HeldPort() as held:
        url = f"http://{LOOPBACK}:{held.port}"
        command = [executable("moto", "moto_server"), "-p", str(held.port), "-H", LOOPBACK]
        variables = environment(env, drop)
        with running("moto_server", command, lambda _: _answers(f"{url}/moto-api/"), env=variables, cwd=cwd):
            yield url


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=5)
    except httpx.TransportError:
        return False
    return True


def unique_name(prefix: str) -> str:
    """``prefix`` with a suffix of its own (S3 bucket and SQS queue names: lowercase, digits and hyphens), for
    resources in a server that several tests share."""
    return f"{prefix}-{os.getpid()}-{next(_counter)}-{os.urandom(3).hex()}"


_counter = itertools.count(1)


class LiveServer:
    """An app under uvicorn in a thread of this process, on 127.0.0.1 at a port it chose itself (port 0)."""

    def __init__(self, app: FastAPI) -> None:
        import uvicorn

        self.port = 0
        self.server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=0, log_level="warning"))
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.server.run()
        except BaseException as exc:  # shown by start()
            self.failed = exc

    @property
    def url(self) -> str:
        """127.0.0.1:port, as tritonclient takes it."""
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ServerFailed(f"uvicorn did not start within {STARTUP_TIMEOUT:.0f} s: {self.failed!r}")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=STOP_TIMEOUT)
