"""A real NVIDIA Triton Inference Server on 127.0.0.1: the tritonserver binary shipped in the nvidia-pytriton
wheel, serving Python-backend models that run ONNX files with onnxruntime (see ../shared/triton-on-cpu.md).

nvidia-pytriton pins numpy<2, so it lives in a venv of its own (tool ``pytriton``, scripts/tool_env.py) with
the numpy and onnxruntime that the models' model.py imports; the backend stub finds them through PYTHONPATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import httpx

from handler.config.settings import DEMO_REPOSITORY
from scripts.tool_env import site_packages
from tests.support import onnx_models, servers

MODEL_PY = Path(__file__).resolve().parents[1] / "integration" / "triton_models" / "onnx_model.py"


def _tritonserver_home() -> Path:
    return site_packages("pytriton") / "pytriton" / "tritonserver"


def python_model(root: Path, name: str, model_py: Path, config: str) -> Path:
    """``root/name``: a Python-backend model whose version 1 runs ``model_py``, its config.pbtxt naming it and the
    backend, then ``config``; its version directory."""
    version = root / name / "1"
    version.mkdir(parents=True)
    shutil.copy(model_py, version / "model.py")
    (root / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n{config}')
    return version


def _python_model(root: Path, name: str, onnx_file: Path, config: str) -> None:
    """A Python-backend model that runs ``onnx_file`` with onnxruntime."""
    shutil.copy(onnx_file, python_model(root, name, MODEL_PY, config) / "model.onnx")


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
    """Start, stop and restart tritonserver on loopback ports held for it (tests/support/servers.py) unless given."""

    def __init__(
        self,
        repository: Path,
        workdir: Path,
        http_port: int | None = None,
        grpc_port: int | None = None,
        options: tuple[str, ...] = (),
    ) -> None:
        self.repository = repository
        #: More tritonserver options, after the ones ``launch`` gives (a later one wins: ``--allow-metrics=true``).
        self.options = options
        self.held = [servers.HeldPort() for port in (http_port, grpc_port) if port is None]
        held = iter(self.held)
        self.http_port = http_port or next(held).port
        self.grpc_port = grpc_port or next(held).port
        self.backends = workdir / "backends"
        self.log = workdir / "tritonserver.log"
        self.child: servers.Child | None = None
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
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running tritonserver process, if any."""
        return self.child.popen if self.child else None

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self) -> None:
        """Start tritonserver and wait until both its services are ready (tests/support/servers.py's one timeout)."""
        child = self.launch()
        try:
            child.wait_ready(
                lambda: servers.http_ok(f"http://{self.http_url}/v2/health/ready") and servers.grpc_ready(self.grpc_url)
            )
        except servers.ServerFailed:
            self.stop()
            raise

    def answers_iris(self) -> bool:
        """Whether tritonserver answers an iris inference itself: on a busy machine a Python-backend stub may still
        be coming up after ``start`` ("Stub process ... is not healthy"), and the next request restarts it."""
        row = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
        try:
            return httpx.post(f"http://{self.http_url}/v2/models/iris/infer", json=row, timeout=30).status_code == 200
        except httpx.TransportError:
            return False

    def launch(self) -> servers.Child:
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
            f"--grpc-port={self.grpc_port}", "--allow-metrics=false", "--exit-timeout-secs=2", *self.options,
        ]  # fmt: skip
        # In a process group of its own: stopping kills the Python-backend stub processes too.
        self.child = servers.launch("tritonserver", command, env=env, output=self.log)
        return self.child

    def stop(self) -> None:
        """Kill tritonserver and its backend stubs (a crash, as far as clients can tell); its ports stay held."""
        if self.child is not None:
            self.child.stop(graceful=False)
        self.child = None

    def close(self) -> None:
        """``stop``, and let its ports go."""
        self.stop()
        for port in self.held:
            port.close()
