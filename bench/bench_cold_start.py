"""Cold start of the Lambda package, measured in fresh processes with the runtime's Python (3.12).

    sam build && python -m bench.bench_cold_start [--build .aws-sam/build] [--runs 7]

Prints the median time of ``import handler.http`` (repository read, demo models loaded and warmed) next to the
floor ``import numpy, onnxruntime, fastapi, mangum`` plus the demo models' session creation, and the same
package with its bytecode removed (what a plain ``sam build`` ships: Lambda's read-only code directory makes
every cold start recompile). ``PYTHONDONTWRITEBYTECODE=1`` stands in for the read-only directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

FLOOR = "import numpy, onnxruntime, fastapi, mangum"
SESSIONS = (
    "import onnxruntime as ort; o = ort.SessionOptions(); o.intra_op_num_threads = 2; "
    "[ort.InferenceSession(f'models/{m}/1/model.onnx', o) for m in ('iris', 'tiny_image')]"
)
HANDLER = "import handler.http"


def _python() -> str:
    found = shutil.which("python3.12")
    pyenv = sorted(Path.home().glob(".pyenv/versions/3.12.*/bin/python3.12"))
    candidates = [p for p in [found, *map(str, pyenv)] if p]
    for candidate in candidates:
        if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    raise SystemExit("python3.12 is needed (the Lambda runtime's version)")


def _sample(python: str, package: Path, layer: Path, steps: list[str]) -> list[float]:
    """Seconds of each step, in one fresh process laid out as on Lambda (function code, then the layer)."""
    timed = "; ".join(f"t = time.perf_counter(); {step}; out.append(time.perf_counter() - t)" for step in steps)
    program = f"import time; out = []; {timed}; print(*out)"
    env = {
        **os.environ,
        "PYTHONPATH": f"{package}:{layer}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OIP_ORT_INTRA_OP_THREADS": "2",
    }
    result = subprocess.run([python, "-c", program], cwd=package, env=env, capture_output=True, text=True, check=True)
    return [float(x) for x in result.stdout.split()]


def _medians(python: str, package: Path, layer: Path, runs: int) -> tuple[float, float, float]:
    """Median floor, session creation and handler init; floor and handler processes alternate, so drift in
    the machine's load affects both alike."""
    floors, sessions, inits = [], [], []
    for _ in range(runs):
        floor, session = _sample(python, package, layer, [FLOOR, SESSIONS])
        floors.append(floor)
        sessions.append(session)
        inits.append(_sample(python, package, layer, [HANDLER])[0])
    return statistics.median(floors), statistics.median(sessions), statistics.median(inits)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", type=Path, default=Path(".aws-sam/build"))
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    python = _python()
    package = (args.build / "InferenceFunction").resolve()
    layer = (args.build / "DependenciesLayer" / "python").resolve()
    floor, sessions, ours = _medians(python, package, layer, args.runs)
    with tempfile.TemporaryDirectory() as scratch:
        bare, bare_layer = Path(scratch) / "package", Path(scratch) / "layer"
        shutil.copytree(package, bare, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(layer, bare_layer, ignore=shutil.ignore_patterns("__pycache__"))
        floor_no_bytecode, _, no_bytecode = _medians(python, bare, bare_layer, max(args.runs // 2, 3))
    target = 1.5 * floor + sessions
    print(f"floor ({FLOOR}): {floor * 1000:.0f} ms; demo sessions: {sessions * 1000:.0f} ms")
    print(f"init (import handler.http, models loaded and warmed): {ours * 1000:.0f} ms = "
          f"{ours / floor:.2f}x the floor; target 1.5x floor + sessions = {target * 1000:.0f} ms")  # fmt: skip
    print(f"without bytecode in the package: init {no_bytecode * 1000:.0f} ms, floor {floor_no_bytecode * 1000:.0f} ms "
          f"(bytecode saves {(no_bytecode - ours) * 1000:.0f} ms per cold start)")  # fmt: skip


if __name__ == "__main__":
    main()
