"""MLServer in a virtualenv of its own (``mlserver`` in scripts/tool_env.py): its pins must never touch the product's.

The first use creates the venv with ``python -m venv`` and pip; later uses find it by a stamp file.
``run_mlserver(script, payload)`` runs a Python script there with a JSON payload on stdin, returning its JSON.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from scripts.tool_env import executable


def mlserver_python() -> str:
    """MLServer's interpreter (its venv is created on first use, scripts/tool_env.py)."""
    return executable("mlserver", "python")


def run_mlserver(script: str, payload: Any = None) -> Any:
    """Run ``script`` under MLServer's interpreter; it reads JSON from stdin and prints JSON."""
    done = subprocess.run(
        [mlserver_python(), "-c", script], input=json.dumps(payload), capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"MLServer script failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


if __name__ == "__main__":
    print(mlserver_python())
