"""Cold start of the Lambda package, measured in fresh processes with the runtime's Python (3.12).

    sam build && python -m bench.bench_cold_start [--build .aws-sam/build] [--runs 7] [--baseline OTHER_BUILD]

Prints the median time of ``import handler.http`` (repository read, demo models loaded and warmed: Lambda's init
phase) and of the first invocation after it (``events/http-api/infer-json.json``, answer checked), next to the
floor ``import numpy, onnxruntime`` plus the demo models' session creation (what any ONNX model server must do), a
hand-built Lambda's floor ``import numpy, onnxruntime, fastapi, mangum`` for reference, the resident memory after
init (VmRSS) of the package and of the floor, and the same
package with its bytecode removed (what a plain ``sam build`` ships: Lambda's read-only code directory makes
every cold start recompile). ``PYTHONDONTWRITEBYTECODE=1`` stands in for the read-only directory.
Init + first invocation is what a cold request waits for: work moved from one to the other does not count.

``--baseline`` measures another build (e.g. one of the previous commit) in the same alternation, so that a change
is judged by a ratio taken side by side on this shared, noisy machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from scripts.tool_env import ToolError, find_python

FLOOR = "import numpy, onnxruntime"
FRAMEWORK = "import fastapi, mangum"
SESSIONS = (
    "import onnxruntime as ort; o = ort.SessionOptions(); o.intra_op_num_threads = 2; "
    "[ort.InferenceSession(f'models/{m}/1/model.onnx', o) for m in ('iris', 'tiny_image')]"
)
HANDLER = "import handler.http"
EVENT = Path(__file__).resolve().parents[1] / "events" / "http-api" / "infer-json.json"
FIRST_INVOCATION = "answer = handler.http.lambda_handler(event, Context())"
#: Untimed: the event and a context with what Powertools' Logger reads.
SETUP = (
    f"import json; event = json.loads(open({str(EVENT)!r}).read())\n"
    "class Context:\n"
    "    function_name = 'bench'; memory_limit_in_mb = 3008; aws_request_id = 'bench'\n"
    "    invoked_function_arn = 'arn:aws:lambda:us-east-1:000000000000:function:bench'\n"
)
#: Resident memory now, in MB (the floor's after its sessions, the package's after init).
RSS = "rss = next(int(line.split()[1]) / 1024 for line in open('/proc/self/status') if line.startswith('VmRSS'))"
CHECK = "assert answer['statusCode'] == 200 and b'probabilities' in answer['body'].encode(), answer"


def _python() -> str:
    try:
        return find_python("3.12")
    except ToolError as exc:
        raise SystemExit(f"{exc}: it is needed as the Lambda runtime's version") from exc


def _sample(python: str, package: Path, layer: Path, steps: list[str], rss_after: int, check: str = "") -> list[float]:
    """Seconds of each step, in one fresh process laid out as on Lambda (function code, then the layer), with the
    process's resident memory (MB) after the first ``rss_after`` steps in its place among them."""
    timed = [f"t = time.perf_counter(); {step}; out.append(time.perf_counter() - t)" for step in steps]
    timed.insert(rss_after, f"{RSS}; out.append(rss)")
    program = f"{SETUP}import time; out = []; {'; '.join(timed)}; {check or 'pass'}; print(*out)"
    env = {
        **os.environ,
        "PYTHONPATH": f"{package}:{layer}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OIP_ORT_INTRA_OP_THREADS": "2",
    }
    result = subprocess.run([python, "-c", program], cwd=package, env=env, capture_output=True, text=True, check=True)
    return [float(x) for x in result.stdout.splitlines()[-1].split()]  # after the invocation's EMF metrics


@dataclass
class Medians:
    floor: float  # import numpy, onnxruntime
    sessions: float  # the demo sessions' creation
    floor_rss: float  # MB after the floor's sessions
    framework: float  # import fastapi, mangum after the floor: a hand-built Lambda's floor
    init: float
    rss: float  # MB after init
    first: float  # the first invocation after init
    cold: float  # init + first invocation, the median of their sums

    @property
    def base(self) -> float:
        """What any ONNX model server must do: import numpy and onnxruntime, create the sessions."""
        return self.floor + self.sessions


def _medians(python: str, packages: list[tuple[Path, Path]], runs: int) -> list[Medians]:
    """Medians for each (package, layer), the floor measured in the first one's layout; floor and handler
    processes alternate, so drift in the machine's load affects all alike."""
    samples: list[list[list[float]]] = [[] for _ in packages]
    for _ in range(runs):
        floor, session, floor_rss, framework = _sample(python, *packages[0], [FLOOR, SESSIONS, FRAMEWORK], 2)
        for index, (package, layer) in enumerate(packages):
            init, rss, first = _sample(python, package, layer, [HANDLER, FIRST_INVOCATION], 1, CHECK)
            samples[index].append([floor, session, floor_rss, framework, init, rss, first, init + first])
    return [Medians(*(statistics.median(column) for column in zip(*rows, strict=True))) for rows in samples]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", type=Path, default=Path(".aws-sam/build"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another build, measured alternately with --build")
    parser.add_argument("--no-bare", action="store_true", help="skip the package without bytecode")
    args = parser.parse_args()
    python = _python()
    builds = [args.build, *([args.baseline] if args.baseline else [])]
    packages = [((b / "InferenceFunction").resolve(), (b / "DependenciesLayer" / "python").resolve()) for b in builds]
    results = _medians(python, packages, args.runs)
    ours = results[0]
    print(f"floor ({FLOOR}): {ours.floor * 1000:.0f} ms; demo sessions: {ours.sessions * 1000:.0f} ms; "
          f"floor + sessions {ours.base * 1000:.0f} ms, {ours.floor_rss:.1f} MB resident; "
          f"a hand-built Lambda's floor ({FLOOR}; {FRAMEWORK}) {(ours.floor + ours.framework) * 1000:.0f} ms "
          f"({args.runs} runs, medians)")  # fmt: skip
    for build, result in zip(builds, results, strict=True):
        print(f"{build}: init (import handler.http, models loaded and warmed) {result.init * 1000:.0f} ms, "
              f"{result.rss:.1f} MB resident; first invocation (infer-json) {result.first * 1000:.1f} ms; "
              f"init + first invocation {result.cold * 1000:.0f} ms = {result.cold / ours.base:.2f}x the floor + "
              f"sessions")  # fmt: skip
    if args.baseline:
        base = results[1]
        print(f"--build / --baseline: init {ours.init / base.init:.3f}, init + first invocation "
              f"{ours.cold / base.cold:.3f}, resident memory {ours.rss / base.rss:.3f}")  # fmt: skip
    if args.no_bare:
        return
    package, layer = packages[0]
    with tempfile.TemporaryDirectory() as scratch:
        bare, bare_layer = Path(scratch) / "package", Path(scratch) / "layer"
        shutil.copytree(package, bare, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(layer, bare_layer, ignore=shutil.ignore_patterns("__pycache__"))
        (no_bytecode,) = _medians(python, [(bare, bare_layer)], max(args.runs // 2, 3))
    print(f"without bytecode in the package: init {no_bytecode.init * 1000:.0f} ms, "
          f"floor {no_bytecode.floor * 1000:.0f} ms "
          f"(bytecode saves {(no_bytecode.init - ours.init) * 1000:.0f} ms per cold start)")  # fmt: skip


if __name__ == "__main__":
    main()
