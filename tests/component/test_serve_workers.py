"""``oip serve --workers N``: one port, N processes forked from a supervisor that imported the app's modules
(handler/cli/workers.py), each with its own sessions; SIGTERM drains; a dead worker is replaced, one that cannot
start stops the server. Everything through a real ``oip serve`` process tree on 127.0.0.1."""

# covers: handler/cli/worker.py
# covers: handler/cli/workers.py
# covers: handler/runtime/loop.py

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from handler.config.settings import DEMO_REPOSITORY
from tests.support import procfs
from tests.support.iris_requests import IRIS_REQUEST, half_sent_request, iris_answered
from tests.support.servers import (
    STARTUP_TIMEOUT,
    Child,
    HeldPort,
    OipServer,
    launch,
    oip_serve,
    serve_command,
    wait_for,
)


def _caught(pid: int) -> set[signal.Signals]:
    """The signals a process has a handler for."""
    mask = int(procfs.status(pid, "SigCgt"), 16)
    return {sig for sig in signal.Signals if mask & (1 << (sig - 1))}


def _mapped(pid: int, library: str) -> bool:
    """Whether a shared library whose file name contains ``library`` is loaded in the process."""
    return library in Path(f"/proc/{pid}/maps").read_text()


def _wait_for_workers(served: OipServer, count: int = 2) -> set[int]:
    return wait_for(lambda: found if len(found := served.workers()) >= count else set(), f"{count} workers")


@dataclass(frozen=True)
class TcpSocket:
    """A row of ``/proc/<pid>/net/tcp``."""

    local_port: int
    remote_port: int
    state: str  # 01 established, 0A listening
    unread: int  # bytes received that no process has read yet
    inode: int


def _tcp(pid: int) -> list[TcpSocket]:
    rows = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    found = []
    for row in rows:
        fields = row.split()
        queues = fields[4].split(":")
        found.append(TcpSocket(int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16), fields[3],
                               int(queues[1], 16), int(fields[9])))  # fmt: skip
    return found


def _counted_models(pid: int) -> set[str]:
    """The models a worker has counted a request of: the keys listed beside its statistics counters file."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        if line.endswith(".counters"):
            keys = Path(line.split(maxsplit=5)[5]).with_suffix(".keys")
            return {row.split("\t")[-1] for row in keys.read_text().splitlines()}
    return set()


def _answers(url: str) -> bool:
    return iris_answered(url, timeout=5)


@contextmanager
def serve(
    repository: Path,
    *args: str,
    probe: Callable[[str], bool] = _answers,
    env: dict[str, str] | None = None,
    grpc: bool = False,
) -> Iterator[OipServer]:
    """``oip serve`` (in ``env``, default this process's) until ``probe`` (default: an inference) succeeds; stopped
    with every worker it started when the block ends."""
    environment = {**(os.environ if env is None else env), "OIP_LOG_LEVEL": "warning"}
    with oip_serve(
        "--model-repository", str(repository), *args, env=environment, grpc=grpc, probe=lambda found: probe(found.url)
    ) as server:
        yield server


def test_workers_share_one_port_and_each_serves(iris_repository: Path) -> None:
    """Fresh connections to the one port reach every worker: each counts iris requests of its own."""
    with serve(iris_repository, "--workers", "2") as served:
        workers = _wait_for_workers(served)

        def fresh_connection_infer(_: int) -> int:
            with httpx.Client() as client:  # a new connection each time: the kernel spreads them over workers
                return client.post(f"{served.url}/v2/models/iris/infer", json=IRIS_REQUEST).status_code

        def every_worker_answered() -> bool:
            with ThreadPoolExecutor(8) as pool:
                assert set(pool.map(fresh_connection_infer, range(16))) == {200}
            return all("iris" in _counted_models(pid) for pid in workers)

        wait_for(every_worker_answered, "a worker answered no request")
        assert served.workers() == workers


def test_sigterm_lets_requests_in_flight_finish_then_exits_0(iris_repository: Path) -> None:
    with serve(iris_repository, "--workers", "2", "--drain-timeout", "20") as served:
        workers = _wait_for_workers(served)
        connections = [half_sent_request(served.port) for _ in range(4)]
        clients = {connection.getsockname()[1] for connection, _ in connections}

        def read_by_workers() -> bool:
            """Each request's connection is accepted by a worker, which has read all that was sent (its head)."""
            owned = set().union(*(procfs.socket_inodes(pid) for pid in workers))
            read = {row.remote_port for row in _tcp(served.pid) if row.local_port == served.port
                    and row.state == "01" and row.unread == 0 and row.inode in owned}  # fmt: skip
            return clients <= read

        wait_for(read_by_workers, "the workers did not read the requests' heads")
        listening = {row.inode for row in _tcp(served.pid) if row.local_port == served.port and row.state == "0A"}
        served.child.popen.send_signal(signal.SIGTERM)
        # A draining worker has closed its listening socket (uvicorn's shutdown) and waits for its requests.
        wait_for(lambda: all(not procfs.socket_inodes(pid) & listening for pid in workers), "the workers did not drain")
        answers = []
        for connection, rest in connections:
            connection.sendall(rest)
            connection.settimeout(20)
            answers.append(connection.recv(65536).decode(errors="replace"))
            connection.close()
        assert all(answer.startswith("HTTP/1.1 200") for answer in answers), answers
        assert served.child.popen.wait(timeout=30) == 0
        assert not _answers(served.url)


def test_a_killed_worker_is_replaced_and_the_port_keeps_answering(iris_repository: Path) -> None:
    with serve(iris_repository, "--workers", "2") as served:
        victim = min(_wait_for_workers(served))
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(now := served.workers()) == 2 and victim not in now, f"worker {victim} was not replaced")
        assert all(_answers(served.url) for _ in range(20))


def test_workers_option_and_its_default_are_in_the_help() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "handler.cli", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    help_text = " ".join(help_text.split())
    assert "--workers" in help_text and "the cores this process may use" in help_text
    assert "--drain-timeout" in help_text


def test_statistics_add_up_across_workers(iris_repository: Path) -> None:
    """Triton's statistics extension counts every worker's requests, whichever worker answers the query."""
    with serve(iris_repository, "--workers", "2") as served:

        def fresh_connection_infer(_: int) -> int:
            with httpx.Client() as client:
                return client.post(f"{served.url}/v2/models/iris/infer", json=IRIS_REQUEST).status_code

        def successes() -> int:
            with httpx.Client() as client:
                stats = client.get(f"{served.url}/v2/models/iris/stats").json()["model_stats"]
            return sum(entry["inference_stats"]["success"]["count"] for entry in stats)

        before = successes()
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(fresh_connection_infer, range(60))) == {200}
        assert {successes() - before for _ in range(10)} == {60}


def test_perf_analyzer_against_the_default_workers(iris_repository: Path) -> None:
    """perf_analyzer reads statistics before and after each window: they must add up across workers."""
    from bench.perf_analyzer import measure, perf_analyzer

    with serve(iris_repository, "--workers", "2") as served:
        result = measure(
            perf_analyzer(), f"127.0.0.1:{served.port}", "iris", "http", concurrency=2, interval_ms=1000, stability=50
        )
    assert result.infer_per_second > 0


def test_workers_are_forked_from_a_single_threaded_supervisor_without_grpc(iris_repository: Path) -> None:
    """The supervisor imported numpy, the app's modules and (telemetry off, the default) onnxruntime (preload) but
    no grpc, and started no thread, so forking it is safe; each worker opens its sessions and serves gRPC itself,
    with the signal handlers of a fresh interpreter rather than the supervisor's."""
    import tritonclient.grpc as triton_grpc

    with serve(iris_repository, "--workers", "2", grpc=True) as served:
        workers = _wait_for_workers(served)
        supervisor = served.pid
        assert procfs.status(supervisor, "Threads") == "1"
        assert _mapped(supervisor, "_multiarray_umath"), "numpy was not preloaded in the supervisor"
        assert _mapped(supervisor, "onnxruntime_pybind11_state"), "onnxruntime was not preloaded"
        assert not _mapped(supervisor, "cygrpc")
        assert {signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU} <= _caught(supervisor)
        # each worker starts its gRPC server
        wait_for(lambda: all(_mapped(pid, "cygrpc") for pid in workers), "a worker did not start gRPC")
        for pid in workers:
            assert _mapped(pid, "onnxruntime_pybind11_state")
            assert not {signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU} & _caught(pid)
            assert signal.SIGTERM in _caught(pid)  # uvicorn's own handler: drain, then exit
        client = triton_grpc.InferenceServerClient(str(served.grpc))
        assert all(client.is_server_ready() for _ in range(10))


#: The end of a child program that defined ``before`` (its threads before importing onnxruntime) and ``child()``:
#: five forks running ``child()``; prints the threads the import started and how many children exited 0 within
#: ``sys.argv[1]`` seconds (one still running then is killed).
FORK_FIVE = """
threads = len(os.listdir("/proc/self/task")) - before
clean = 0
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        child()
    deadline = time.monotonic() + float(sys.argv[1])
    while not (outcome := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    if not outcome[0]:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    clean += bool(outcome[0] and os.WIFEXITED(outcome[1]) and os.WEXITSTATUS(outcome[1]) == 0)
print(threads, clean)
"""


def _fork_five(program: str, seconds: float, env: dict[str, str], *args: str) -> list[int]:
    """Run ``program`` + ``FORK_FIVE`` in a fresh interpreter: [threads the import started, children exited 0]."""
    command = [sys.executable, "-c", program + FORK_FIVE, str(seconds), *args]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [int(word) for word in result.stdout.split()]


def test_with_its_telemetry_on_onnxruntime_starts_a_thread_so_it_is_not_preloaded() -> None:
    """Why the supervisor keeps onnxruntime out when a deployment turns its telemetry on (``ORT_DISABLE_TELEMETRY=0``):
    its import starts an uploader thread (soon after the import returns, not always before: waited for in
    ``/proc/self/task``), and a process with a second thread is not forked from (the supervisor forks its workers
    single-threaded: ``test_workers_are_forked_from_a_single_threaded_supervisor_without_grpc``; a child forked then
    exits by joining a thread it does not have, and hangs or aborts). The interpreter runs as a deployment does:
    without the CI variables, with which onnxruntime skips its telemetry by itself. If this fails, onnxruntime may be
    preloaded whatever its telemetry."""
    program = """
import os, time
import numpy
before = len(os.listdir("/proc/self/task"))
import onnxruntime
deadline = time.monotonic() + 60
while len(os.listdir("/proc/self/task")) <= before and time.monotonic() < deadline:
    time.sleep(0.01)
print(len(os.listdir("/proc/self/task")) - before)
"""
    quiet = ("CI", "TF_BUILD", "GITHUB_ACTIONS", "ORT_DISABLE_TELEMETRY")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    result = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 1, "onnxruntime's import started no thread with its telemetry on"


def test_with_its_telemetry_off_onnxruntime_is_fork_safe_after_import() -> None:
    """Why the supervisor preloads onnxruntime by default: with ``ORT_DISABLE_TELEMETRY=1`` its import starts no
    thread (tests/unit/test_onnxruntime_telemetry.py: the uploader is on only if its store is written during the
    import), and children forked after it open and run a session (with their own intra-op threads) and exit 0,
    five times out of five. Without the CI variables, as a deployment runs."""
    program = """
import os, signal, sys, time
import numpy
before = len(os.listdir("/proc/self/task"))
import onnxruntime


def child():
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    session = onnxruntime.InferenceSession(sys.argv[2], options, providers=["CPUExecutionProvider"])
    outputs = session.run(None, {session.get_inputs()[0].name: numpy.ones((1, 4), numpy.float32)})
    sys.exit(0 if outputs else 1)
"""
    quiet = ("CI", "TF_BUILD", "GITHUB_ACTIONS")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    env.update(ORT_DISABLE_TELEMETRY="1", OPENBLAS_NUM_THREADS="1")
    model = str(DEMO_REPOSITORY / "iris" / "1" / "model.onnx")
    assert _fork_five(program, 60, env, model) == [0, 5]


@pytest.mark.parametrize(
    ("telemetry", "loaded"),
    [
        (None, "numpy,onnxruntime,starlette,uvloop"),
        ("1", "numpy,onnxruntime,starlette,uvloop"),
        ("0", "numpy,starlette,uvloop"),
    ],
)
def test_the_preload_starts_no_thread_and_imports_onnxruntime_only_with_its_telemetry_off(
    telemetry: str | None, loaded: str
) -> None:
    """What ``oip serve``'s supervisor imports before forking leaves it single-threaded (OpenBLAS held to one
    thread while numpy loads), with the environment as it was given; onnxruntime is among it unless a deployment
    turned its telemetry on, grpc, websockets and FastAPI (imported only for the API's documents) never."""
    child = """
import os, sys
from handler.cli.serve import _preload
_preload()
names = ("numpy", "starlette", "fastapi", "uvloop", "onnxruntime", "grpc", "websockets")
loaded = sorted(m for m in names if m in sys.modules)
print(len(os.listdir("/proc/self/task")), ",".join(loaded), os.environ.get("OPENBLAS_NUM_THREADS"))
"""
    quiet = ("OPENBLAS_NUM_THREADS", "ORT_DISABLE_TELEMETRY", "CI", "TF_BUILD", "GITHUB_ACTIONS")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    if telemetry is not None:
        env["ORT_DISABLE_TELEMETRY"] = telemetry
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", loaded, "None"]


def test_with_telemetry_on_the_workers_import_onnxruntime_themselves(iris_repository: Path, tmp_path: Path) -> None:
    """A deployment that turns onnxruntime's telemetry on gets a supervisor without onnxruntime (safe to fork)
    and workers that import it, and serve."""
    quiet = ("CI", "TF_BUILD", "GITHUB_ACTIONS")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    env.update(ORT_DISABLE_TELEMETRY="0", HOME=str(tmp_path))  # the uploader writes its store under $HOME
    with serve(iris_repository, "--workers", "2", env=env) as served:
        workers = _wait_for_workers(served)
        assert procfs.status(served.pid, "Threads") == "1"
        assert not _mapped(served.pid, "onnxruntime_pybind11_state")
        imported = lambda: all(_mapped(pid, "onnxruntime_pybind11_state") for pid in workers)  # noqa: E731
        wait_for(imported, "a worker did not import onnxruntime")
        assert all(_answers(served.url) for _ in range(4))


def test_ready_only_once_every_model_is_loaded() -> None:
    """Polled from the moment the server starts (the supervisor listens before its workers have loaded
    anything), ``/v2/health/ready`` first answers 200, from a worker whose every model is READY and answers:
    no half-loaded repository is ever served."""
    answers: list[int] = []

    def ready(url: str) -> bool:
        try:
            answers.append(httpx.get(f"{url}/v2/health/ready", timeout=30).status_code)
        except httpx.TransportError:
            return False
        return True

    with serve(DEMO_REPOSITORY, "--workers", "2", probe=ready) as served, httpx.Client() as client:
        assert answers == [200]
        index = client.post(f"{served.url}/v2/repository/index", json={}).json()
        assert {row["name"]: row["state"] for row in index} == {"iris": "READY", "tiny_image": "READY"}
        assert client.post(f"{served.url}/v2/models/iris/infer", json=IRIS_REQUEST).status_code == 200


def test_sighup_replaces_every_worker_and_ttin_ttou_add_and_remove_one(iris_repository: Path) -> None:
    """The supervisor's signals (gunicorn's names): SIGHUP brings fresh workers in and lets the old ones drain,
    SIGTTIN forks one more, SIGTTOU stops one (never the last), SIGUSR1 does nothing; the port answers throughout."""

    def until(condition: Callable[[set[int]], bool], what: str) -> set[int]:
        def detail() -> str:
            return f"workers {served.workers()} (first {first}); oip serve's last lines:\n{served.output()[-3000:]}"

        return wait_for(lambda: now if condition(now := served.workers()) else set(), what, detail=detail)

    with serve(iris_repository, "--workers", "2") as served:
        first = _wait_for_workers(served)
        served.child.popen.send_signal(signal.SIGHUP)
        fresh = until(lambda now: len(now) == 2 and not now & first, "the workers were not replaced")
        assert all(_answers(served.url) for _ in range(10))
        served.child.popen.send_signal(signal.SIGTTIN)
        until(lambda now: len(now) == 3 and fresh < now, "no third worker")
        served.child.popen.send_signal(signal.SIGTTOU)
        until(lambda now: len(now) == 2, "the third worker did not stop")
        served.child.popen.send_signal(signal.SIGUSR1)  # caught and let be, as uvicorn's supervisor does
        assert all(_answers(served.url) for _ in range(10))
        assert served.child.popen.poll() is None


def _stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (``T`` in ``/proc/<pid>/task/*/stat``)."""
    try:
        stats = [Path(task, "stat").read_text() for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:  # a thread ended while being read
        return False
    return all(stat.rsplit(")", 1)[1].split()[0] == "T" for stat in stats)


def _connect_while_stopped(child: Child, port: int) -> tuple[socket.socket, dict[str, object]]:
    """A connection to ``port`` made while ``child``'s process group is stopped (SIGSTOP, until every thread of it
    shows it), and what the server was then: its children and whether onnxruntime was loaded. With the server
    stopped, the kernel alone accepts the connection into the listening socket's backlog, so what is seen is what
    the server was when the connection was accepted (a fork pending with the stop is not made before it)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        os.killpg(child.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: _stopped(child.pid), "oip serve did not stop")
            seen = {
                "children": procfs.children(child.pid),
                "onnxruntime": _mapped(child.pid, "onnxruntime_pybind11_state"),
            }
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=60), seen
            except ConnectionRefusedError:
                pass
        finally:
            os.killpg(child.pid, signal.SIGCONT)
        if not child.running() or time.monotonic() > deadline:
            raise child.failure("never listened")
        time.sleep(0.005)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_client_that_connects_while_oip_serve_starts_waits_and_is_answered(
    iris_repository: Path, workers: str
) -> None:
    """The port listens before ``oip serve`` imports anything heavy (``handler.cli.serve.listen``): the first
    connection is accepted before a worker exists (2 workers) or before onnxruntime is loaded (1), waits in the
    backlog instead of being refused, and its readiness request is answered 200 once a worker serves, models
    loaded. (uvicorn alone binds the port but listens only when a worker starts serving.)"""
    held = HeldPort()
    command = serve_command("--model-repository", str(iris_repository), "--port", str(held.port), "--no-access-log",
                            "--workers", workers)  # fmt: skip
    child = launch("oip serve", command, env={**os.environ, "OIP_LOG_LEVEL": "warning", "OIP_METRICS_PORT": "0"})
    try:
        client, starting = _connect_while_stopped(child, held.port)
        with client:
            client.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: oip\r\nConnection: close\r\n\r\n")
            answer = client.makefile("rb").readline()
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert starting == {"children": [], "onnxruntime": False}
    finally:
        child.stop()
        held.close()
