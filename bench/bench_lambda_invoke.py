"""Per-invocation time on Lambda, in-process: ``handler.http.lambda_handler`` against its floor, side by side.

    python -m bench.bench_lambda_invoke [--repeat 3000] [--event events/http-api/infer-json.json]

On Lambda each execution environment serves one request at a time and is billed per millisecond, so the time
one invocation takes is what counts. The floor is Mangum over a bare ASGI callable that parses the same V2 JSON
request with orjson, runs the same onnxruntime session on ``models/iris`` and answers with orjson: no checks,
no telemetry, no framework. Both answer the same event with the same values (checked before timing); the two
are timed in alternating blocks so that a noisy machine slows both alike. Prints p50 of each and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import orjson
from mangum import Mangum

ROOT = Path(__file__).resolve().parents[1]
IRIS = ROOT / "models" / "iris" / "1" / "model.onnx"


class FloorApp:
    """V2 JSON inference on iris, nothing else: the least an ASGI app must do to answer the event."""

    def __init__(self) -> None:
        self.session = ort.InferenceSession(str(IRIS), providers=["CPUExecutionProvider"])
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.datatypes = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        request = orjson.loads(message.get("body", b""))
        tensor = request["inputs"][0]
        data = np.asarray(tensor["data"], dtype=np.float32).reshape(tensor["shape"])
        results = self.session.run(self.outputs, {tensor["name"]: data})
        outputs = [
            {"name": name, "datatype": self.datatypes[r.dtype], "shape": list(r.shape), "data": r.ravel()}
            for name, r in zip(self.outputs, results, strict=True)
        ]
        body = orjson.dumps(
            {"id": request.get("id", ""), "model_name": "iris", "model_version": "1", "outputs": outputs},
            option=orjson.OPT_SERIALIZE_NUMPY,
        )
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


class Context:
    """The parts of a Lambda context object the handlers read."""

    function_name = "bench"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:bench"
    memory_limit_in_mb = 1024
    aws_request_id = "bench"
    log_group_name = "/aws/lambda/bench"
    log_stream_name = "bench"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


def _outputs(response: dict[str, Any]) -> dict[str, list[Any]]:
    document = json.loads(response["body"])
    return {o["name"]: np.asarray(o["data"]).round(6).tolist() for o in document["outputs"]}


def _timed(handler: Callable[[dict[str, Any], Any], Any], event: dict[str, Any], count: int) -> list[float]:
    context = Context()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        handler(event, context)
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3000, help="invocations of each (default: %(default)s)")
    parser.add_argument("--event", default=str(ROOT / "events" / "http-api" / "infer-json.json"))
    args = parser.parse_args()
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OIP")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    event = json.loads(Path(args.event).read_text())

    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the EMF metrics line of every invocation
        from handler.http import lambda_handler

        floor = Mangum(FloorApp(), lifespan="off")
        ours_answer, floor_answer = lambda_handler(event, Context()), floor(event, Context())
        assert ours_answer["statusCode"] == floor_answer["statusCode"] == 200, (ours_answer, floor_answer)
        assert _outputs(ours_answer) == _outputs(floor_answer), "the two handlers answer different values"
        ours: list[float] = []
        base: list[float] = []
        block = max(1, args.repeat // 10)
        for _ in range(10):
            ours += _timed(lambda_handler, event, block)
            base += _timed(floor, event, block)
    ours_p50, base_p50 = statistics.median(ours), statistics.median(base)
    print(f"event: {Path(args.event).relative_to(ROOT) if Path(args.event).is_relative_to(ROOT) else args.event}")
    print("| handler | p50 per invocation |")
    print("| --- | --- |")
    print(f"| handler.http.lambda_handler | {ours_p50:.0f} us |")
    print(f"| Mangum + bare ASGI floor | {base_p50:.0f} us |")
    print(f"ratio ours/floor: {ours_p50 / base_p50:.2f}x (goal <= 1.6x)")


if __name__ == "__main__":
    main()
