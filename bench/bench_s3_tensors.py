"""What a tensor by reference in S3 costs: a 40 MB FP32 round trip (40 MB in, 40 MB out, an identity model) through
``oip serve``, inline in the binary extension (tritonclient, where the body limit allows it: raised here to 64 MiB)
against by reference (``S3TensorClient``: upload, infer, fetch), side by side in alternating rounds. S3 is moto's
standalone server on 127.0.0.1, so the reference's times are those of S3's API over loopback, without the network.

    python -m bench.bench_s3_tensors [--megabytes 40] [--rounds 5]

Prints the median of each case: inline; by reference whole (upload + infer + fetch, what a client waits); and the
server's part alone (the input already in S3, the output written but not fetched).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tritonclient.http as triton_http

from bench.common import oip_server
from tests.support import onnx_models
from tests.support.servers import HeldPort, moto_server


def _timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    elements = args.megabytes * 1_000_000 // 4
    x = np.random.default_rng(0).standard_normal(elements, dtype=np.float32)

    with tempfile.TemporaryDirectory() as scratch, moto_server() as s3_url:
        repository = Path(scratch) / "models"
        onnx_models.save(onnx_models.identity("FP32", [-1]), repository, "identity")
        aws = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
        os.environ.update({**aws, "AWS_ENDPOINT_URL": s3_url})
        import boto3

        from handler.codecs.s3_client import S3TensorClient

        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        boto3.client("s3").create_bucket(Bucket=bucket)
        prefix = f"s3://{bucket}/tensors/"
        env = {
            **aws,
            "AWS_ENDPOINT_URL": s3_url,
            "MODEL_REPOSITORY": str(repository),
            "OIP_S3_TENSOR_PREFIXES": prefix,
            "OIP_MAX_BODY_BYTES": str(64 * 1024 * 1024),
            "OIP_WORKERS": "1",
        }
        with HeldPort() as held, oip_server(held.port, env) as url:
            address = url.removeprefix("http://")
            client = triton_http.InferenceServerClient(address, network_timeout=600, connection_timeout=60)
            tensors = S3TensorClient(prefix)

            def inline() -> None:
                tensor = triton_http.InferInput("INPUT0", [elements], "FP32")
                tensor.set_data_from_numpy(x, binary_data=True)
                output = triton_http.InferRequestedOutput("OUTPUT0", binary_data=True)
                result = client.infer("identity", [tensor], outputs=[output])
                assert result.as_numpy("OUTPUT0").shape == (elements,)

            def by_reference() -> None:
                inputs = tensors.triton_inputs(triton_http, {"INPUT0": x})
                result = client.infer("identity", inputs, outputs=tensors.triton_outputs(triton_http, ["OUTPUT0"]))
                assert tensors.fetch(result)["OUTPUT0"].shape == (elements,)

            staged = f"{prefix}staged/x"
            tensors.upload(staged, x)

            def server_part() -> None:
                tensor = triton_http.InferInput("INPUT0", [elements], "FP32")
                tensor.set_shared_memory(staged, x.nbytes)
                output = triton_http.InferRequestedOutput("OUTPUT0")
                output.set_shared_memory(f"{prefix}staged/y", x.nbytes)
                client.infer("identity", [tensor], outputs=[output])

            cases = {"inline (binary)": inline, "by reference": by_reference, "by reference, server": server_part}
            for case in cases.values():  # warm-up: connections, first allocations
                case()
            times: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, case in cases.items():
                    times[name].append(_timed(case))
            tensors.cleanup()
            client.close()
    print(f"{args.megabytes} MB FP32 in, {args.megabytes} MB out, identity model, {args.rounds} rounds (ms):")
    for name, samples in times.items():
        print(f"  {name:24} median {statistics.median(samples):8.1f}   min {min(samples):8.1f}")


if __name__ == "__main__":
    main()
