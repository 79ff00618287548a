"""What shadow serving costs the default version's answers: p50 and p99 at concurrency 1 on ``oip serve``, with no
shadow and with ``shadow_version`` at rate 1, side by side.

    python -m bench.bench_shadow [--rounds 3] [--requests 1500]

The model is the tests' classifier (``tests/support/shadow_models.py``: FP32 [1, 4] in, probabilities and a label
out), in two versions; version 2 shadows version 1 on one side and nothing shadows it on the other. Each round starts
``oip serve --workers 1`` anew for each side (the order alternating), sends 200 warm-up requests, then ``--requests``
requests one after another on one keep-alive connection, each timed from its send to its whole answer. The shadow
side also reports how many copies its metrics counted as compared and as dropped when the last answer came (the
counters file is written every 0.2 s at most, so the last copies may not be in yet).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.metrics_scrape import scrape
from tests.support.servers import oip_serve
from tests.support.shadow_models import classifier_repository, rows

LABELS = {"model": "clf", "version": "1", "shadow_version": "2"}


def measure(repository: Path, requests: int) -> tuple[list[float], dict[str, float]]:
    """Latencies in ms of ``requests`` answers, and the shadow's counts as the last answer came."""
    data = rows(requests + 200, seed=9)
    bodies = [
        {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row.tolist()}]} for row in data
    ]
    latencies = []
    with oip_serve(env={"MODEL_REPOSITORY": str(repository)}, workers=1, metrics=True) as server:
        with httpx.Client(base_url=f"http://{server.address}", timeout=30) as client:
            for index, body in enumerate(bodies):
                start = time.perf_counter()
                response = client.post("/v2/models/clf/infer", json=body)
                elapsed = time.perf_counter() - start
                assert response.status_code == 200, response.text
                if index >= 200:
                    latencies.append(elapsed * 1000)
        metrics = scrape(f"http://127.0.0.1:{server.metrics_port}/metrics")
        counts = {
            "compared": metrics.value("oip_shadow_compared_total", **LABELS),
            "overloaded": metrics.value("oip_shadow_failures_total", **LABELS, reason="overloaded"),
        }
    return latencies, counts


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        off = classifier_repository(Path(workdir) / "off", "clf", perturbed=True).parent
        on = classifier_repository(Path(workdir) / "on", "clf", perturbed=True, parameters={"shadow_version": "2"})
        sides = {"off": off, "rate 1": on.parent}
        results: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        for round_index in range(args.rounds):
            order = list(sides) if round_index % 2 == 0 else list(reversed(sides))
            for side in order:
                latencies, counts = measure(sides[side], args.requests)
                p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
                results[side].append((p50, p99))
                print(f"round {round_index + 1} {side}: p50 {p50:.3f} ms, p99 {p99:.3f} ms, shadow {counts}")
        print("| Shadow | p50 ms, median of rounds (lowest-highest) | p99 ms, median of rounds (lowest-highest) |")
        print("| --- | --- | --- |")
        for side, points in results.items():
            p50s, p99s = [p[0] for p in points], [p[1] for p in points]
            print(
                f"| {side} | {statistics.median(p50s):.3f} ({min(p50s):.3f}-{max(p50s):.3f}) "
                f"| {statistics.median(p99s):.3f} ({min(p99s):.3f}-{max(p99s):.3f}) |"
            )


if __name__ == "__main__":
    main()
