"""Batch prediction throughput on the same iris rows, every contender a whole process, run interleaved (the order
turns each round) so that a shared machine's load falls on all of them alike:

- ``hand loop``: what a user writes without oip: orjson.loads per line, np.asarray, session.run per row, orjson.dumps
  per answer, over the .jsonl of V2 requests;
- ``oip batch .jsonl``: the same file through ``oip batch``;
- ``floor``: session.run on chunks of the parsed array (the .npy of the same rows loaded), nothing written;
- ``oip batch .npy``: that .npy through ``oip batch``;
- with ``--s3``: the batch Lambda handler in a process of its own on the .jsonl as an S3 object (an S3 ObjectCreated
  event, and a Step Functions item), against moto's S3 on 127.0.0.1, its log lines (the function's telemetry) written
  to a file as Lambda's log agent would take them; the object is uploaded before that process starts.

Rows per second are the rows over each process's wall time (start to exit) and, for the batch paths, over the
prediction alone as the manifest reports it (``rows_per_second``; for the floor, its loop of ``session.run`` alone);
CPU seconds are the process's user + system time.

    python -m bench.bench_batch [--rows 100000] [--rounds 3] [--chunk-size 256] [--s3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from handler.config.settings import DEMO_REPOSITORY

MODEL = DEMO_REPOSITORY / "iris" / "1" / "model.onnx"

HAND_LOOP = """
import sys, numpy as np, orjson, onnxruntime as ort
session = ort.InferenceSession(sys.argv[1])
with open(sys.argv[2], "rb") as lines, open(sys.argv[3], "wb") as out:
    for number, line in enumerate(lines, start=1):
        request = orjson.loads(line)
        tensor = request["inputs"][0]
        array = np.asarray(tensor["data"], dtype=np.float32).reshape(tensor["shape"])
        probabilities, label = session.run(None, {tensor["name"]: array})
        answer = {"id": str(number), "model_name": "iris", "outputs": [
            {"name": "probabilities", "datatype": "FP32", "shape": list(probabilities.shape),
             "data": probabilities.ravel()},
            {"name": "label", "datatype": "INT64", "shape": list(label.shape), "data": label.ravel()}]}
        out.write(orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY) + b"\\n")
"""

FLOOR = """
import json, sys, time, numpy as np, onnxruntime as ort
session = ort.InferenceSession(sys.argv[1])
rows, size = np.load(sys.argv[2]), int(sys.argv[3])
started = time.perf_counter()
for start in range(0, len(rows), size):
    session.run(None, {"input": rows[start : start + size]})
print(json.dumps({"rows_per_second": len(rows) / (time.perf_counter() - started)}))
"""

S3_UPLOAD = """
import sys, time
import boto3
bucket, key, source = sys.argv[1:4]
for _ in range(100):
    try:
        boto3.client("s3").create_bucket(Bucket=bucket); break
    except Exception:
        time.sleep(0.1)
boto3.client("s3").upload_file(source, bucket, key)
"""

S3_RUN = """
import sys
import boto3
bucket, key, source, kind = sys.argv[1:5]
from handler.batch import lambda_handler
from handler.cli.lambda_context import LocalLambdaContext
if kind == "s3":
    event = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                          "s3": {"bucket": {"name": bucket}, "object": {"key": key}}}]}
else:
    event = {"Items": [{"Key": key}], "BatchInput": {"bucket": bucket}}
lambda_handler(event, LocalLambdaContext())
from handler.batch.config import BatchConfig
from handler.batch.s3 import output_keys
manifest = output_keys(key, BatchConfig.from_env())[1]
sys.stderr.write(boto3.client("s3").get_object(Bucket=bucket, Key=manifest)["Body"].read().decode())
"""


@dataclass
class Contender:
    """One way to predict the rows, and what its runs measured."""

    name: str
    run: Callable[[int], subprocess.CompletedProcess[str]]
    #: What a round needs before it is timed (the S3 object uploaded).
    prepare: Callable[[int], object] | None = None
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    inner: list[float] = field(default_factory=list)


def _timed(contender: Contender, round_number: int, rows: int) -> None:
    if contender.prepare is not None:
        contender.prepare(round_number)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = contender.run(round_number)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{contender.name} failed: {done.stderr.strip()[-2000:]}")
    contender.walls.append(rows / wall)
    contender.cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    if done.stdout.strip().startswith("{"):  # a batch path's manifest
        contender.inner.append(json.loads(done.stdout)["rows_per_second"])


def _write_rows(scratch: Path, rows: np.ndarray) -> tuple[Path, Path]:
    jsonl, npy = scratch / "rows.jsonl", scratch / "rows.npy"
    with jsonl.open("wb") as handle:
        for row in rows.tolist():
            request = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row}]}
            handle.write(orjson.dumps(request) + b"\n")
    np.save(npy, rows)
    return jsonl, npy


def _oip_batch(source: Path, output: Path, chunk_size: int) -> Callable[[int], subprocess.CompletedProcess[str]]:
    command = [sys.executable, "-m", "handler.cli", "batch", str(source), "--model", "iris", "--quiet",
               "--model-repository", str(DEMO_REPOSITORY), "--output", str(output),
               "--chunk-size", str(chunk_size)]  # fmt: skip
    manifest = output.with_name(output.name.removesuffix(".jsonl") + ".manifest.json")

    def run(_: int) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        return subprocess.CompletedProcess(done.args, done.returncode, manifest.read_text(), done.stderr)

    return run


def _python(program: str, *arguments: str) -> Callable[[int], subprocess.CompletedProcess[str]]:
    return lambda _: subprocess.run([sys.executable, "-c", program, *arguments], capture_output=True, text=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _s3(kind: str, source: Path, env: dict[str, str]) -> Contender:
    """The batch Lambda handler on ``source`` as an S3 object (``kind``: ``s3`` an S3 event, ``sfn`` a Step
    Functions item), uploaded before the timed process starts."""

    def key(round_number: int) -> str:
        return f"input/iris/{kind}-{round_number}.jsonl"  # a new object each round: a predicted one is skipped

    def prepare(round_number: int) -> None:
        command = [sys.executable, "-c", S3_UPLOAD, "bench", key(round_number), str(source)]
        subprocess.run(command, check=True, env=env)

    def run(round_number: int) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", S3_RUN, "bench", key(round_number), str(source), kind]
        with (source.parent / f"{kind}.log").open("w") as log:  # the function's log lines (EMF), as CloudWatch's
            done = subprocess.run(command, stdout=log, stderr=subprocess.PIPE, text=True, env=env)
        return subprocess.CompletedProcess(done.args, done.returncode, done.stderr, done.stderr)

    name = "S3 object (Lambda)" if kind == "s3" else "Step Functions item (Lambda)"
    return Contender(name, run, prepare=prepare)


def _table(contenders: list[Contender]) -> str:
    by_name = {c.name: c for c in contenders}
    hand = statistics.median(by_name["hand loop"].walls)
    floor = statistics.median(by_name["floor"].walls)
    lines = ["| contender | rows/s (whole process) | CPU s | rows/s (prediction, manifest) | vs hand loop "
             "| time vs floor |", "| --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for c in contenders:
        wall = statistics.median(c.walls)
        inner = f"{statistics.median(c.inner):,.0f}" if c.inner else "-"
        lines.append(f"| {c.name} | {wall:,.0f} | {statistics.median(c.cpus):.2f} | {inner} | "
                     f"{wall / hand:.2f}x | {floor / wall:.2f}x |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--s3", action="store_true", help="also the S3 object and Step Functions paths (moto)")
    args = parser.parse_args()
    rows = np.random.default_rng(0).random((args.rows, 4)).astype(np.float32)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        jsonl, npy = _write_rows(scratch, rows)
        contenders = [
            Contender("hand loop", _python(HAND_LOOP, str(MODEL), str(jsonl), str(scratch / "hand.out"))),
            Contender("oip batch .jsonl", _oip_batch(jsonl, scratch / "jsonl.predictions.jsonl", args.chunk_size)),
            Contender("floor", _python(FLOOR, str(MODEL), str(npy), str(args.chunk_size))),
            Contender("oip batch .npy", _oip_batch(npy, scratch / "npy.predictions.jsonl", args.chunk_size)),
        ]
        moto = None
        if args.s3:
            from scripts.tool_env import executable

            port = _free_port()
            env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                   "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                   "OIP_BATCH_CHUNK_SIZE": str(args.chunk_size), "MODEL_REPOSITORY": str(DEMO_REPOSITORY)}  # fmt: skip
            moto = subprocess.Popen([executable("moto", "moto_server"), "-p", str(port)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            contenders += [_s3("s3", jsonl, env), _s3("sfn", jsonl, env)]
        try:
            for round_number in range(args.rounds):
                turn = round_number % len(contenders)
                for contender in contenders[turn:] + contenders[:turn]:
                    _timed(contender, round_number, args.rows)
        finally:
            if moto is not None:
                moto.terminate()
                moto.wait()
    load_after = os.getloadavg()
    print(f"{args.rows:,} iris rows, chunk size {args.chunk_size}, median of {args.rounds} interleaved rounds")
    print(f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} CPUs")  # fmt: skip
    print(_table(contenders))


if __name__ == "__main__":
    main()
