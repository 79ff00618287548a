"""Latency at concurrency 1 against its targets, every server side by side in one run, requests alternating.

    python -m bench.bench_latency [--repeat 400] [--rounds 1] [--perf-analyzer N]

Servers, all on 127.0.0.1 and all started by this run:

- oip: ``oip serve --workers 1`` on the demo repository (``iris`` 1x4, ``tiny_image`` 1x3x224x224);
- Triton: tritonserver 2.51 from the nvidia-pytriton wheel serving the same ONNX files through a Python-backend
  model running onnxruntime (``tests/support/triton_server.py``, as bench_triton and bench_throughput);
- null: uvicorn + a bare ASGI callable that reads the body and answers oip's answer to the case, canned
  (``bench/null_server.py``): the floor of client + loopback + an ASGI server;
- forward: ``oip serve --workers 1`` forwarding every model to that Triton as a pass-through
  (``OIP_TRITON_PROXY=1``, HTTP), for the 1x4 JSON and the image binary request.

The client is the same for all: one keep-alive socket per server, each request's bytes (request line, headers,
body) prepared once and sent with one ``sendall``, the answer read with ``http.client.HTTPResponse``. Within a
case, every round sends one request to each server in turn (the order rotating), so a noisy machine weighs on
all alike. The table gives p50 / p99 per server and the ratios against the targets.

Requests one at a time to four servers in turn find each server's caches cold, which costs a server that runs
Python far more than one that runs C++, and which no client at concurrency 1 sees: it sends its requests to one
server back to back. ``--perf-analyzer N`` adds what perf_analyzer itself measures that way: at concurrency 1, the
image binary request (``tiny_image``, its tensors zeros, binary both ways) against oip and Triton in turn, N rounds
of a 2 s window each (more until three agree within 20 %), the p50 of each and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from bench.bench_throughput import _oip_executable, _process, _triton_server, free_ports
from bench.perf_analyzer import measure as perf_analyzer_measure
from bench.perf_analyzer import perf_analyzer
from handler.config.settings import DEMO_REPOSITORY

IMAGE_CONFIG = """max_batch_size: 16
input [ { name: "image", data_type: TYPE_FP32, dims: [ 3, 224, 224 ] } ]
output [ { name: "probabilities", data_type: TYPE_FP32, dims: [ 10 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""
SERVERS = ("oip", "Triton", "null", "forward")
SMALL, IMAGE_JSON, IMAGE_BINARY = "1x4 FP32 JSON", "1x3x224x224 FP32 JSON", "1x3x224x224 FP32 binary"


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    body: bytes
    header_length: int | None  # binary extension: the JSON part's length
    repeat_factor: float
    servers: tuple[str, ...]

    def raw(self, port: int) -> bytes:
        """The whole HTTP request, prepared once."""
        lines = [
            f"POST /v2/models/{self.model}/infer HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            f"Content-Length: {len(self.body)}",
        ]
        if self.header_length is None:
            lines.append("Content-Type: application/json")
        else:
            lines.append("Content-Type: application/octet-stream")
            lines.append(f"Inference-Header-Content-Length: {self.header_length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.body


def cases() -> list[Case]:
    rng = np.random.default_rng(0)
    iris = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    image = rng.random((1, 3, 224, 224), dtype=np.float32)

    def json_body(name: str, array: np.ndarray) -> bytes:
        tensor = {"name": name, "shape": list(array.shape), "datatype": "FP32", "data": array.ravel().tolist()}
        return orjson.dumps({"inputs": [tensor]})

    header = orjson.dumps({"inputs": [{"name": "image", "shape": [1, 3, 224, 224], "datatype": "FP32",
                                       "parameters": {"binary_data_size": image.nbytes}}],
                           "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}]})  # fmt: skip
    return [
        Case(SMALL, "iris", json_body("input", iris), None, 2, SERVERS),
        Case(IMAGE_JSON, "tiny_image", json_body("image", image), None, 0.25, ("oip", "Triton", "null")),
        Case(IMAGE_BINARY, "tiny_image", header + image.tobytes(), len(header), 1, SERVERS),
    ]


class Connection:
    """One keep-alive socket to a server."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = self.connect()

    def connect(self) -> socket.socket:
        """A new connection (uvicorn closes one idle for 5 s: each case starts on fresh ones)."""
        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def reconnect(self) -> None:
        self.sock.close()
        self.sock = self.connect()

    def send(self, raw: bytes) -> tuple[int, bytes, str | None]:
        self.sock.sendall(raw)
        response = http.client.HTTPResponse(self.sock)
        response.begin()
        body = response.read()
        if response.will_close:
            raise RuntimeError(f"port {self.port} closed the connection")
        return response.status, body, response.getheader("Inference-Header-Content-Length")


def outputs(body: bytes, length: str | None) -> dict[str, np.ndarray]:
    """An answer's output tensors, JSON or binary."""
    header = orjson.loads(body[: int(length)] if length else body)
    offset = int(length) if length else 0
    found = {}
    for tensor in header["outputs"]:
        dtype = {"FP32": np.float32, "INT64": np.int64}[tensor["datatype"]]
        size = tensor.get("parameters", {}).get("binary_data_size")
        if size is None:
            found[tensor["name"]] = np.asarray(tensor["data"], dtype=dtype).reshape(tensor["shape"])
        else:
            found[tensor["name"]] = np.frombuffer(body, dtype, size // np.dtype(dtype).itemsize, offset)
            offset += size
    return found


def check(case: Case, connections: dict[str, Connection]) -> tuple[bytes, str | None]:
    """Every server answers 200, and oip, Triton and forward the same values; oip's answer (for the null server)."""
    answers = {}
    for server in case.servers:
        connections[server].reconnect()  # uvicorn closes a connection idle for 5 s (while the next server starts)
        status, body, length = connections[server].send(case.raw(connections[server].port))
        if status != 200:
            raise RuntimeError(f"{server} answered {status} to {case.name}: {body[:300]!r}")
        answers[server] = (body, length)
    reference = outputs(*answers["oip"])
    for server in ("Triton", "forward"):
        if server in answers:
            for name, value in outputs(*answers[server]).items():
                np.testing.assert_allclose(value.ravel(), reference[name].ravel(), rtol=1e-4, atol=1e-5)
    return answers["oip"]


def measure(case: Case, connections: dict[str, Connection], repeat: int) -> dict[str, list[float]]:
    """Latencies in ms per server, one request to each server per round, the order rotating."""
    servers = list(case.servers)
    raw = {server: case.raw(connections[server].port) for server in servers}
    for server in servers:
        connections[server].reconnect()
    for _ in range(10):
        for server in servers:
            try:
                connections[server].send(raw[server])
            except (OSError, http.client.HTTPException) as exc:
                raise RuntimeError(f"{server} failed on {case.name}") from exc
    samples: dict[str, list[float]] = {server: [] for server in servers}
    for index in range(repeat):
        shift = index % len(servers)
        for server in servers[shift:] + servers[:shift]:
            send = connections[server].send
            start = time.perf_counter()
            status, _, _ = send(raw[server])
            samples[server].append((time.perf_counter() - start) * 1000)
            if status != 200:
                raise RuntimeError(f"{server} answered {status} to {case.name}")
    return samples


def p50(values: list[float]) -> float:
    return statistics.median(values)


def p99(values: list[float]) -> float:
    return float(np.percentile(values, 99))


def table(results: dict[str, dict[str, list[float]]]) -> str:
    head = "| case | oip p50 / p99 | Triton p50 / p99 | null p50 / p99 | forward p50 / p99 | ours / Triton | ours - null | forward - Triton |"  # noqa: E501
    lines = [head, "| --- " * 8 + "|"]
    for name, samples in results.items():
        cells = [
            f"{p50(samples[s]):.2f} / {p99(samples[s]):.2f}" if s in samples else "-"
            for s in ("oip", "Triton", "null", "forward")
        ]
        ours, triton, null = p50(samples["oip"]), p50(samples["Triton"]), p50(samples["null"])
        cells += [f"{ours / triton:.2f}x", f"+{ours - null:.2f}"]
        cells.append(f"{p50(samples['forward']) - triton:+.2f}" if "forward" in samples else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(results: dict[str, dict[str, list[float]]]) -> str:
    """The latency targets, met or not."""

    def ratio(case: str) -> float:
        return p50(results[case]["oip"]) / p50(results[case]["Triton"])

    def over(case: str, server: str, base: str) -> float:
        return p50(results[case][server]) - p50(results[case][base])

    rows = [
        ("image JSON p50 <= 0.4x Triton's", ratio(IMAGE_JSON), 0.4, "x"),
        ("image JSON p50 <= null + 4 ms", over(IMAGE_JSON, "oip", "null"), 4.0, " ms"),
        ("1x4 JSON p50 <= 0.75x Triton's", ratio(SMALL), 0.75, "x"),
        ("image binary p50 <= 0.6x Triton's", ratio(IMAGE_BINARY), 0.6, "x"),
        ("forwarding 1x4 JSON <= Triton + 1.0 ms", over(SMALL, "forward", "Triton"), 1.0, " ms"),
        ("forwarding image binary <= Triton + 1.0 ms", over(IMAGE_BINARY, "forward", "Triton"), 1.0, " ms"),
    ]
    lines = ["| target | measured | met |", "| --- | --- | --- |"]
    for target, value, limit, unit in rows:
        shown = f"{value:.2f}x" if unit == "x" else f"{value:+.2f} ms"
        lines.append(f"| {target} | {shown} | {'yes' if value <= limit else 'no'} |")
    return "\n".join(lines)


def triton_repository(root: Path) -> Path:
    module = _triton_server()
    module._python_model(root, "iris", DEMO_REPOSITORY / "iris" / "1" / "model.onnx", module.IRIS_CONFIG)
    module._python_model(root, "tiny_image", DEMO_REPOSITORY / "tiny_image" / "1" / "model.onnx", IMAGE_CONFIG)
    return root


@contextlib.contextmanager
def servers(workdir: Path, all_cases: list[Case]) -> Iterator[dict[str, Connection]]:
    """Start Triton, oip, forward (then record oip's answers) and null; one connection to each."""
    triton_http, triton_grpc, oip, forward, null = free_ports(5)
    serve = [_oip_executable(), "serve", "--workers", "1", "--no-access-log", "--log-level", "warning"]
    with contextlib.ExitStack() as stack:
        triton = _triton_server().TritonServer(triton_repository(workdir / "triton"), workdir, triton_http, triton_grpc)
        triton.start()
        stack.callback(triton.stop)
        empty = workdir / "empty"
        empty.mkdir()
        stack.enter_context(
            _process(
                [*serve, "--model-repository", str(DEMO_REPOSITORY), "--port", str(oip)], oip, None, workdir / "oip"
            )
        )
        os.environ.update(OIP_TRITON_URL=triton.http_url, OIP_TRITON_PROTOCOL="http", OIP_TRITON_PROXY="1")
        try:
            stack.enter_context(
                _process(
                    [*serve, "--model-repository", str(empty), "--port", str(forward)], forward, None, workdir / "fwd"
                )
            )
        finally:
            for name in ("OIP_TRITON_URL", "OIP_TRITON_PROTOCOL", "OIP_TRITON_PROXY"):
                del os.environ[name]
        connections = {"oip": Connection(oip), "Triton": Connection(triton_http), "forward": Connection(forward)}
        answers = workdir / "answers"
        answers.mkdir()
        for case in all_cases:
            without_null = Case(**{**case.__dict__, "servers": tuple(s for s in case.servers if s != "null")})
            body, length = check(without_null, connections)
            if case.header_length is None:
                (answers / f"{case.model}.json").write_bytes(body)
            else:
                (answers / f"{case.model}.binary").write_bytes(body)
                (answers / f"{case.model}.binary.length").write_text(str(length))
        stack.enter_context(
            _process(
                [sys.executable, "-m", "bench.null_server", str(answers), "--port", str(null)],
                null,
                None,
                workdir / "null",
            )
        )
        connections["null"] = Connection(null)
        for case in all_cases:
            check(case, connections)
        yield connections


def perf_analyzer_image(connections: dict[str, Connection], rounds: int) -> None:
    """perf_analyzer at concurrency 1 on ``tiny_image`` against oip and Triton in turn, ``rounds`` times: each
    round's p50s and their ratio, then the ratio of the medians."""
    tool = perf_analyzer()
    p50s: dict[str, list[float]] = {"oip": [], "Triton": []}
    print("\n| round | oip p50 / p99 (ms), infer/s | Triton p50 / p99 (ms), infer/s | oip / Triton (p50) |")
    print("| --- | --- | --- | --- |")
    for round_ in range(rounds):
        cells = []
        for name in p50s:
            found = perf_analyzer_measure(tool, f"127.0.0.1:{connections[name].port}", "tiny_image", "http", 1, 2000)
            p50s[name].append(found.p50_us / 1000)
            cells.append(f"{found.p50_us / 1000:.3f} / {found.p99_us / 1000:.3f}, {found.infer_per_second:.0f}")
        print(f"| {round_ + 1} | {cells[0]} | {cells[1]} | {p50s['oip'][-1] / p50s['Triton'][-1]:.2f}x |")
    ours, triton = statistics.median(p50s["oip"]), statistics.median(p50s["Triton"])
    print(f"\nperf_analyzer, image binary at concurrency 1: p50 {ours:.3f} against {triton:.3f} ms, "
          f"{ours / triton:.2f}x Triton's")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=400, help="rounds of the image binary case (1x4: twice, "
                        "image JSON: a quarter)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="measure every case this many times, one table each")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--perf-analyzer", type=int, default=0, metavar="N",
                        help="then N rounds of perf_analyzer on the image binary request (default: none)")  # fmt: skip
    args = parser.parse_args()
    all_cases = cases()
    chosen = [case for case in all_cases if not args.cases or case.name in args.cases.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as scratch, servers(Path(scratch), all_cases) as conns:
        for round_ in range(args.rounds):
            load = os.getloadavg()
            results = {
                case.name: measure(case, conns, max(int(args.repeat * case.repeat_factor), 20)) for case in chosen
            }
            after = os.getloadavg()
            print(f"\nround {round_ + 1}: load average {load[0]:.2f} at the start, {after[0]:.2f} at the end "
                  f"(1 min); {os.cpu_count()} cores\n")  # fmt: skip
            print(table(results))
            if len(chosen) == len(all_cases):
                print()
                print(targets(results))
            sys.stdout.flush()
        if args.perf_analyzer:
            perf_analyzer_image(conns, args.perf_analyzer)


if __name__ == "__main__":
    main()
