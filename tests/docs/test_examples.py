"""Every example of the README and docs/ that talks to a server runs here, against a real ``oip serve`` over the
demo repository (HTTP and gRPC), and prints what its page shows (tests/support/doc_examples.py says how blocks are
read)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doc_examples import (
    CALLS_A_SERVER,
    GRPC_ADDRESS,
    HTTP_ADDRESS,
    PAGES,
    PLACEHOLDER,
    ROOT,
    RUNNABLE_LANGUAGES,
    Example,
    blocks,
    examples,
    output_matches,
)
from tests.support.servers import moto_server, oip_serve

ALL_EXAMPLES = [example for page in PAGES for example in examples(page)]


#: The bucket and prefix of the S3 tensors page, made in moto's server as that page's "Try it locally" makes them.
TENSOR_BUCKET = "my-tensors"
AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def aws() -> Iterator[dict[str, str]]:
    """moto's S3 server with the S3 tensors page's bucket: the AWS variables that point boto3 at it."""
    import boto3

    with moto_server() as url:
        variables = AWS_TEST_ENV | {"AWS_ENDPOINT_URL": url}
        session = boto3.session.Session(
            aws_access_key_id=variables["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=variables["AWS_SECRET_ACCESS_KEY"],
            region_name=variables["AWS_DEFAULT_REGION"],
        )
        session.client("s3", endpoint_url=url).create_bucket(Bucket=TENSOR_BUCKET)
        yield variables


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, int]]:
    """``oip serve`` over the demo repository, as the pages start it, on held ports: (HTTP port, gRPC port)."""
    with oip_serve(grpc=True, workers=1, drop=("MODEL_REPOSITORY", "AWS_", "OIP_S3_")) as served:
        assert served.grpc_port is not None
        yield served.port, served.grpc_port


@pytest.fixture(scope="module")
def s3_server(aws: dict[str, str]) -> Iterator[tuple[int, int]]:
    """The same with tensors by reference in moto's S3, as the S3 tensors page starts it."""
    env = aws | {"OIP_S3_TENSOR_PREFIXES": f"s3://{TENSOR_BUCKET}/tensors/"}
    with oip_serve(grpc=True, workers=1, env=env, drop=("MODEL_REPOSITORY", "AWS_", "OIP_S3_")) as served:
        assert served.grpc_port is not None
        yield served.port, served.grpc_port


def _run(
    example: Example, ports: tuple[int, int], cwd: Path, aws: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    code = HTTP_ADDRESS.sub(lambda m: f"{m[1]}:{ports[0]}", example.block.code)
    code = GRPC_ADDRESS.sub(lambda m: f"{m[1]}:{ports[1]}", code)
    # `python`, `oip` and `pip` of the examples are this environment's.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | (aws or {})
    environment |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if RUNNABLE_LANGUAGES[example.block.language] == "bash":
        # An example shown failing runs every command: each writes its error.
        command = ["bash", *(["-e"] if example.exit_status is None else []), "-o", "pipefail", "-c", code]
    else:
        command = [sys.executable, "-c", code]
    # A session of its own, so that whatever an example starts is stopped with it, even past the timeout.
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stdout, stderr = "", f"timed out after {timeout:.0f} s"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.mark.parametrize("example", ALL_EXAMPLES, ids=lambda e: e.block.name)
def test_example_runs_against_oip_serve(example: Example, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Each page's examples against the server it starts: the S3 tensors page's with moto's S3 and its prefix."""
    if example.block.page.stem == "s3-tensors":
        ports, aws = request.getfixturevalue("s3_server"), request.getfixturevalue("aws")
    else:
        ports, aws = request.getfixturevalue("server"), None
    (tmp_path / "events").symlink_to(ROOT / "events")  # the sample events, as from a clone of the repository
    result = _run(example, ports, tmp_path, aws)
    if example.exit_status is not None:
        assert result.returncode == example.exit_status, f"{example.block.name}:\n{result.stderr[-3000:]}"
        assert output_matches(example.output or "", result.stderr), (
            f"{example.block.name} wrote:\n{result.stderr[-3000:]}\nthe page shows:\n{example.output}"
        )
        return
    assert result.returncode == 0, f"{example.block.name} failed:\n{example.block.code}\n{result.stderr[-3000:]}"
    if example.output is not None:
        assert output_matches(example.output, result.stdout), (
            f"{example.block.name} printed:\n{result.stdout[-3000:]}\nthe page shows:\n{example.output}"
        )


def test_the_pages_hold_examples_that_run() -> None:
    """The extractor finds the examples (a change of convention would otherwise pass with nothing run)."""
    per_page = {page.relative_to(ROOT).as_posix(): 0 for page in PAGES}
    for example in ALL_EXAMPLES:
        per_page[example.block.page.relative_to(ROOT).as_posix()] += 1
    assert per_page["README.md"] == 2, "the README shows one curl and one tritonclient example"
    pages = ("getting-started", "protocol", "content-types", "platforms", "operations", "troubleshooting", "s3-tensors")
    for page in pages:
        assert per_page[f"docs/{page}.md"] >= 1, page
    assert sum(1 for e in ALL_EXAMPLES if e.output is not None) >= 10


def test_every_call_to_a_server_is_an_example_that_runs_or_a_deployments() -> None:
    """A shell or Python block that calls an HTTP endpoint either addresses the local server (and so runs above)
    or shows by a placeholder (``<api-url>``, ``$API_URL``) that it is addressed to a deployment."""
    unaddressed = [
        block.name
        for page in PAGES
        for block in blocks(page)
        if block.language in RUNNABLE_LANGUAGES
        and not block.runs
        and CALLS_A_SERVER.search(block.code)
        and not PLACEHOLDER.search(block.code)
    ]
    assert not unaddressed


@pytest.mark.parametrize(
    ("shown", "printed", "matches"),
    [
        ('{"a": [1, 2],\n "b": "x"}', '{"a":[1,2],"b":"x"}\n', True),
        ('{"id": "...", "b": 1}', '{"id":"f00","b":1}', True),
        ('{"b": 1}', '{"b":2}', False),
        ("label: 2", "label: 2\nmore", False),
    ],
)
def test_shown_output_is_compared_whitespace_blind_with_ellipses(shown: str, printed: str, matches: bool) -> None:
    assert output_matches(shown, printed) is matches


def test_an_output_block_belongs_to_the_example_right_above_it(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '```bash\ncurl -s localhost:8000/v2\n```\n\n```json title="Output"\n{}\n```\n\n'
        '```bash\ncurl -s localhost:8000/v2\n```\n\ntext\n\n```json title="Output"\n{}\n```\n'
    )
    first, second = examples(page)
    assert first.output == "{}\n" and second.output is None
    assert re.search("8000", first.block.code)


def test_grpc_server_metadata_lists_rests_extensions_but_the_versions_resource(server: tuple[int, int]) -> None:
    """docs/protocol.md's "Triton extensions": gRPC ``ServerMetadata`` lists what ``GET /v2`` lists, in the same
    order, except ``model_versions``, for which the gRPC service has no RPC."""
    import httpx
    import tritonclient.grpc as triton_grpc

    http_port, grpc_port = server
    rest = httpx.get(f"http://127.0.0.1:{http_port}/v2").json()
    client = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    try:
        grpc = client.get_server_metadata(as_json=True)
    finally:
        client.close()
    assert (grpc["name"], grpc["version"]) == (rest["name"], rest["version"])
    assert [e for e in rest["extensions"] if e != "model_versions"] == grpc["extensions"]
    assert "model_versions" in rest["extensions"]
    page = (ROOT / "docs" / "protocol.md").read_text()
    assert all(f"`{extension}`" in page for extension in rest["extensions"])
