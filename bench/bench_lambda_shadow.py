"""What shadow serving costs a Lambda invocation: p50 and p99 of ``handler.http.lambda_handler`` in process (an HTTP
API event in, the response dict out), with no shadow and with ``shadow_version`` at rate 1, side by side.

    python -m bench.bench_lambda_shadow [--rounds 3] [--requests 1500]

The model is the tests' classifier (``tests/support/shadow_models.py``: FP32 [1, 4] in, probabilities and a label
out), in two versions, version 2 perturbed; it shadows version 1 on one side and nothing shadows it on the other.
Each round runs each side in a fresh process (the order alternating): 200 warm-up invocations, then ``--requests``
invocations one after another, each timed from the call to its return, which on the shadow side includes the copy
the invocation runs after its answer is complete (the time the client waits).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.shadow_models import classifier_repository

ROOT = Path(__file__).resolve().parents[1]

#: One side: argv[1] invocations after 200 warm-up ones, their latencies in ms as a JSON list on the last line.
SIDE = """
import json, sys, time
from handler.cli.lambda_context import LocalLambdaContext
from handler.http import lambda_handler
from tests.support.shadow_models import rows
event = json.loads(open(sys.argv[2]).read())
event["rawPath"] = event["requestContext"]["http"]["path"] = "/v2/models/clf/infer"
latencies = []
for index, row in enumerate(rows(int(sys.argv[1]) + 200, seed=9)):
    event["body"] = json.dumps({"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32",
                                            "data": row.tolist()}]})
    start = time.perf_counter()
    answer = lambda_handler(event, LocalLambdaContext())
    elapsed = time.perf_counter() - start
    assert answer["statusCode"] == 200, answer
    if index >= 200:
        latencies.append(elapsed * 1000)
sys.stdout.write("\\n" + json.dumps(latencies) + "\\n")
"""


def measure(repository: Path, requests: int) -> list[float]:
    """Latencies in ms of ``requests`` invocations in a fresh process serving ``repository``."""
    env = {**os.environ, "MODEL_REPOSITORY": str(repository), "OIP_WARM_UP": "0"}
    event = ROOT / "events" / "http-api" / "infer-json.json"
    done = subprocess.run(
        [sys.executable, "-c", SIDE, str(requests), str(event)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        sides = {
            "off": classifier_repository(Path(directory) / "off", "clf", perturbed=True).parent,
            "shadow_version at rate 1": classifier_repository(
                Path(directory) / "on", "clf", perturbed=True, parameters={"shadow_version": "2"}
            ).parent,
        }
        found: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for round_ in range(args.rounds):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                latencies = measure(sides[name], args.requests)
                found[name].append((percentile(latencies, 0.5), percentile(latencies, 0.99)))
    print("| Shadow | p50 ms, median of rounds (lowest-highest) | p99 ms, median of rounds (lowest-highest) |")
    print("| --- | --- | --- |")
    for name, rounds in found.items():
        cells = []
        for index in (0, 1):
            values = [r[index] for r in rounds]
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
