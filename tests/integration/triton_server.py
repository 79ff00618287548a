"""A real NVIDIA Triton Inference Server on 127.0.0.1: the tritonserver binary shipped in the nvidia-pytriton
wheel, serving Python-backend models that run ONNX files with onnxruntime (see ../shared/triton-on-cpu.md).

nvidia-pytriton pins numpy<2, so it lives in a venv of its own (tool ``pytriton``, scripts/tool_env.py) with
the numpy and onnxruntime that the models' model.py imports; the backend stub finds them through PYTHONPATH."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx

from handler.protocol.settings import DEMO_REPOSITORY
from scripts.tool_env import site_packages
from tests import onnx_models

MODEL_PY = Path(__file__).with_name("triton_models") / "onnx_model.py"


def _tritonserver_home() -> Path:
    return site_packages("pytriton") / "pytriton" / "tritonserver"


def _python_model(root: Path, name: str, onnx_file: Path, config: str) -> None:
    version = root / name / "1"
    version.mkdir(parents=True)
    shutil.copy(onnx_file, version / "model.onnx")
    shutil.copy(MODEL_PY, version / "model.py")
    (root / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n{config}')


#: The demo iris model's config as a Python-backend stand-in (batched, as the demo).
IRIS_CONFIG = """max_batch_size: 256
input [ { name: "input", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [
  { name: "probabilities", data_type: TYPE_FP32, dims: [ 3 ] },
  { name: "label", data_type: TYPE_INT64, dims: [ 1 ] }
]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""


def build_repository(root: Path) -> Path:
    """iris (batched, as the demo), simple (INT32 add/sub), identity_bytes, and slow_iris (sleeps 2 s)."""
    iris = DEMO_REPOSITORY / "iris" / "1" / "model.onnx"
    _python_model(root, "iris", iris, IRIS_CONFIG)
    _python_model(
        root, "slow_iris", iris, IRIS_CONFIG + 'parameters { key: "delay_seconds" value { string_value: "2" } }\n'
    )
    scratch = root.parent / f"{root.name}-onnx"
    simple = onnx_models.save(onnx_models.add_sub(), scratch, "simple")
    _python_model(
        root,
        "simple",
        simple,
        """max_batch_size: 0
input [
  { name: "INPUT0", data_type: TYPE_INT32, dims: [ 1, 16 ] },
  { name: "INPUT1", data_type: TYPE_INT32, dims: [ 1, 16 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ 1, 16 ] },
  { name: "OUTPUT1", data_type: TYPE_INT32, dims: [ 1, 16 ] }
]
""",
    )
    strings = onnx_models.save(onnx_models.identity("BYTES", [-1]), scratch, "identity_bytes")
    _python_model(
        root,
        "identity_bytes",
        strings,
        """max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_STRING, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_STRING, dims: [ -1 ] } ]
""",
    )
    return root


class TritonServer:
    """Start, stop and restart tritonserver on fixed loopback ports."""

    def __init__(self, repository: Path, workdir: Path, http_port: int, grpc_port: int) -> None:
        self.repository = repository
        self.http_port, self.grpc_port = http_port, grpc_port
        self.backends = workdir / "backends"
        self.log = workdir / "tritonserver.log"
        self.process: subprocess.Popen[bytes] | None = None
        home = _tritonserver_home()
        if not self.backends.exists():
            shutil.copytree(home / "backends", self.backends)
            stub = (
                home
                / "python_backend_stubs"
                / f"{sys.version_info.major}.{sys.version_info.minor}"
                / "triton_python_backend_stub"
            )
            shutil.copy(stub, self.backends / "python" / "triton_python_backend_stub")
        self.binary = home / "bin" / "tritonserver"

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout: float = 90) -> None:
        self.launch()
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited: {self.log.read_text()[-3000:]}")
            try:
                if (
                    httpx.get(f"http://{self.http_url}/v2/health/ready", timeout=1).status_code == 200
                    and self._grpc_up()
                ):
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tritonserver did not become ready: {self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def launch(self) -> None:
        """Start the process and return at once (``start`` waits until it is ready)."""
        packages = site_packages("pytriton")
        # The stub links libpython3.11: the one of this interpreter (the venv's base), not Debian's in /lib.
        libs = [str(sysconfig.get_config_var("LIBDIR")), str(packages / "nvidia_pytriton.libs")]
        env = {
            **os.environ,
            "LD_LIBRARY_PATH": ":".join([*libs, os.environ.get("LD_LIBRARY_PATH", "")]),
            # model.py's numpy and onnxruntime: the venv's, ahead of whatever the base interpreter has.
            "PYTHONPATH": str(packages),
        }
        command = [
            str(self.binary), f"--model-repository={self.repository}", f"--backend-directory={self.backends}",
            "--http-address=127.0.0.1", f"--http-port={self.http_port}", "--grpc-address=127.0.0.1",
            f"--grpc-port={self.grpc_port}", "--allow-metrics=false", "--exit-timeout-secs=2",
        ]  # fmt: skip
        # Its own process group: stopping kills the Python-backend stub processes too, not just tritonserver.
        self.process = subprocess.Popen(
            command, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )

    def _grpc_up(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.grpc_port)) == 0

    def stop(self) -> None:
        """Kill tritonserver and its backend stubs (a crash, as far as clients can tell)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None
