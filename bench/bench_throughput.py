"""Throughput under NVIDIA's perf_analyzer: the floor, ``oip serve`` and a real tritonserver, side by side in one run.

    python -m bench.bench_throughput [--seconds 3] [--concurrency 1,2,4,8] [--protocols http,grpc[,grpc-stream]]
                                     [--servers floor,oip,triton]

One server at a time (started anew for each protocol) on 127.0.0.1, the client on the same cores, all serving
``small`` (FP32 [-1, 4] -> [-1, 3], MatMul + Add, ``max_batch_size: 64``) with the same onnxruntime session:

- floor: uvicorn + the bare ASGI callable of ``bench/floor_server.py`` (with a bare grpc.aio servicer for gRPC);
- oip: ``oip serve --model-repository ...`` (``--grpc-port ...`` for gRPC);
- triton: tritonserver 2.51 from the nvidia-pytriton wheel, a Python-backend model running the ONNX file
  (``dynamic_batching {}``), started as the Triton forwarding tests start it.

``grpc-stream`` (not run unless asked) is gRPC through Triton's streaming RPC, ``ModelStreamInfer`` (perf_analyzer's
``--streaming``), which the floor's servicer does not serve. perf_analyzer (``bench/perf_analyzer.py``) sends binary
tensors of zeros, batch 1, at each concurrency for about
``--seconds`` (three measurement windows within 20 % of each other; on a busy machine, a second try takes
any three). The table gives infer/s with p50 / p99 latency, and the ratios
of our infer/s to the floor's and to Triton's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bench.perf_analyzer import Measurement, PerfAnalyzer, PerfAnalyzerError, UnstableError, measure, perf_analyzer
from tests.support import onnx_models

ROOT = Path(__file__).resolve().parents[1]
MODEL = "small"
SERVERS = ("floor", "oip", "triton")
PROTOCOLS = ("http", "grpc", "grpc-stream")
#: ``--protocols`` when not given.
DEFAULT_PROTOCOLS = ("http", "grpc")
#: Stability percentage of a second try after an unstable first one: any three windows pass (marked ~ in the table).
UNSTABLE = 1000
SMALL_CONFIG = """max_batch_size: 64
input [ { name: "input", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "output", data_type: TYPE_FP32, dims: [ 3 ] } ]
"""
TRITON_CONFIG = f"""backend: "python"
{SMALL_CONFIG}dynamic_batching {{ }}
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
"""


def small_model() -> onnx.ModelProto:
    """``output = input @ W + b``: FP32 [-1, 4] -> [-1, 3], fixed seeded weights."""
    rng = np.random.default_rng(17)
    weights = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["input", "W"], ["product"]),
            helper.make_node("Add", ["product", "b"], ["output"]),
        ],
        MODEL,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3])],
        [weights, bias],
    )
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


def _triton_server() -> ModuleType:
    """``tests.support.triton_server``, also from a checkout whose settings module is ``handler.settings``."""
    try:
        return importlib.import_module("tests.support.triton_server")
    except ModuleNotFoundError as error:
        if error.name != "handler.settings":
            raise
        sys.modules["handler.settings"] = importlib.import_module("handler.config.settings")
        return importlib.import_module("tests.support.triton_server")


def build_repositories(root: Path) -> tuple[Path, Path]:
    """``small`` as an ONNX repository (floor, oip) and as a Python-backend repository (Triton)."""
    onnx_file = onnx_models.save(small_model(), root / "onnx", MODEL, config=SMALL_CONFIG)
    version = root / "triton" / MODEL / "1"
    version.mkdir(parents=True)
    shutil.copy(onnx_file, version / "model.onnx")
    shutil.copy(_triton_server().MODEL_PY, version / "model.py")
    (version.parent / "config.pbtxt").write_text(f'name: "{MODEL}"\n{TRITON_CONFIG}')
    return root / "onnx", root / "triton"


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held open together while the OS picks them)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def _process(command: list[str], http: int, grpc: int | None, log: Path, timeout: float = 60) -> Iterator[None]:
    """Run ``command`` until it answers ready on HTTP (and listens on gRPC), then stop it on exit."""
    with log.open("ab") as output:
        process = subprocess.Popen(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(httpx.TransportError):
                ready = httpx.get(f"http://127.0.0.1:{http}/v2/health/ready", timeout=1).status_code == 200
                if ready and (grpc is None or _listening(grpc)):
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not start: {log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _oip_executable() -> str:
    beside = Path(sys.executable).with_name("oip")
    found = str(beside) if beside.exists() else shutil.which("oip")
    if found is None:
        raise RuntimeError("no `oip` executable: pip install -e '.[dev]'")
    return found


@contextlib.contextmanager
def serve(server: str, protocol: str, repositories: tuple[Path, Path], workdir: Path) -> Iterator[str]:
    """Start one of SERVERS on fresh loopback ports for ``protocol``, yielding its ``host:port``.

    The floor and oip get a gRPC port only for gRPC: with one they run on asyncio's own loop instead of uvloop.
    """
    onnx_repository, triton_repository = repositories
    http, grpc = free_ports(2)
    log = workdir / f"{server}-{protocol}.log"
    url = f"127.0.0.1:{grpc if protocol == 'grpc' else http}"
    if server == "triton":
        triton = _triton_server().TritonServer(triton_repository, workdir, http, grpc)
        triton.start()
        try:
            yield url
        finally:
            triton.stop()
        return
    if server == "floor":
        command = [sys.executable, "-m", "bench.floor_server", str(onnx_repository / MODEL), "--port", str(http)]
    else:
        command = [_oip_executable(), "serve", "--model-repository", str(onnx_repository), "--port", str(http),
                   "--no-access-log", "--log-level", "warning"]  # fmt: skip
    if protocol == "grpc":
        command += ["--grpc-port", str(grpc)]
    with _process(command, http, grpc if protocol == "grpc" else None, log):
        yield url


#: (server, protocol, concurrency) -> the measurement, or why it failed.
Results = dict[tuple[str, str, int], Measurement | str]


def _transport(protocol: str) -> str:
    """The server's transport for one of PROTOCOLS."""
    return "grpc" if protocol == "grpc-stream" else protocol


def _point(tool: PerfAnalyzer, url: str, protocol: str, level: int, interval_ms: int) -> Measurement | str:
    """One measurement; on a machine too busy for 20 % stability, the average of three windows whatever they say."""
    extra = ("--streaming",) if protocol == "grpc-stream" else ()
    try:
        try:
            return measure(tool, url, MODEL, _transport(protocol), level, interval_ms, extra=extra)
        except UnstableError:
            return measure(tool, url, MODEL, _transport(protocol), level, interval_ms, UNSTABLE, extra)
    except PerfAnalyzerError as error:
        return str(error)


def run(tool: PerfAnalyzer, servers: list[str], protocols: list[str], levels: list[int], seconds: float) -> Results:
    """Measure every (server, protocol, concurrency) point, one server at a time."""
    interval_ms = max(200, int(seconds * 1000 / 3))
    results: Results = {}
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as scratch:
        workdir = Path(scratch)
        repositories = build_repositories(workdir / "repositories")
        for server in servers:
            for protocol in protocols:
                with serve(server, _transport(protocol), repositories, workdir) as url:
                    for level in levels:
                        point = _point(tool, url, protocol, level, interval_ms)
                        results[server, protocol, level] = point
                        shown = f"{point.infer_per_second:,.0f} infer/s" if isinstance(point, Measurement) else point
                        print(f"{server:>6} {protocol:>4} c={level}: {shown}", file=sys.stderr, flush=True)
    return results


def _cell(point: Measurement | str | None) -> str:
    if point is None:
        return "-"
    if isinstance(point, str):
        return "failed"
    mark = "~" if point.stability == UNSTABLE else ""
    return f"{mark}{point.infer_per_second:,.0f} ({point.p50_us:,.0f} / {point.p99_us:,.0f})"


def _ratio(ours: Measurement | str | None, other: Measurement | str | None) -> str:
    if isinstance(ours, Measurement) and isinstance(other, Measurement):
        return f"{ours.infer_per_second / other.infer_per_second:.2f}x"
    return "-"


def table(results: Results, servers: list[str], protocols: list[str], levels: list[int]) -> str:
    """A markdown table: a row per protocol and concurrency, infer/s (p50 / p99 us) per server, and ratios;
    then the first failure of each server and protocol."""
    others = [other for other in ("floor", "triton") if "oip" in servers and other in servers]
    heads = [f"{server} infer/s (p50 / p99 us)" for server in servers] + [f"ours/{other}" for other in others]
    lines = ["| protocol | c | " + " | ".join(heads) + " |", "| --- " * (2 + len(heads)) + "|"]
    for protocol in protocols:
        for level in levels:
            cells = [_cell(results.get((server, protocol, level))) for server in servers]
            ours = results.get(("oip", protocol, level))
            cells += [_ratio(ours, results.get((other, protocol, level))) for other in others]
            lines.append(f"| {protocol} | {level} | " + " | ".join(cells) + " |")
    failures = {(server, protocol): point for (server, protocol, _), point in results.items() if isinstance(point, str)}
    lines += [f"\n{server} over {protocol} failed: {reason}" for (server, protocol), reason in failures.items()]
    if any(isinstance(point, Measurement) and point.stability == UNSTABLE for point in results.values()):
        lines.append("\n~ no three windows in a row within 20 % of each other (a busy machine): their average.")
    return "\n".join(lines)


def _names(text: str, allowed: tuple[str, ...]) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3, help="per point: three windows of a third each")
    parser.add_argument("--concurrency", type=lambda t: [int(n) for n in t.split(",")], default=[1, 2, 4, 8])
    parser.add_argument("--protocols", type=lambda t: _names(t, PROTOCOLS), default=list(DEFAULT_PROTOCOLS))
    parser.add_argument("--servers", type=lambda t: _names(t, SERVERS), default=list(SERVERS))
    args = parser.parse_args()
    try:
        tool = perf_analyzer()
    except PerfAnalyzerError as error:
        sys.exit(str(error))
    results = run(tool, args.servers, args.protocols, args.concurrency, args.seconds)
    print(table(results, args.servers, args.protocols, args.concurrency))


if __name__ == "__main__":
    main()
