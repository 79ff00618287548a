"""Dynamic batching where it has something to amortize: a weight-heavy MLP with and without ``dynamic_batching``.

    python -m bench.bench_dynamic_batching [--seconds 3] [--rounds 3] [--concurrency 8] [--delay-us 2000]
                                           [--width 2048] [--layers 3] [--sweep]

One ``oip serve --workers 1`` serves two copies of the same model (FP32 [-1, W] through ``--layers`` WxW MatMul +
Relu layers, W the ``--width``, seeded weights, built with onnx.helper): ``mlp_plain`` without ``dynamic_batching`` and
``mlp_batched`` with ``dynamic_batching { max_queue_delay_microseconds: --delay-us preferred_batch_size: [ C ] }``
(C the concurrency). One worker, so that one batcher sees all C requests (as one Triton model instance would; with
two workers each sees about C/2 and never reaches the preferred size); both models get the same server, the same
onnxruntime settings and the same client.

1. What merging can amortize: in-process ``session.run`` of batch 1 and batch C (the server's onnxruntime
   settings, interleaved, medians), so "one batch-C run costs little more than one batch-1 run" is measured, not
   assumed. The default, 2048 wide and 3 layers (48 MB of weights), is past the 32 MB L3 of the machine it was
   chosen on, so a batch-1 run (about 3 ms) is bound by memory and a batch-8 run costs about 1.5x it; 1024 wide
   (12 MB, in L3) 1.6-2.1x. No size went below about 1.4x: onnxruntime's AVX2 kernel multiplies at most 6 rows
   per pass over the weights, so 8 rows take two. ``--sweep`` prints these costs for widths 1024, 2048 and 4096
   and 2 to 6 layers (up to 200 MB) and exits.
2. Throughput: perf_analyzer (``bench/perf_analyzer.py``: binary zeros, batch 1) at concurrency C on each model,
   alternating which goes first, ``--rounds`` times; the ratio of each round, side by side. Beside it the CPU
   time each inference cost the server and perf_analyzer (the two cores are shared with both, so when they are
   saturated the throughput ratio tends to the CPU ratio), rows per execution and the server's own run time per
   execution (Triton's statistics extension).
3. A lone client (concurrency 1) on each model: the batched model's p99 against its budget, the configured delay
   + one batch-1 run as the server timed it + a few ms; the plain model's lone p99 shows the machine's own tail.
4. A bad request among C concurrent ones: it fails alone (400) while the others merge and succeed.

``os.getloadavg()`` is printed before and after: another tenant's load changes everything on two cores.
(A Python client on the same two cores is the bottleneck itself, so perf_analyzer drives the load.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from bench.common import oip_server
from bench.perf_analyzer import PerfAnalyzer, UnstableError, measure, perf_analyzer

#: "A few ms" of the lone request's budget: HTTP, the event loop and the delay timer's millisecond resolution.
SLACK_MS = 3.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def mlp(width: int, layers: int) -> onnx.ModelProto:
    """FP32 ``x`` [-1, width] -> ``layers`` x (MatMul width x width + Relu) -> ``y`` [-1, width]."""
    rng = np.random.default_rng(0)
    nodes, weights, previous = [], [], "x"
    for layer in range(layers):
        weight = rng.standard_normal((width, width), np.float32) / np.float32(np.sqrt(width))
        weights.append(numpy_helper.from_array(weight, f"w{layer}"))
        output = "y" if layer == layers - 1 else f"r{layer}"
        nodes += [
            helper.make_node("MatMul", [previous, f"w{layer}"], [f"m{layer}"]),
            helper.make_node("Relu", [f"m{layer}"], [output]),
        ]
        previous = output
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", width])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def build_repository(root: Path, model: onnx.ModelProto, width: int, delay_us: int, preferred: int) -> Path:
    """``mlp_plain`` and ``mlp_batched``: the same ONNX file, the second with ``dynamic_batching``."""
    base = f"""max_batch_size: 32
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ {width} ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ {width} ] }} ]
"""
    batching = (
        f"dynamic_batching {{ max_queue_delay_microseconds: {delay_us} preferred_batch_size: [ {preferred} ] }}\n"
    )
    for name, config in (("mlp_plain", base), ("mlp_batched", base + batching)):
        directory = root / name / "1"
        directory.mkdir(parents=True)
        onnx.save(model, directory / "model.onnx")
        (root / name / "config.pbtxt").write_text(config)
    return root


def run_costs(model: onnx.ModelProto, width: int, batches: tuple[int, ...], repeat: int = 40) -> dict[int, float]:
    """Median in-process ``session.run`` time (ms) of each batch size, interleaved so that a neighbour's load
    hits them alike; the server's onnxruntime settings (``OIP_ORT_INTRA_OP_THREADS``, ``OIP_ORT_ALLOW_SPINNING``)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(os.environ.get("OIP_ORT_INTRA_OP_THREADS", "0"))
    spinning = os.environ.get("OIP_ORT_ALLOW_SPINNING", "0") in ("1", "true", "True")
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {batch: {"x": np.zeros((batch, width), np.float32)} for batch in batches}
    samples: dict[int, list[float]] = {batch: [] for batch in batches}
    for index in range(repeat + 5):
        for batch in batches:
            started = time.perf_counter()
            session.run(None, feeds[batch])
            if index >= 5:
                samples[batch].append((time.perf_counter() - started) * 1000)
    return {batch: statistics.median(values) for batch, values in samples.items()}


def server_cpu_s(port: int) -> float:
    """CPU seconds (user + system) of ``oip serve --port <port>`` and its children, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, tuple[int, float]] = {}
    roots = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parents[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
        if b"serve" in command and str(port).encode() in command:
            roots.add(int(entry))
    total = 0.0
    for pid, (_, cpu) in parents.items():
        ancestor = pid
        while ancestor in parents and ancestor not in roots:
            ancestor = parents[ancestor][0]
        if ancestor in roots:
            total += cpu
    return total


def children_cpu_s() -> float:
    """CPU seconds of this process's finished children (perf_analyzer)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def model_stats(url: str, model: str) -> tuple[int, int, int]:
    """inference_count, execution_count and the ns spent in ``session.run`` (Triton's statistics extension)."""
    document = httpx.get(f"{url}/v2/models/{model}/stats").json()["model_stats"][0]
    infer_ns = sum(int(batch["compute_infer"]["ns"]) for batch in document["batch_stats"])
    return int(document["inference_count"]), int(document["execution_count"]), infer_ns


def point(tool: PerfAnalyzer, url: str, port: int, model: str, concurrency: int, seconds: float) -> dict[str, float]:
    """perf_analyzer at one concurrency: infer/s, p50 and p99 (ms), CPU ms per inference of the server and of
    perf_analyzer, rows per execution and ms per execution as the server timed its runs."""
    interval = max(int(seconds * 1000 / 3), 500)
    before, server0, client0 = model_stats(url, model), server_cpu_s(port), children_cpu_s()
    try:
        found = measure(tool, url.removeprefix("http://"), model, "http", concurrency, interval)
    except UnstableError:
        found = measure(tool, url.removeprefix("http://"), model, "http", concurrency, interval, stability=1000)
    after, server1, client1 = model_stats(url, model), server_cpu_s(port), children_cpu_s()
    inferences, executions = max(after[0] - before[0], 1), max(after[1] - before[1], 1)
    return {
        "rate": found.infer_per_second,
        "p50": found.p50_us / 1000,
        "p99": found.p99_us / 1000,
        "server_cpu": (server1 - server0) * 1000 / inferences,
        "client_cpu": (client1 - client0) * 1000 / inferences,
        "rows": inferences / executions,
        "run_ms": (after[2] - before[2]) / executions / 1e6,
    }


async def mixed_burst(url: str, width: int, concurrency: int) -> tuple[list[int], int, int]:
    """``concurrency`` requests at once to ``mlp_batched``, one of them with a bad shape: the status codes, and
    the inferences and executions they made."""
    good = {"inputs": [{"name": "x", "shape": [1, width], "datatype": "FP32", "data": [0.5] * width}]}
    bad = {"inputs": [{"name": "x", "shape": [1, width - 1], "datatype": "FP32", "data": [0.5] * (width - 1)}]}
    before = model_stats(url, "mlp_batched")
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        bodies = [bad if index == concurrency // 2 else good for index in range(concurrency)]
        responses = await asyncio.gather(*(client.post("/v2/models/mlp_batched/infer", json=b) for b in bodies))
    after = model_stats(url, "mlp_batched")
    return [response.status_code for response in responses], after[0] - before[0], after[1] - before[1]


def row(name: str, found: dict[str, Any]) -> str:
    return (
        f"{name:<28}{found['rate']:>9.0f}{found['p50']:>9.2f}{found['p99']:>9.2f}{found['server_cpu']:>11.2f}"
        f"{found['client_cpu']:>11.2f}{found['rows']:>8.2f}{found['run_ms']:>9.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--delay-us", type=int, default=2000)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--sweep", action="store_true", help="only the in-process run costs of several sizes")
    args = parser.parse_args()
    conc = args.concurrency
    load_before = os.getloadavg()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in load_before)} ({os.cpu_count()} CPUs)")
    if args.sweep:
        sizes = [(w, n) for w in (1024, 2048, 4096) for n in range(2, 7) if w * w * 4 * n <= 200 << 20]
    else:
        sizes = [(args.width, args.layers)]
    for width, layers in sizes:
        costs = run_costs(mlp(width, layers), width, (1, conc))
        print(
            f"session.run in process ({layers} layers of {width}x{width}, {width * width * 4 * layers >> 20} MB of "
            f"weights): batch 1 {costs[1]:.2f} ms, batch {conc} {costs[conc]:.2f} ms = "
            f"{costs[conc] / costs[1]:.2f}x batch 1 ({costs[1] / (costs[conc] / conc):.2f}x less per row)"
        )
    if args.sweep:
        print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        return
    tool = perf_analyzer()
    rounds: list[tuple[dict[str, float], dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as scratch:
        model = mlp(args.width, args.layers)
        repository = build_repository(Path(scratch), model, args.width, args.delay_us, conc)
        port = free_port()
        env = {"MODEL_REPOSITORY": str(repository), "OIP_WORKERS": "1"}
        with oip_server(port, env) as url:
            for index in range(args.rounds):
                order = ("mlp_plain", "mlp_batched") if index % 2 == 0 else ("mlp_batched", "mlp_plain")
                found = {name: point(tool, url, port, name, conc, args.seconds) for name in order}
                rounds.append((found["mlp_plain"], found["mlp_batched"]))
            lone = point(tool, url, port, "mlp_batched", 1, args.seconds)
            lone_plain = point(tool, url, port, "mlp_plain", 1, args.seconds)
            statuses, burst_inferences, burst_executions = asyncio.run(mixed_burst(url, args.width, conc))
    load_after = os.getloadavg()

    print("perf_analyzer, oip serve --workers 1; CPU ms per inference: the server's, perf_analyzer's")
    print(f"{'model':<28}{'infer/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'server cpu':>11}{'client cpu':>11}"
          f"{'rows':>8}{'run ms':>9}")  # fmt: skip
    ratios, cpu_ratios = [], []
    for index, (plain, batched) in enumerate(rounds):
        print(row(f"round {index + 1} mlp_plain c={conc}", plain))
        print(row(f"round {index + 1} mlp_batched c={conc}", batched))
        ratios.append(batched["rate"] / plain["rate"])
        cpu_ratios.append((plain["server_cpu"] + plain["client_cpu"]) / (batched["server_cpu"] + batched["client_cpu"]))
    print(row("mlp_batched, lone client", lone))
    print(row("mlp_plain, lone client", lone_plain))
    print(
        f"throughput ratio batched / plain at c={conc}, per round: {' '.join(f'{r:.2f}x' for r in ratios)} "
        f"(median {statistics.median(ratios):.2f}x, target >= 2x); CPU per inference plain / batched: "
        f"{' '.join(f'{r:.2f}x' for r in cpu_ratios)}"
    )
    budget = args.delay_us / 1000 + lone["run_ms"] + SLACK_MS
    verdict = "within" if lone["p99"] <= budget else "OVER"
    print(
        f"lone request p99 {lone['p99']:.2f} ms {verdict} its budget {budget:.2f} ms = delay "
        f"{args.delay_us / 1000:.2f} + one run {lone['run_ms']:.2f} (the server's, batch 1) + {SLACK_MS:.0f} ms; "
        f"p50 {lone['p50']:.2f} ms; without batching the lone p99 is {lone_plain['p99']:.2f} ms "
        f"(p50 {lone_plain['p50']:.2f}), so batching adds {lone['p99'] - lone_plain['p99']:.2f} ms at p99 "
        f"and {lone['p50'] - lone_plain['p50']:.2f} ms at p50"
    )
    print(
        f"{conc} concurrent requests, one with a bad shape: statuses {statuses}; the {burst_inferences} good ones "
        f"ran in {burst_executions} execution(s)"
    )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in load_after)}")


if __name__ == "__main__":
    main()
