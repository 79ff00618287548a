"""The user pages' blocks a reader runs in a clone of the repository (tests/support/doc_reader_blocks.py says
which): each runs to the end with exit status 0, or, when it starts a server, starts it until the server answers, in
a clone view with moto's server standing in for AWS and a local ``oip serve`` for a deployment."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest

from tests.docs.test_examples import _run
from tests.support.doc_examples import MOTO_ADDRESS, ROOT, Block, Example, blocks, page_path
from tests.support.doc_reader_blocks import (
    AWS_VARIABLES,
    DEPLOYMENT_VARIABLES,
    LAYOUT,
    SERVER_LINE,
    clone_view,
    layout_paths,
    reader_blocks,
    server_lines,
    starts_a_server,
)
from tests.support.servers import LOOPBACK, HeldPort, _answers, environment, http_ok, moto_server, oip_serve, running

#: The buckets the pages use: the S3 tensors page's and getting-started's repository in a bucket.
TENSOR_BUCKET, MODEL_BUCKET = "my-tensors", "my-bucket"
BLOCKS = reader_blocks()
#: The longest a block may take: ``sam build`` downloads and compiles the Lambda package.
BLOCK_TIMEOUT = 600


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """moto's server with the pages' buckets, getting-started's repository under ``s3://my-bucket/models/``."""
    with moto_server() as url:
        s3 = boto3.client("s3", endpoint_url=url, **_boto_credentials())
        s3.create_bucket(Bucket=TENSOR_BUCKET)
        s3.create_bucket(Bucket=MODEL_BUCKET)
        s3.put_object(Bucket=MODEL_BUCKET, Key="models/churn/config.pbtxt", Body=b"")
        with (ROOT / "models/iris/1/model.onnx").open("rb") as model:
            s3.put_object(Bucket=MODEL_BUCKET, Key="models/churn/1/model.onnx", Body=model.read())
        yield url


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": AWS_VARIABLES["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": AWS_VARIABLES["AWS_SECRET_ACCESS_KEY"],
        "region_name": AWS_VARIABLES["AWS_DEFAULT_REGION"],
    }


@pytest.fixture(scope="module")
def deployment(moto: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A local ``oip serve`` standing in for a deployment (tensors by reference on, in moto's S3; the demo models
    and kubernetes' ``iris-grpc``, iris under that name): the variables the pages' deployment blocks read, AWS's
    pointing at moto, and ``GRPC_INGRESS``, the gRPC address (a KServe ingress has one port for both)."""
    repository = tmp_path_factory.mktemp("deployment")
    for model in ROOT.joinpath("models").iterdir():
        (repository / model.name).symlink_to(model)
    shutil.copytree(ROOT / "models" / "iris" / "1", repository / "iris-grpc" / "1")
    config = (ROOT / "models" / "iris" / "config.pbtxt").read_text().replace('name: "iris"', 'name: "iris-grpc"')
    (repository / "iris-grpc" / "config.pbtxt").write_text(config)
    aws = AWS_VARIABLES | {"AWS_ENDPOINT_URL": moto}
    env = aws | {"OIP_S3_TENSOR_PREFIXES": f"s3://{TENSOR_BUCKET}/tensors/"}
    args = ("--model-repository", str(repository))
    with oip_serve(*args, grpc=True, workers=1, env=env, drop=("MODEL_REPOSITORY", "AWS_", "OIP_")) as served:
        http = f"{LOOPBACK}:{served.port}"
        variables = {name: value.format(http=http) for name, value in DEPLOYMENT_VARIABLES.items()}
        yield aws | variables | {"GRPC_INGRESS": f"{LOOPBACK}:{served.grpc_port}"}


def _block_environment(variables: dict[str, str]) -> dict[str, str]:
    """This environment without the AWS, OIP and repository variables the test runner may have, plus ``variables``,
    with this interpreter's ``python``, ``oip`` and ``pip`` first on ``PATH``."""
    base = environment(None, drop=("MODEL_REPOSITORY", "AWS_", "OIP_"))
    return base | variables | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def earlier_setup(block: Block) -> str:
    """The lines of the shell blocks above ``block`` on its page that set up what it runs: the tool venvs they build
    (``python -m scripts.tool_env``, which builds a missing one and waits for one another process is building) and
    the ``alias`` lines that name them."""
    above = [b for b in blocks(block.page) if b.line < block.line and b.language == "bash"]
    setup = ("alias ", "python -m scripts.tool_env ")
    return "".join(f"{line}\n" for b in above for line in b.code.splitlines() if line.startswith(setup))


@pytest.mark.timeout(BLOCK_TIMEOUT + 60)
@pytest.mark.parametrize("block", [b for b in BLOCKS if not starts_a_server(b)], ids=lambda b: b.name)
def test_a_block_runs_in_a_clone(block: Block, deployment: dict[str, str], tmp_path: Path) -> None:
    cwd = clone_view(tmp_path)
    # As in the reader's shell: the tools the page's earlier blocks build, and the aliases they define (sam's),
    # apply, as they would to the block's own next lines, whichever block runs first.
    code = f"shopt -s expand_aliases\n{earlier_setup(block)}{block.code}" if block.language == "bash" else block.code
    example = Example(dataclasses.replace(block, code=code), None)
    env = {k: v for k, v in os.environ.items() if k in {"HOME", "OIP_TOOLS_DIR", "PYENV_ROOT"}} | deployment
    if "tritonclient.grpc" in block.code:  # a gRPC client of the ingress: the local server's gRPC port
        env["INGRESS"] = deployment["GRPC_INGRESS"]
    result = _run(example, (0, 0), cwd, env, timeout=BLOCK_TIMEOUT)
    assert result.returncode == 0, f"{block.name} failed:\n{block.code}\n{result.stdout[-2000:]}{result.stderr[-3000:]}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if starts_a_server(b)], ids=lambda b: b.name)
def test_a_block_that_starts_a_server_starts_it(block: Block, moto: str, tmp_path: Path) -> None:
    """Each server the block starts answers: ``oip serve`` on a held port (``OIP_PORT``: the pages give none, or
    8000) with its metrics off, moto's server on a held port for the page's 5000. A block that sets moto's address
    gets this test's moto server, as does one that reads a bucket (the reader's credentials: moto's)."""
    cwd = clone_view(tmp_path)
    for command in server_lines(block):
        with HeldPort() as held:
            code = MOTO_ADDRESS.sub(moto, command).replace("-p 5000", f"-p {held.port}")
            code = code.replace("--port 8000", f"--port {held.port}")
            ports = {"OIP_PORT": str(held.port), "OIP_METRICS_PORT": "0"}
            env = _block_environment(AWS_VARIABLES | {"AWS_ENDPOINT_URL": moto} | ports)
            env |= {k: v for k, v in os.environ.items() if k in {"OIP_TOOLS_DIR", "PYENV_ROOT"}}
            last = [line for line in command.splitlines() if SERVER_LINE.match(line)][-1]
            probe = _answered("moto_server" in last, f"http://{LOOPBACK}:{held.port}")
            with running(block.name, ["bash", "-e", "-c", code], probe, env=env, cwd=cwd):
                pass  # answered, or running() failed with the block's output


def _answered(moto: bool, url: str) -> Callable[[object], bool]:
    """The probe of moto's server or of ``oip serve`` at ``url``."""
    return lambda _: _answers(f"{url}/moto-api/") if moto else http_ok(f"{url}/v2/health/ready")


def test_the_layout_shown_is_the_one_served() -> None:
    """getting-started's repository layout is the one the test serves its ``oip serve`` block from."""
    page = page_path("getting-started")
    (layout,) = [block for block in blocks(page) if "└──" in block.code]
    assert tuple(layout_paths(layout)) == LAYOUT


def test_reader_blocks_are_found() -> None:
    """Both kinds are found (a change of convention would run none)."""
    assert any(starts_a_server(block) for block in BLOCKS)
    assert any(not starts_a_server(block) for block in BLOCKS)


def test_the_clone_view_keeps_writes_out_of_the_repository(tmp_path: Path) -> None:
    cwd = clone_view(tmp_path)
    assert (cwd / "events").resolve() == ROOT / "events"
    assert (cwd / "rows.jsonl").is_file() and not (cwd / "rows.jsonl").is_symlink()
    assert shutil.which("oip") is not None
