"""``oip serve`` as an operator starts it: a mistake stops it with one line naming the cause and the setting (exit
code 3, no traceback), with one worker or several and on SageMaker and Vertex AI alike; a server that starts says
once what it serves (addresses, processes, limits, every model version with its state)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support import onnx_models
from tests.support.servers import (
    STARTUP_TIMEOUT,
    HeldPort,
    environment,
    launch,
    live,
    oip_serve,
    serve_command,
    wait_for,
)

#: The variables that choose a repository or a platform: the tests give their own.
PLATFORM_VARIABLES = ("OIP_", "MODEL_REPOSITORY", "AIP_", "SAGEMAKER_")
REPOSITORY_OPTIONS = "(--model-repository, MODEL_REPOSITORY)"


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``oip serve ARGS`` expected to stop by itself (bounded by the test servers' start-up timeout), at log level
    info, metrics off unless ``env`` says otherwise."""
    variables = environment({"OIP_LOG_LEVEL": "info", "OIP_METRICS_PORT": "0", **(env or {})}, PLATFORM_VARIABLES)
    return subprocess.run(serve_command(*args), capture_output=True, text=True, timeout=STARTUP_TIMEOUT, env=variables)


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("oip serve: error:")]


@pytest.fixture
def iris_and_corrupt(tmp_path: Path) -> Path:
    """The demo's iris beside a model whose file is not ONNX."""
    root = tmp_path / "repository"
    onnx_models.save(onnx_models.identity("FP32", [-1, 4]), root, "iris")
    corrupt = root / "corrupt" / "1"
    corrupt.mkdir(parents=True)
    (corrupt / "model.onnx").write_bytes(b"this is not an onnx file")
    return root


@pytest.fixture
def port() -> Iterator[int]:
    with HeldPort() as held:
        yield held.port


@pytest.fixture
def taken() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_missing_repository_is_one_line_and_exit_code_3(tmp_path: Path, port: int, workers: str) -> None:
    missing = str(tmp_path / "no-such-dir")
    result = start("--model-repository", missing, "--port", str(port), "--workers", workers)
    assert result.returncode == 3, result.stderr
    line = f"oip serve: error: model repository {missing} is not a directory {REPOSITORY_OPTIONS}"
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""


def test_a_relative_repository_is_named_as_given(tmp_path: Path, port: int) -> None:
    result = subprocess.run(
        serve_command("--model-repository", "./no-such-dir", "--port", str(port)),
        capture_output=True, text=True, timeout=STARTUP_TIMEOUT, cwd=tmp_path,
        env=environment({"OIP_METRICS_PORT": "0"}, PLATFORM_VARIABLES),
    )  # fmt: skip
    assert result.returncode == 3
    assert error_lines(result) == [
        f"oip serve: error: model repository ./no-such-dir is not a directory {REPOSITORY_OPTIONS}"
    ]


@pytest.mark.parametrize(
    ("env", "repository", "options"),
    [
        ({"SAGEMAKER_BIND_TO_PORT": "{port}"}, "/opt/ml/model",
         "(--model-repository, MODEL_REPOSITORY, SageMaker's model data in /opt/ml/model)"),
        ({"AIP_HTTP_PORT": "{port}", "AIP_STORAGE_URI": "{missing}"}, "{missing}",
         "(--model-repository, MODEL_REPOSITORY, AIP_STORAGE_URI)"),
    ],
    ids=["sagemaker", "vertex"],
)  # fmt: skip
def test_a_platforms_repository_names_the_platforms_setting(
    tmp_path: Path, port: int, env: dict[str, str], repository: str, options: str
) -> None:
    missing = str(tmp_path / "no-such-dir")
    assert not Path("/opt/ml/model").exists()
    values = {name: value.format(port=port, missing=missing) for name, value in env.items()}
    result = start(env=values)
    assert result.returncode == 3, result.stderr
    where = repository.format(missing=missing)
    assert result.stderr.splitlines() == [f"oip serve: error: model repository {where} is not a directory {options}"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_taken_http_port_names_the_port_and_the_option(taken: int, workers: str) -> None:
    result = start("--port", str(taken), "--workers", workers)
    assert result.returncode == 3
    assert result.stderr.splitlines() == [
        f"oip serve: error: cannot serve HTTP on 127.0.0.1:{taken}: Address already in use "
        "(--port PORT or OIP_PORT moves it)"
    ]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_taken_grpc_port_names_the_port_and_the_option(taken: int, port: int, workers: str) -> None:
    result = start("--port", str(port), "--grpc-port", str(taken), "--workers", workers)
    assert result.returncode == 3
    assert result.stderr.splitlines() == [
        f"oip serve: error: cannot serve gRPC on 127.0.0.1:{taken}: Address already in use "
        "(--grpc-port 0 turns gRPC off, --grpc-port PORT or OIP_GRPC_PORT moves it)"
    ]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_model_that_does_not_load_stops_the_server_with_one_line(
    iris_and_corrupt: Path, port: int, workers: str
) -> None:
    """Triton's ``--exit-on-error`` (on by default): a model file that is not ONNX stops ``oip serve`` with exit
    code 3 and one line naming the model, its reason and the option that serves the others instead."""
    result = start("--model-repository", str(iris_and_corrupt), "--port", str(port), "--workers", workers)
    assert result.returncode == 3, result.stderr
    [line] = error_lines(result)
    assert line.startswith("oip serve: error: model 'corrupt' version 1 failed to load: "), line
    assert line.endswith("(--exit-on-error false or OIP_EXIT_ON_ERROR=false serves the other models)")
    assert "Traceback" not in result.stderr and "Application startup complete" not in result.stderr


def test_every_model_that_does_not_load_is_counted_in_the_line(iris_and_corrupt: Path, port: int) -> None:
    (iris_and_corrupt / "broken" / "1").mkdir(parents=True)
    (iris_and_corrupt / "broken" / "1" / "model.onnx").write_bytes(b"nor is this")
    result = start("--model-repository", str(iris_and_corrupt), "--port", str(port), "--workers", "1")
    assert result.returncode == 3, result.stderr
    [line] = error_lines(result)
    assert "failed to load" in line and "(and 1 more model version)" in line, line


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("off", [("--exit-on-error", "false"), ("--exit-on-error", "0")])
def test_with_exit_on_error_off_a_model_that_does_not_load_is_unavailable_in_the_start_up_log(
    iris_and_corrupt: Path, workers: int, off: tuple[str, str]
) -> None:
    """``--exit-on-error false``: a model file that is not ONNX leaves that model unavailable, not the server: the
    start-up log says so once, beside the model that serves, with no traceback."""
    with oip_serve("--model-repository", str(iris_and_corrupt), *off, workers=workers, probe=live, env={
        "OIP_LOG_LEVEL": "info"}, drop=PLATFORM_VARIABLES) as server:  # fmt: skip
        wait_for(lambda: server.child.text().count("Application startup complete") == workers, "every worker serves")
        assert httpx.get(f"{server.url}/v2/models/iris/ready").status_code == 200
        output = server.child.text()
    assert output.count("model iris version 1: READY") == 1, output
    assert output.count("model corrupt version 1: UNAVAILABLE: model 'corrupt' version 1 failed to load: ") == 1
    assert "Traceback" not in output


def test_the_start_up_log_says_what_runs(port: int) -> None:
    """Addresses (HTTP, gRPC, metrics), workers and the supervisor's pid, the main limits, each model version's
    state: once, though two workers start."""
    with HeldPort() as grpc, HeldPort() as metrics:
        flags = ["--port", str(port), "--grpc-port", str(grpc.port), "--metrics-port", str(metrics.port)]
        command = [*flags, "--workers", "2", "--max-body-bytes", "1048576", "--max-inflight", "7"]
        variables = environment({"OIP_LOG_LEVEL": "info"}, PLATFORM_VARIABLES)
        with serving(command, variables, 2) as (pid, output):
            pass
    assert output.count(
        f"serving http://127.0.0.1:{port}, gRPC on 127.0.0.1:{grpc.port}, metrics on "
        f"http://127.0.0.1:{metrics.port}/metrics; 2 workers, supervisor pid {pid}"
    ) == 1, output  # fmt: skip
    assert output.count(
        "limits per worker: body 1 MiB (--max-body-bytes), 7 inference requests in flight (--max-inflight), 1024 "
        "connections (--max-connections); timeouts: header 10 s, body 30 s, keep-alive 5 s, drain 30 s"
    ) == 1  # fmt: skip
    assert output.count("model iris version 1: READY") == 1
    assert output.count("model tiny_image version 1: READY") == 1
    assert "has no model" not in output


def test_an_empty_repository_is_a_warning(tmp_path: Path) -> None:
    with oip_serve("--model-repository", str(tmp_path), workers=1, env={"OIP_LOG_LEVEL": "info"},
                   drop=PLATFORM_VARIABLES) as server:  # fmt: skip
        assert httpx.get(f"{server.url}/v2/health/ready").status_code == 200
        output = server.child.text()
    assert (
        f"WARNING:  model repository {tmp_path} has no model: the server is ready and every model request answers "
        f"404 {REPOSITORY_OPTIONS}"
    ) in output
    address = f"serving http://127.0.0.1:{server.port}, gRPC off (--grpc-port), metrics off (--metrics-port)"
    assert f"{address}; 1 worker, pid {server.pid}" in output


@contextmanager
def serving(flags: list[str], env: dict[str, str], workers: int) -> Iterator[tuple[int, str]]:
    """``oip serve FLAGS`` until ``workers`` workers have started; its pid and its output until then."""
    child = launch("oip serve", serve_command(*flags), env=env)
    try:
        started = "Application startup complete"
        wait_for(lambda: child.text().count(started) == workers or not child.running(), "every worker serves")
        assert child.running(), child.text()
        yield child.pid, child.text()
    finally:
        child.stop()


@pytest.mark.parametrize("by", ["option", "variable"])
def test_metrics_listen_on_their_own_host(port: int, by: str) -> None:
    """``--metrics-host`` (``OIP_METRICS_HOST``): the metrics endpoint on another address than HTTP's."""
    with HeldPort() as metrics:
        flags = ["--port", str(port), "--metrics-port", str(metrics.port), "--workers", "1"]
        flags += ["--metrics-host", "127.0.0.2"] if by == "option" else []
        variables = environment({"OIP_LOG_LEVEL": "info"}, PLATFORM_VARIABLES)
        variables |= {"OIP_METRICS_HOST": "127.0.0.2"} if by == "variable" else {}
        with serving(flags, variables, 1) as (_, output):
            assert httpx.get(f"http://127.0.0.2:{metrics.port}/metrics", timeout=10).status_code == 200
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"http://127.0.0.1:{metrics.port}/metrics", timeout=10)
    assert f"metrics on http://127.0.0.2:{metrics.port}/metrics" in output
