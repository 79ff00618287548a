"""Start to first correct answer: ``oip serve``, tritonserver and MLServer 1.7, side by side in one run.

    python -m bench.bench_serve_start [--runs 5] [--servers oip,oip-1,triton,mlserver] [--baseline CHECKOUT]

Each server is started anew for every run (the servers take turns, so drift in the machine's load affects all
alike) on fresh loopback ports, serving ``small`` (bench/bench_throughput.py: FP32 [-1, 4] -> [-1, 3]); the time
runs from just before the process is started to the first ``POST /v2/models/small/infer`` (JSON) whose output
matches numpy's, polled every 10 ms. The process group is then killed.

- oip: ``oip serve --model-repository ...`` with its default workers (one per core; ``OIP_WORKERS`` unset);
- oip-1: the same with ``--workers 1`` (no supervisor: uvicorn serves in the process it started in);
- baseline (with ``--baseline CHECKOUT``): ``oip serve`` as oip, running the code of another checkout of this
  repository (``PYTHONPATH``), e.g. ``git worktree add /tmp/before HEAD~1``, to compare before/after in one run;
- triton: tritonserver 2.51 from the nvidia-pytriton wheel, a Python-backend model running the ONNX file, as
  the Triton forwarding tests start it (tests/support/triton_server.py);
- mlserver: ``mlserver start`` (MLServer 1.7.1, tool venv ``mlserver``, ``parallel_workers: 0``, see below) with
  bench/mlserver_onnx.py as the model class; onnxruntime 1.32.0 comes from the ``pytriton`` tool venv, linked
  alone onto ``PYTHONPATH`` so that MLServer keeps its own numpy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
from onnx import numpy_helper

from bench.bench_throughput import MODEL, _oip_executable, _triton_server, build_repositories, free_ports, small_model
from scripts.tool_env import executable, site_packages

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("oip", "oip-1", "triton", "mlserver")
ROWS = np.array([[1.0, 2.0, 3.0, 4.0], [-0.5, 0.25, 8.0, 0.0]], dtype=np.float32)
REQUEST = {"inputs": [{"name": "input", "shape": list(ROWS.shape), "datatype": "FP32", "data": ROWS.ravel().tolist()}]}


def expected() -> np.ndarray:
    weights = {init.name: numpy_helper.to_array(init) for init in small_model().graph.initializer}
    return ROWS @ weights["W"] + weights["b"]


def _correct(document: dict, want: np.ndarray) -> bool:
    outputs = {output["name"]: output for output in document.get("outputs", [])}
    if "output" not in outputs:
        return False
    got = np.asarray(outputs["output"]["data"], dtype=np.float32).reshape(want.shape)
    return bool(np.allclose(got, want, rtol=1e-5, atol=1e-6))


def _oip(
    onnx_repository: Path, workdir: Path, http: int, workers: int | None = None
) -> tuple[list[str], dict[str, str]]:
    command = [_oip_executable(), "serve", "--model-repository", str(onnx_repository), "--port", str(http),
               "--no-access-log", "--log-level", "warning"]  # fmt: skip
    if workers is not None:
        command += ["--workers", str(workers)]
    env = {k: v for k, v in os.environ.items() if k != "OIP_WORKERS"}
    return command, env


def _mlserver(onnx_repository: Path, workdir: Path, http: int) -> tuple[list[str], dict[str, str]]:
    root = workdir / f"mlserver-{http}"
    model = root / MODEL
    model.mkdir(parents=True)
    shutil.copy(onnx_repository / MODEL / "1" / "model.onnx", model / "model.onnx")
    shutil.copy(ROOT / "bench" / "mlserver_onnx.py", model / "mlserver_onnx.py")
    parameters = {"uri": str(model / "model.onnx")}
    settings = {"name": MODEL, "implementation": "mlserver_onnx.OnnxModel", "parameters": parameters}
    (model / "model-settings.json").write_text(json.dumps(settings))
    grpc, metrics = free_ports(2)
    # parallel_workers 0: MLServer 1.7.1's inference worker processes die at start under the uvloop it installs
    # ("There is no current event loop", mlserver/parallel/worker.py), so the model runs in the server process.
    server = {"http_port": http, "grpc_port": grpc, "metrics_port": metrics, "host": "127.0.0.1", "parallel_workers": 0}
    (root / "settings.json").write_text(json.dumps(server))
    onnxruntime = workdir / "onnxruntime-only"
    if not onnxruntime.exists():
        onnxruntime.mkdir()
        (onnxruntime / "onnxruntime").symlink_to(site_packages("pytriton") / "onnxruntime")
    return [executable("mlserver", "mlserver"), "start", str(root)], {**os.environ, "PYTHONPATH": str(onnxruntime)}


def _first_answer(process: subprocess.Popen[bytes], http: int, want: np.ndarray, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2) as client:
        while True:
            with contextlib.suppress(httpx.TransportError, ValueError):
                answer = client.post(f"http://127.0.0.1:{http}/v2/models/{MODEL}/infer", json=REQUEST)
                if answer.status_code == 200 and _correct(answer.json(), want):
                    return
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"no correct answer from {process.args}: {log.read_text()[-3000:]}")
            time.sleep(0.01)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (workers, backend stubs), SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # workers left behind by a supervisor that exited first


def start_to_answer(
    server: str, repositories: tuple[Path, Path], workdir: Path, want: np.ndarray, baseline: Path | None = None
) -> float:
    """Seconds from starting ``server`` to its first correct infer answer (``baseline``: the other checkout)."""
    onnx_repository, triton_repository = repositories
    http, grpc = free_ports(2)
    log = workdir / f"{server}-{http}.log"
    if server == "triton":
        triton = _triton_server().TritonServer(triton_repository, workdir, http, grpc)
        started = time.perf_counter()
        triton.launch()
        try:
            _first_answer(triton.process, http, want, triton.log, 120)
            return time.perf_counter() - started
        finally:
            triton.stop()
    makers: dict[str, Callable[[Path, Path, int], tuple[list[str], dict[str, str]]]] = {
        "oip": _oip,
        "oip-1": lambda onnx_repository, workdir, http: _oip(onnx_repository, workdir, http, workers=1),
        "mlserver": _mlserver,
        "baseline": _oip,
    }
    command, env = makers[server](onnx_repository, workdir, http)
    if server == "baseline" and baseline is not None:
        env["PYTHONPATH"] = str(baseline)
    with log.open("ab") as output:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _first_answer(process, http, want, log, 120)
        return time.perf_counter() - started
    finally:
        _stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--baseline", type=Path, help="another checkout whose oip serve runs as 'baseline'")
    args = parser.parse_args()
    servers = args.servers.split(",") + (["baseline"] if args.baseline else [])
    want = expected()
    times: dict[str, list[float]] = {server: [] for server in servers}
    with tempfile.TemporaryDirectory(prefix="bench-serve-start-") as scratch:
        workdir = Path(scratch)
        repositories = build_repositories(workdir / "repositories")
        for run in range(args.runs):
            for server in servers:
                times[server].append(start_to_answer(server, repositories, workdir, want, args.baseline))
                print(f"run {run + 1} {server}: {times[server][-1]:.2f} s", file=sys.stderr, flush=True)
    medians = {server: statistics.median(values) for server, values in times.items()}
    ours = ("oip", "oip-1", "baseline")
    peers = {server: value for server, value in medians.items() if server not in ours}
    fastest = min(peers, key=peers.__getitem__) if peers else None
    print(f"start to first correct answer, median of {args.runs} (servers taking turns):")
    for server, value in medians.items():
        ratio = f" = {value / peers[fastest]:.2f}x {fastest}" if fastest and server in ours else ""
        print(f"  {server:>8}: {value * 1000:.0f} ms (min {min(times[server]) * 1000:.0f}){ratio}")


if __name__ == "__main__":
    main()
