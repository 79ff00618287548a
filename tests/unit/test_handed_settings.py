"""The settings ``oip serve``'s supervisor hands its workers (``hand_to_workers``): a forked worker, and with one
worker the supervisor's own process, builds its app from that object; a fresh interpreter from its environment."""

from __future__ import annotations

import os
import subprocess
import sys

from handler.config.settings import DEMO_REPOSITORY

SCRIPT = """
import multiprocessing, sys
from handler.config.settings import Settings, hand_to_workers
from handler.server import app_from_env

def name() -> str:
    return app_from_env().state.dataplane.server_name

if sys.argv[1] == "hand":
    hand_to_workers(Settings.from_env(server_name="handed"))
context = multiprocessing.get_context("fork")
answers = context.SimpleQueue()
worker = context.Process(target=lambda: answers.put(name()))
worker.start()
forked = answers.get()
worker.join()
print(name(), forked)
"""


def _names(mode: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OIP_", "MODEL_REPOSITORY", "AIP_", "SAGEMAKER_"))}
    env |= {"OIP_SERVER_NAME": "from-environment", "OIP_EAGER_LOAD": "0", "MODEL_REPOSITORY": str(DEMO_REPOSITORY)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.split()


def test_a_worker_builds_its_app_from_the_settings_it_inherits() -> None:
    """Handed settings win over the environment, in the process itself and in a worker forked from it."""
    assert _names("hand") == ["handed", "handed"]


def test_a_process_handed_nothing_reads_its_environment() -> None:
    assert _names("none") == ["from-environment", "from-environment"]
