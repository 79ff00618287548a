"""``oip serve --workers N``: one port, N processes forked from a supervisor that imported the app's modules
(handler/cli/workers.py), each with its own sessions; SIGTERM drains; a dead worker is replaced, one that cannot
start stops the server. Everything through a real ``oip serve`` process tree on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
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

from handler.protocol.settings import DEMO_REPOSITORY
from tests.conftest import free_port

IRIS = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}]}


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str
    port: int

    def workers(self) -> set[int]:
        """The supervisor's worker processes: forked from it, so with its command line (a spawned worker's is
        ``python -c 'from multiprocessing.spawn import spawn_main; ...'``: none is found then)."""
        supervisor = _cmdline(self.process.pid)
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return {int(pid) for pid in children if _cmdline(int(pid)) == supervisor}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _status(pid: int, field: str) -> str:
    """A field of ``/proc/<pid>/status`` (``Threads``, ``SigCgt``...)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return line.split(":", 1)[1].strip()
    raise KeyError(field)


def _caught(pid: int) -> set[signal.Signals]:
    """The signals a process has a handler for."""
    mask = int(_status(pid, "SigCgt"), 16)
    return {sig for sig in signal.Signals if mask & (1 << (sig - 1))}


def _mapped(pid: int, library: str) -> bool:
    """Whether a shared library whose file name contains ``library`` is loaded in the process."""
    return library in Path(f"/proc/{pid}/maps").read_text()


def _wait_for_workers(served: Served, count: int = 2) -> set[int]:
    deadline = time.monotonic() + 30
    while len(served.workers()) < count:
        assert time.monotonic() < deadline, f"{count} workers did not start: {served.workers()}"
        time.sleep(0.2)
    return served.workers()


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _answers(url: str) -> bool:
    try:
        return httpx.post(f"{url}/v2/models/iris/infer", json=IRIS, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture(scope="module")
def iris_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo iris model alone: each worker loads the repository, so keep it small."""
    root = tmp_path_factory.mktemp("iris-only")
    shutil.copytree(DEMO_REPOSITORY / "iris", root / "iris")
    return root


@contextmanager
def serve(
    repository: Path, *args: str, probe: Callable[[str], bool] = _answers, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """``oip serve`` (in ``env``, default this process's) until ``probe`` (default: an inference) succeeds; killed
    if a test leaves it running."""
    port = free_port()
    command = [sys.executable, "-m", "handler.cli", "serve", "--model-repository", str(repository)]
    command += ["--port", str(port), "--no-access-log", *args]
    environment = {**(os.environ if env is None else env), "OIP_LOG_LEVEL": "warning"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, env=environment)
    served = Served(process, f"http://127.0.0.1:{port}", port)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while not probe(served.url):
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline, "oip serve did not answer within 60 s"
            time.sleep(0.2)
        workers = served.workers()
        yield served
    finally:
        if process.poll() is None:
            workers |= served.workers()
            process.terminate()  # the supervisor stops its workers
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for pid in workers:  # a worker left behind by a failed test must not outlive it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_workers_share_one_port_and_each_serves(iris_repository: Path) -> None:
    with serve(iris_repository, "--workers", "2") as served:
        deadline = time.monotonic() + 30
        while len(served.workers()) < 2:
            assert time.monotonic() < deadline, "two workers did not start"
            time.sleep(0.2)
        workers = served.workers()
        before = {pid: _cpu_ticks(pid) for pid in workers}

        def fresh_connection_infer(_: int) -> int:
            with httpx.Client() as client:  # a new connection each time: the kernel spreads them over workers
                return client.post(f"{served.url}/v2/models/iris/infer", json=IRIS).status_code

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(fresh_connection_infer, range(160)))
        assert statuses == [200] * 160
        used = {pid: _cpu_ticks(pid) - before[pid] for pid in workers}
        assert all(ticks > 0 for ticks in used.values()), f"a worker served nothing: {used}"


def _start_slow_request(port: int) -> tuple[socket.socket, bytes]:
    """An infer request whose headers and half its body are sent (in flight); returns the rest of the body."""
    body = json.dumps(IRIS).encode()
    connection = socket.create_connection(("127.0.0.1", port))
    head = (
        f"POST /v2/models/iris/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    connection.sendall(head + body[: len(body) // 2])
    return connection, body[len(body) // 2 :]


def test_sigterm_lets_requests_in_flight_finish_then_exits_0(iris_repository: Path) -> None:
    with serve(iris_repository, "--workers", "2", "--drain-timeout", "20") as served:
        connections = [_start_slow_request(served.port) for _ in range(4)]
        time.sleep(0.5)  # the workers have read the headers
        served.process.send_signal(signal.SIGTERM)
        time.sleep(1.0)  # the supervisor passed SIGTERM on; the workers are draining
        answers = []
        for connection, rest in connections:
            connection.sendall(rest)
            connection.settimeout(20)
            answers.append(connection.recv(65536).decode(errors="replace"))
            connection.close()
        assert all(answer.startswith("HTTP/1.1 200") for answer in answers), answers
        assert served.process.wait(timeout=30) == 0
        assert not _answers(served.url)


def test_a_killed_worker_is_replaced_and_the_port_keeps_answering(iris_repository: Path) -> None:
    with serve(iris_repository, "--workers", "2") as served:
        deadline = time.monotonic() + 30
        while len(served.workers()) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        victim = min(served.workers())
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not (len(served.workers()) == 2 and victim not in served.workers()):
            assert time.monotonic() < deadline, f"worker {victim} was not replaced: {served.workers()}"
            time.sleep(0.2)
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
                return client.post(f"{served.url}/v2/models/iris/infer", json=IRIS).status_code

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

    grpc_port = free_port()
    with serve(iris_repository, "--workers", "2", "--grpc-port", str(grpc_port)) as served:
        workers = _wait_for_workers(served)
        supervisor = served.process.pid
        assert _status(supervisor, "Threads") == "1"
        assert _mapped(supervisor, "_multiarray_umath"), "numpy was not preloaded in the supervisor"
        assert _mapped(supervisor, "onnxruntime_pybind11_state"), "onnxruntime was not preloaded"
        assert not _mapped(supervisor, "cygrpc")
        assert {signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU} <= _caught(supervisor)
        deadline = time.monotonic() + 30
        while not all(_mapped(pid, "cygrpc") for pid in workers):  # each worker starts its gRPC server
            assert time.monotonic() < deadline, "a worker did not start gRPC"
            time.sleep(0.2)
        for pid in workers:
            assert _mapped(pid, "onnxruntime_pybind11_state")
            assert not {signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU} & _caught(pid)
            assert signal.SIGTERM in _caught(pid)  # uvicorn's own handler: drain, then exit
        client = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        assert all(client.is_server_ready() for _ in range(10))


def test_with_its_telemetry_on_onnxruntime_is_not_fork_safe_after_import() -> None:
    """Why the supervisor keeps onnxruntime out when a deployment turns its telemetry on (``ORT_DISABLE_TELEMETRY=0``):
    its import starts an uploader thread, and a forked child that exits normally then hangs or aborts (joining a
    thread it does not have). The child runs as a deployment does: without the CI variables, with which onnxruntime
    skips its telemetry by itself. If this fails, onnxruntime may be preloaded whatever its telemetry."""
    child = """
import os, signal, sys, time
import numpy
before = len(os.listdir("/proc/self/task"))
import onnxruntime
deadline = time.monotonic() + 10
while len(os.listdir("/proc/self/task")) <= before and time.monotonic() < deadline:
    time.sleep(0.01)  # the thread starts soon after the import returns, not always before: fork once it runs
threads = len(os.listdir("/proc/self/task")) - before
clean = 0
for _ in range(5):  # the child's exit joins a thread it does not have: it hangs or aborts (seen once to get away)
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    deadline = time.monotonic() + 1.5  # a clean exit takes milliseconds
    while not (outcome := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    if not outcome[0]:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    clean += bool(outcome[0] and os.WIFEXITED(outcome[1]) and os.WEXITSTATUS(outcome[1]) == 0)
print(threads, clean)
"""
    quiet = ("CI", "TF_BUILD", "GITHUB_ACTIONS", "ORT_DISABLE_TELEMETRY")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    result = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    threads, clean = result.stdout.split()
    assert int(threads) >= 1, "onnxruntime's import started no thread"
    assert int(clean) < 5, "five forked children exited cleanly: onnxruntime may now be imported before a fork"


def test_with_its_telemetry_off_onnxruntime_is_fork_safe_after_import() -> None:
    """Why the supervisor preloads onnxruntime by default: with ``ORT_DISABLE_TELEMETRY=1`` its import starts no
    thread, and children forked after it open and run a session (with their own intra-op threads) and exit 0,
    five times out of five. Without the CI variables, as a deployment runs."""
    child = """
import os, signal, sys, time
import numpy
import onnxruntime
time.sleep(0.5)  # with telemetry on, the uploader's thread starts by now
threads = len(os.listdir("/proc/self/task"))
clean = 0
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 2
        session = onnxruntime.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
        outputs = session.run(None, {session.get_inputs()[0].name: numpy.ones((1, 4), numpy.float32)})
        sys.exit(0 if outputs else 1)
    deadline = time.monotonic() + 10
    while not (outcome := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    if not outcome[0]:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    clean += bool(outcome[0] and os.WIFEXITED(outcome[1]) and os.WEXITSTATUS(outcome[1]) == 0)
print(threads, clean)
"""
    quiet = ("CI", "TF_BUILD", "GITHUB_ACTIONS")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    env.update(ORT_DISABLE_TELEMETRY="1", OPENBLAS_NUM_THREADS="1")
    model = str(DEMO_REPOSITORY / "iris" / "1" / "model.onnx")
    result = subprocess.run(
        [sys.executable, "-c", child, model], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split() == ["1", "5"], result.stderr


@pytest.mark.parametrize(
    ("telemetry", "loaded"),
    [
        (None, "fastapi,numpy,onnxruntime,uvloop"),
        ("1", "fastapi,numpy,onnxruntime,uvloop"),
        ("0", "fastapi,numpy,uvloop"),
    ],
)
def test_the_preload_starts_no_thread_and_imports_onnxruntime_only_with_its_telemetry_off(
    telemetry: str | None, loaded: str
) -> None:
    """What ``oip serve``'s supervisor imports before forking leaves it single-threaded (OpenBLAS held to one
    thread while numpy loads), with the environment as it was given; onnxruntime is among it unless a deployment
    turned its telemetry on, grpc and websockets never."""
    child = """
import os, sys
from handler.cli.serve import _preload
_preload()
loaded = sorted(m for m in ("numpy", "fastapi", "uvloop", "onnxruntime", "grpc", "websockets") if m in sys.modules)
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
        assert _status(served.process.pid, "Threads") == "1"
        assert not _mapped(served.process.pid, "onnxruntime_pybind11_state")
        deadline = time.monotonic() + 30
        while not all(_mapped(pid, "onnxruntime_pybind11_state") for pid in workers):
            assert time.monotonic() < deadline, "a worker did not import onnxruntime"
            time.sleep(0.2)
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
        assert client.post(f"{served.url}/v2/models/iris/infer", json=IRIS).status_code == 200


def test_a_worker_that_cannot_start_stops_oip_serve_with_uvicorns_startup_failure(iris_repository: Path) -> None:
    """A worker whose app does not start (here its gRPC port is taken) would fail the same way again: the
    supervisor stops every worker and exits 3 (uvicorn's ``STARTUP_FAILURE``) instead of replacing it forever."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        command = [sys.executable, "-m", "handler.cli", "serve", "--model-repository", str(iris_repository)]
        command += ["--port", str(free_port()), "--grpc-port", str(taken.getsockname()[1]), "--workers", "2"]
        result = subprocess.run(command, capture_output=True, timeout=120, env={**os.environ, "OIP_LOG_LEVEL": "info"})
    assert result.returncode == 3, result.stderr.decode()[-2000:]
    assert b"failed to start: stopping" in result.stderr


def test_sighup_replaces_every_worker_and_ttin_ttou_add_and_remove_one(iris_repository: Path) -> None:
    """uvicorn's supervisor's signals: SIGHUP brings fresh workers in and lets the old ones drain, SIGTTIN forks
    one more, SIGTTOU stops one (never the last), SIGUSR1 does nothing; the port answers throughout."""

    def until(condition: Callable[[set[int]], bool], what: str) -> set[int]:
        deadline = time.monotonic() + 30
        while not condition(workers := served.workers()):
            assert time.monotonic() < deadline, f"{what}: {workers}"
            time.sleep(0.2)
        return workers

    with serve(iris_repository, "--workers", "2") as served:
        first = _wait_for_workers(served)
        served.process.send_signal(signal.SIGHUP)
        fresh = until(lambda now: len(now) == 2 and not now & first, "the workers were not replaced")
        assert all(_answers(served.url) for _ in range(10))
        served.process.send_signal(signal.SIGTTIN)
        until(lambda now: len(now) == 3 and fresh < now, "no third worker")
        served.process.send_signal(signal.SIGTTOU)
        until(lambda now: len(now) == 2, "the third worker did not stop")
        served.process.send_signal(signal.SIGUSR1)  # caught and let be, as uvicorn's supervisor does
        assert all(_answers(served.url) for _ in range(10))
        assert served.process.poll() is None


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_client_that_connects_while_oip_serve_starts_waits_and_is_answered(
    iris_repository: Path, workers: str
) -> None:
    """The port listens before ``oip serve`` imports anything heavy (``handler.cli.serve.listen``): the first
    connection is accepted before a worker exists (2 workers) or before onnxruntime is loaded (1), waits in the
    backlog instead of being refused, and its readiness request is answered 200 once a worker serves, models
    loaded. (uvicorn alone binds the port but listens only when a worker starts serving.)"""
    port = free_port()
    command = [sys.executable, "-m", "handler.cli", "serve", "--model-repository", str(iris_repository)]
    command += ["--port", str(port), "--no-access-log", "--workers", workers]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, env={**os.environ, "OIP_LOG_LEVEL": "warning"})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = socket.create_connection(("127.0.0.1", port), timeout=60)
                break
            except ConnectionRefusedError:
                assert process.poll() is None and time.monotonic() < deadline, "oip serve never listened"
                time.sleep(0.005)
        starting = {
            "children": Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split(),
            "onnxruntime": _mapped(process.pid, "onnxruntime_pybind11_state"),
        }
        with client:
            client.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: oip\r\nConnection: close\r\n\r\n")
            answer = client.makefile("rb").readline()
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert starting == {"children": [], "onnxruntime": False}
    finally:
        process.terminate()
        process.wait(timeout=30)
