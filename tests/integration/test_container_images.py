"""The container images start with their defaults. No Docker engine runs here, so each test lays out a directory
as the Dockerfile lays out the image (its COPY lines; image paths mapped under tmp_path), sets the Dockerfile's
ENV, and runs the image's own CMD and HEALTHCHECK commands in subprocesses."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.servers import Child, HeldPort, running

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"

pytestmark = pytest.mark.integration


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def _exec_form(arguments: str) -> list[str]:
    assert arguments.startswith("["), f"use the exec form: {arguments}"
    return json.loads(arguments)


def env_of(dockerfile: Path) -> dict[str, str]:
    env = {}
    for keyword, rest in instructions(dockerfile):
        if keyword == "ENV":
            env.update(token.split("=", 1) for token in shlex.split(rest))
    return env


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule for these patterns: the last matching pattern wins; `!` re-includes."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.removeprefix("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p, pattern.replace("**/", "")) for p in prefixes):
            ignored = not negate
    return ignored


def _dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("dockerfile", ["Dockerfile.edge", "Dockerfile.lambda"])
def test_dockerignore_keeps_the_context_to_what_is_copied(dockerfile: str) -> None:
    patterns = _dockerignore()
    for keyword, rest in instructions(INFRA / dockerfile):
        if keyword == "COPY":
            for source in shlex.split(rest)[:-1]:
                assert not _ignored(source, patterns), source
    for unwanted in [".git", ".aws-sam/build/template.yaml", ".venv/bin/python", ".venv-tools/sam/bin/sam", "tests",
                     "bench", ".env", "handler/__pycache__/app.cpython-311.pyc", ".pytest_cache"]:  # fmt: skip
        assert _ignored(unwanted, patterns), unwanted


def test_edge_image_declares_a_healthcheck_and_a_non_root_user() -> None:
    keywords = dict(instructions(INFRA / "Dockerfile.edge"))
    assert keywords["USER"] not in ("root", "0")
    assert "HEALTHCHECK" in keywords and "/v2/health/ready" in keywords["HEALTHCHECK"]


def _healthcheck_command(dockerfile: Path) -> list[str]:
    rest = dict(instructions(dockerfile))["HEALTHCHECK"]
    return _exec_form(rest[rest.index("CMD") + len("CMD") :].strip())


def test_edge_image_starts_with_its_defaults(tmp_path: Path) -> None:
    dockerfile = INFRA / "Dockerfile.edge"
    image_root = tmp_path / "image"
    workdir = image_root / "app"
    workdir.mkdir(parents=True)
    # pip install . puts the packages in site-packages, away from /app (whose models/ the ENV names).
    site = image_root / "site-packages"
    site.mkdir()
    for keyword, rest in instructions(dockerfile):
        if keyword == "COPY":
            *sources, _ = shlex.split(rest)
            for source in sources:
                target = workdir / Path(source).name
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__"))
                    if source in ("handler", "adapters", "proto"):
                        shutil.copytree(ROOT / source, site / source, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy(ROOT / source, target)
    held = HeldPort()
    image_env = {key: value.replace("/app", str(workdir)) for key, value in env_of(dockerfile).items()}
    assert image_env["OIP_DEFAULT_REPOSITORY"] == str(workdir / "models")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OIP_", "MODEL_"))}
    # Metrics off: its fixed default port (8002) would collide with other servers on this machine.
    env.update(image_env, OIP_PORT=str(held.port), OIP_HOST="127.0.0.1", OIP_METRICS_PORT="0", PYTHONPATH=str(site))
    entrypoint = _exec_form(dict(instructions(dockerfile))["ENTRYPOINT"])
    assert entrypoint == ["oip-entrypoint"]  # COPY infra/entrypoint.sh /usr/local/bin/oip-entrypoint
    command = _exec_form(dict(instructions(dockerfile))["CMD"])
    # the entrypoint runs `oip serve CMD...`: the console script beside this interpreter, on PATH as in the image
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    health = _healthcheck_command(dockerfile)
    assert health[0] == "python"

    def healthy(_: Child) -> bool:
        return subprocess.run([sys.executable, *health[1:]], env=env, capture_output=True, timeout=30).returncode == 0

    with held, running("the edge image", ["sh", str(INFRA / "entrypoint.sh"), *command], healthy, env=env, cwd=workdir):
        models = httpx.post(f"http://127.0.0.1:{held.port}/v2/repository/index").json()
        assert {m["name"] for m in models} >= {"iris", "tiny_image"}
        # the code served is the image's copy, not this checkout's
        assert (site / "handler").is_dir()


def test_lambda_image_names_its_default_repository() -> None:
    env = env_of(INFRA / "Dockerfile.lambda")
    assert env["MODEL_REPOSITORY"] == "/var/task/models"
    copies = [shlex.split(rest) for keyword, rest in instructions(INFRA / "Dockerfile.lambda") if keyword == "COPY"]
    assert ["models", "${LAMBDA_TASK_ROOT}/models"] in copies
    assert _exec_form(dict(instructions(INFRA / "Dockerfile.lambda"))["CMD"]) == ["handler.http.lambda_handler"]
