"""Shared fixtures: model repositories built from real ONNX files, the app, a real uvicorn server."""

from __future__ import annotations

import socket
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from handler.config.settings import DEMO_REPOSITORY, Settings
from handler.server import build_app
from tests.support import onnx_models
from tests.support.servers import LiveServer

__all__ = ["LiveServer", "free_port"]

SPEC_DIR = Path(__file__).resolve().parents[2] / "shared" / "spec"


@pytest.fixture(scope="session")
def test_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Identity models for every datatype, Triton's add/sub ``simple``, a two-version model, broken models."""
    return build_test_repository(tmp_path_factory.mktemp("repository"))


def build_test_repository(root: Path) -> Path:
    """Write the test repository (see ``test_repository``) under ``root``."""
    for datatype in onnx_models.ONNX_TYPES:
        onnx_models.save(onnx_models.identity(datatype), root, f"identity_{datatype.lower()}")
    onnx_models.save(onnx_models.add_sub(), root, "simple")
    onnx_models.save(onnx_models.identity("FP32", [-1]), root, "versioned", version=1)
    onnx_models.save(onnx_models.identity("FP32", [-1]), root, "versioned", version=3)
    onnx_models.save(onnx_models.fixed_reshape(), root, "fixed_reshape")
    onnx_models.save(onnx_models.identity("FP32", [-1, 3]), root, "batched", config="max_batch_size: 4\n")
    onnx_models.save(onnx_models.identity("BYTES", [1]), root, "raw_bytes")
    corrupt = root / "corrupt" / "1"
    corrupt.mkdir(parents=True)
    (corrupt / "model.onnx").write_bytes(b"this is not an onnx file")
    return root


def make_settings(repository: Path, **overrides: object) -> Settings:
    """Settings for a local repository (environment ignored)."""
    return Settings(model_repository=str(repository), **overrides)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def app(test_repository: Path) -> FastAPI:
    return build_app(make_settings(test_repository, max_body_bytes=1024 * 1024, max_tensor_bytes=1024 * 1024))


@pytest.fixture(scope="session")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def demo_client() -> Iterator[TestClient]:
    with TestClient(build_app(make_settings(DEMO_REPOSITORY)), raise_server_exceptions=False) as test_client:
        yield test_client


def free_port() -> int:
    """A loopback port that nothing listened on a moment ago, for clients that must find no server there. A server
    gets its port from tests/support/servers.py (``HeldPort``, or port 0), never from here."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def live_server(app: FastAPI) -> Iterator[LiveServer]:
    server = LiveServer(app)
    server.start()
    yield server
    server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """How many tests each module ran (by outcome where not all passed), so that the count says what is tested;
    and the seed of the random order (pytest-randomly), even under ``-q``."""
    outcomes: dict[str, str] = {}
    for outcome in ("passed", "xpassed", "skipped", "xfailed", "error", "failed"):  # a later outcome wins
        for report in terminalreporter.stats.get(outcome, []):
            if nodeid := getattr(report, "nodeid", ""):
                outcomes[nodeid] = outcome
    modules: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for nodeid, outcome in outcomes.items():
        modules[nodeid.split("::")[0]][outcome] += 1
    if not modules:
        return
    terminalreporter.section("tests per module")
    for module, counts in sorted(modules.items()):
        outcomes_text = ", ".join(f"{count} {outcome}" for outcome, count in sorted(counts.items()))
        detail = "" if set(counts) == {"passed"} else f"  ({outcomes_text})"
        terminalreporter.write_line(f"{sum(counts.values()):5d}  {module}{detail}")
    seed = getattr(config.option, "randomly_seed", None) if config.pluginmanager.has_plugin("randomly") else None
    if isinstance(seed, int):
        terminalreporter.write_line(f"random order: -p randomly --randomly-seed={seed} repeats it")
