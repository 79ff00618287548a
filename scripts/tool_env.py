"""Tools whose pins conflict with the product's, each in a virtualenv of its own under ``OIP_TOOLS_DIR/<name>``.

The product's environment (``pip install -e '.[dev]' -c requirements-dev.txt``) holds the versions that ship in the
Lambda package (``requirements-lambda.txt``). These tools pin other versions (aws-sam-cli pins click and boto3,
nvidia-pytriton pins numpy<2, ...), so they never go there. The first use creates the venv with ``python -m venv``
and pip; later uses find it (a stamp file records what was installed, and a changed list rebuilds the venv).
The venvs live outside the work tree (``OIP_TOOLS_DIR``, default ``~/.cache/oip-serverless/tools``), so that
every clone on a machine (CI's included) reuses them and ``sam build`` never copies them.

    python -m scripts.tool_env sam checkov      # create them ahead of time (the tests do it on first use)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS_DIR = Path(os.environ.get("OIP_TOOLS_DIR") or Path.home() / ".cache" / "oip-serverless" / "tools")
STAMP = ".oip-tool.json"


@dataclass(frozen=True)
class Tool:
    requirements: tuple[str, ...]
    #: the interpreter version the venv is made with (None: the one running this)
    python: str | None = None
    #: also the project's runtime dependencies with these extras (pyproject.toml), at requirements-dev.txt's
    #: versions, so the venv can import handler/ from the work tree (``PYTHONPATH``); None: the tool alone
    project_extras: tuple[str, ...] | None = None


TOOLS: dict[str, Tool] = {
    # sam (validate --lint, build, local generate-event) and cfn-lint, which aws-sam-cli depends on.
    "sam": Tool(("aws-sam-cli==1.170.0",)),
    # moto's standalone server (S3, SQS, Firehose over HTTP on 127.0.0.1).
    "moto": Tool(("moto[server]==5.2.1",)),
    # The tritonserver binary in the nvidia-pytriton wheel (pins numpy<2). Its Python-backend stub runs the test
    # models' model.py with this venv's site-packages first on PYTHONPATH, so numpy and onnxruntime are here too.
    "pytriton": Tool(("nvidia-pytriton==0.7.0", "onnxruntime==1.32.0")),
    # checkov's CloudFormation checks (and its Kubernetes checks over infra/kubernetes/).
    "checkov": Tool(("checkov==3.3.30",)),
    # Kubernetes' own OpenAPI schemas, bundled for every release, to validate infra/kubernetes/'s manifests.
    "kubernetes-validate": Tool(("kubernetes-validate==1.37.0",)),
    # The real Lambda Runtime Interface Client under the Lambda runtime's Python, with the boto3 that the runtime
    # provides (the package leaves botocore out).
    "awslambdaric": Tool(("awslambdaric==4.2.2", "boto3==1.44.5"), python="3.12"),
    # MLServer, whose own codecs and types check ours (it predates pandas 3's str dtype).
    "mlserver": Tool(("mlserver==1.7.1", "pandas<3")),
    # KServe's Python SDK clients (InferenceRESTClient, InferenceGRPCClient), which pin their own fastapi, pydantic,
    # grpcio, protobuf and numpy (tests/support/kserve_env.py). No storage extra: the clients need none.
    "kserve": Tool(("kserve==0.21.0",)),
    # perf_analyzer ships in the tritonclient 2.51.0 wheel (newer ones need a newer glibc), with the CUDA runtime
    # library it links (bench/perf_analyzer.py).
    "perf_analyzer": Tool(("tritonclient==2.51.0", "nvidia-cuda-runtime-cu12")),
    # google-cloud-storage (the ``gcs`` extra) with a local GCS emulator, to read gs:// model repositories
    # (adapters/repository/gcs.py) against it.
    "gcs": Tool(("google-cloud-storage==3.17.1", "gcp-storage-emulator==2026.7.19")),
    # Other ways to run ``oip serve``'s app with several workers (bench/bench_servers.py): gunicorn with uvicorn's
    # worker class and granian, beside the app's own dependencies at the lock's versions.
    "servers": Tool(("gunicorn==27.0.1", "uvicorn-worker==0.4.0", "granian[uvloop]==2.8.7"), project_extras=("grpc",)),
}


class ToolError(RuntimeError):
    pass


def find_python(version: str) -> str:
    """An interpreter of ``version`` (e.g. "3.12"): on PATH, else one installed by pyenv (``PYENV_ROOT``)."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    pyenv = sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"))
    candidates = [shutil.which(f"python{version}"), *map(str, pyenv)]
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    raise ToolError(f"python{version} is not installed (on PATH or under pyenv)")


def project_requirements(extras: tuple[str, ...]) -> list[str]:
    """The project's runtime dependencies and those of ``extras``, as pyproject.toml lists them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    return [*project["dependencies"], *(requirement for extra in extras for requirement in optional[extra])]


def venv(name: str) -> Path:
    """The venv of tool ``name``, created (or rebuilt when its requirements changed) on first use."""
    spec = TOOLS[name]
    path = TOOLS_DIR / name
    requirements = list(spec.requirements)
    wanted: dict[str, object] = {"requirements": requirements, "python": spec.python or sys.version.split()[0]}
    constraints: list[str] = []
    if spec.project_extras is not None:  # a new lock rebuilds the venv; which clone made it does not matter
        requirements += project_requirements(spec.project_extras)
        lock_file = ROOT / "requirements-dev.txt"
        constraints = ["-c", str(lock_file)]
        wanted["lock"] = hashlib.sha256(lock_file.read_bytes()).hexdigest()
    TOOLS_DIR.mkdir(parents=True, exist_ok=True)
    with (TOOLS_DIR / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one creator at a time; the others wait and then reuse it
        stamp = path / STAMP
        if stamp.exists() and json.loads(stamp.read_text()) == wanted:
            return path
        shutil.rmtree(path, ignore_errors=True)
        python = find_python(spec.python) if spec.python else sys.executable
        try:
            subprocess.run([python, "-m", "venv", str(path)], check=True, capture_output=True, text=True)
            subprocess.run(
                [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                 *requirements, *constraints],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(path, ignore_errors=True)
            raise ToolError(f"could not create the {name} venv: {exc.stdout[-2000:]}{exc.stderr[-2000:]}") from exc
        stamp.write_text(json.dumps(wanted))
    return path


def executable(name: str, command: str | None = None) -> str:
    """The path of ``command`` (default: ``name``) installed in tool ``name``'s venv."""
    path = venv(name) / "bin" / (command or name)
    if not path.exists():
        raise ToolError(f"{path} is missing")
    return str(path)


def site_packages(name: str) -> Path:
    """The site-packages directory of tool ``name``'s venv."""
    found = sorted(venv(name).glob("lib/python*/site-packages"))
    if not found:
        raise ToolError(f"no site-packages in {venv(name)}")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    """``python -m scripts.tool_env [NAME ...]``: create the named tools' venvs (all when none is named) and print
    where each is; an unknown name or a failed install is one line on stderr and exit status 2 or 1."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m scripts.tool_env",
        description="Install tools whose pins conflict with the project's, each in a venv of its own under "
        f"{TOOLS_DIR} (OIP_TOOLS_DIR), and print where. Run a tool from its venv's bin/, e.g. "
        f"{TOOLS_DIR / 'sam' / 'bin' / 'sam'} --version.",
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"tools to install (default: all): {', '.join(TOOLS)}")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in TOOLS]
    if unknown:
        parser.error(f"unknown tool {', '.join(map(repr, unknown))}; choose from {', '.join(TOOLS)}")
    for tool_name in args.names or TOOLS:
        try:
            print(tool_name, venv(tool_name), flush=True)
        except ToolError as exc:
            print(f"tool_env: error: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
