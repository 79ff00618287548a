"""Batch prediction throughput: rows per second through the S3 path (moto's S3 on 127.0.0.1, the real handler
code) versus calling the in-process model directly on the same rows, one request per row, side by side.

    python -m bench.bench_batch [--rows 20000] [--chunk-size 256]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from handler.protocol.settings import DEMO_REPOSITORY
from scripts.tool_env import executable


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--chunk-size", type=int, default=256)
    args = parser.parse_args()
    rows = np.random.default_rng(0).random((args.rows, 4)).astype(np.float32)

    session = ort.InferenceSession(str(DEMO_REPOSITORY / "iris" / "1" / "model.onnx"))
    start = time.perf_counter()
    for row in rows:
        session.run(None, {"input": row.reshape(1, 4)})
    direct = args.rows / (time.perf_counter() - start)

    port = _free_port()
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "OIP_BATCH_CHUNK_SIZE": str(args.chunk_size),
    }
    with (
        tempfile.TemporaryDirectory() as scratch,
        subprocess.Popen(
            [executable("moto", "moto_server"), "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ) as moto,
    ):
        try:
            source = Path(scratch) / "rows.jsonl"
            with source.open("w") as handle:
                for row in rows.tolist():
                    request = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row}]}
                    handle.write(json.dumps(request) + "\n")
            program = f"""
import time, boto3, json
for _ in range(100):
    try:
        boto3.client("s3").create_bucket(Bucket="bench"); break
    except Exception:
        time.sleep(0.1)
boto3.client("s3").upload_file({str(source)!r}, "bench", "input/iris/rows.jsonl")
from handler.batch.config import BatchConfig
from handler.batch.s3 import process_object
from handler.runtime import container
from handler.batch.service import batch_service
service = batch_service()
manifest = process_object("bench", "input/iris/rows.jsonl", BatchConfig.from_env(), service)
print(json.dumps(manifest))
"""
            result = subprocess.run(
                [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
            )
            manifest = json.loads(result.stdout.strip().splitlines()[-1])
        finally:
            moto.terminate()
    ours = manifest["rows_per_second"]
    print(f"{args.rows} iris rows: S3 path {ours:.0f} rows/s (download, predict, upload, manifest) vs "
          f"direct session.run per row {direct:.0f} rows/s: ratio {ours / direct:.2f} (target >= 0.5)")  # fmt: skip


if __name__ == "__main__":
    main()
