"""The user pages' configuration, query and body blocks (tests/support/doc_data_blocks.py says which), used as a reader
would: a model served with each config.pbtxt, the Prometheus configuration checked by ``promtool`` and scraping a
shadowing ``oip serve`` whose metrics each PromQL query answers, the S3 tensors page's request answered with its
response in moto's S3, the IAM policy the template grants, ``oip serve``'s start-up log as it writes it, and a
package whose entry point makes its codec known."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import numpy as np
import onnx
import pytest
import yaml
from mangum import Mangum

from handler.cli.lambda_context import LocalLambdaContext
from handler.rollout import hook
from handler.server import build_app
from tests.conftest import make_settings
from tests.docs.test_examples import AWS_TEST_ENV, TENSOR_BUCKET
from tests.support.doc_data_blocks import CHECKED_TITLES, PACKAGE_TITLE, titled
from tests.support.doc_examples import ROOT, Block, blocks, output_matches
from tests.support.servers import LOOPBACK, HeldPort, OipServer, live, moto_server, oip_serve, running, wait_for

IRIS = ROOT / "models" / "iris"
IRIS_BODY = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [5.1, 3.5, 1.4, 0.2]}]}
#: Prometheus scrapes every second here, where the page's configuration says 15 s.
SCRAPE_SECONDS = 1


def _model_repository(block: Block, directory: Path) -> str:
    """A repository whose one model is configured by the block, in versions 1 and 2 (iris's model): named by the
    block's ``name``, or iris with the block added to iris's config.pbtxt when the block is a fragment; its name."""
    named = re.search(r'^name:\s*"([^"]+)"', block.code, re.M)
    name = named[1] if named else "iris"
    model = directory / name
    for version in ("1", "2"):
        (model / version).mkdir(parents=True)
        shutil.copy(IRIS / "1" / "model.onnx", model / version / "model.onnx")
    config = block.code if named else (IRIS / "config.pbtxt").read_text() + block.code
    (model / "config.pbtxt").write_text(config)
    return name


def _top_level_fields(block: Block) -> set[str]:
    return set(re.findall(r"^(\w+)\s*[:{]", block.code, re.M))


@pytest.mark.parametrize("block", titled("config.pbtxt"), ids=lambda b: b.name)
def test_a_model_loads_with_the_config_shown(block: Block, tmp_path: Path) -> None:
    """The model is ready (a wrong value makes it unavailable, and ``oip serve`` stops), and its configuration
    (``GET /v2/models/<name>/config``) holds every field the block sets."""
    name = _model_repository(block, tmp_path)
    with oip_serve("--model-repository", str(tmp_path), workers=1, drop=("MODEL_REPOSITORY", "OIP_")) as server:
        assert httpx.get(f"{server.url}/v2/models/{name}/ready").status_code == 200
        config = httpx.get(f"{server.url}/v2/models/{name}/config").json()
        assert _top_level_fields(block) <= set(config), (config, _top_level_fields(block))


def _prometheus_config(block: Block, target: str) -> str:
    """The page's configuration scraping ``target`` every SCRAPE_SECONDS."""
    text = re.sub(r'targets: \["[^"]+"\]', f'targets: ["{target}"]', block.code)
    return re.sub(r"scrape_interval: \d+s", f"scrape_interval: {SCRAPE_SECONDS}s", text)


@pytest.mark.parametrize("block", titled("prometheus.yml"), ids=lambda b: b.name)
def test_promtool_accepts_the_prometheus_configuration(block: Block, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool is not None, "Debian's prometheus package is not installed (.ci/run installs it)"
    config = tmp_path / "prometheus.yml"
    config.write_text(block.code)
    checked = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "edge-box.example:8002" in block.code, "the test points the page's target at its server"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OipServer, str]]:
    """``oip serve`` with metrics over the safe-updates page's shadowing model, and Prometheus started with the
    operations page's configuration (its target this server, every SCRAPE_SECONDS): (server, Prometheus's URL)."""
    binary = shutil.which("prometheus")
    assert binary is not None, "Debian's prometheus package is not installed (.ci/run installs it)"
    (shadowing,) = [block for block in titled("config.pbtxt") if "shadow_version" in block.code]
    (scrape,) = titled("prometheus.yml")
    workdir = tmp_path_factory.mktemp("prometheus")
    repository = workdir / "models"
    _model_repository(shadowing, repository)
    with (
        oip_serve("--model-repository", str(repository), workers=1, metrics=True, drop=("MODEL_REPOSITORY", "OIP_"))
        as server,
        HeldPort() as web,
    ):  # fmt: skip
        config = workdir / "prometheus.yml"
        config.write_text(_prometheus_config(scrape, f"{LOOPBACK}:{server.metrics_port}"))
        url = f"http://{LOOPBACK}:{web.port}"
        command = [
            binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={LOOPBACK}:{web.port}", "--log.level=warn",
        ]  # fmt: skip
        with running("prometheus", command, lambda _: _query(url, "up") == [1.0]):
            yield server, url


def _query(url: str, expression: str) -> list[float] | None:
    """An instant query's values (None while Prometheus is not ready: it answers 503 in plain text until then)."""
    try:
        if httpx.get(f"{url}/-/ready", timeout=10).status_code != 200:
            return None
        answer = httpx.get(f"{url}/api/v1/query", params={"query": expression}, timeout=10).json()
    except httpx.TransportError:
        return None
    assert answer["status"] == "success", (expression, answer)
    return [float(item["value"][1]) for item in answer["data"]["result"]]


@pytest.mark.parametrize("block", titled("PromQL"), ids=lambda b: b.name)
def test_prometheus_answers_the_query(block: Block, prometheus: tuple[OipServer, str]) -> None:
    """Requests to the shadowing model until the query has a value for it: a latency within the histogram's
    bounds, or an agreement of 1 (the candidate is the same model)."""
    server, url = prometheus

    def answered() -> list[float] | None:
        assert httpx.post(f"{server.url}/v2/models/clf/infer", json=IRIS_BODY).status_code == 200
        values = _query(url, block.code)
        return values if values and all(np.isfinite(values)) else None

    values = wait_for(answered, f"Prometheus answers {block.code!r} with a value")
    assert len(values) == 1, values
    assert 0 < values[0] <= (1 if "agreement" in block.code else 60), values


@pytest.fixture(scope="module")
def tensors() -> Iterator[tuple[str, str]]:
    """moto's server with the S3 tensors page's bucket, and ``oip serve`` with that page's prefix reading it:
    (server URL, moto's URL)."""
    with moto_server() as moto:
        _aws("s3", moto).create_bucket(Bucket=TENSOR_BUCKET)
        env = AWS_TEST_ENV | {"AWS_ENDPOINT_URL": moto, "OIP_S3_TENSOR_PREFIXES": f"s3://{TENSOR_BUCKET}/tensors/"}
        with oip_serve(workers=1, env=env, drop=("MODEL_REPOSITORY", "AWS_", "OIP_")) as served:
            yield served.url, moto


def _aws(service: str, endpoint: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=AWS_TEST_ENV["AWS_DEFAULT_REGION"],
        aws_access_key_id=AWS_TEST_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"],
    )


def _request_and_response() -> list[tuple[Block, Block]]:
    """Each Request block with the Response block right after it."""
    pairs = []
    for request in titled("Request"):
        (response,) = [
            block for block in titled("Response") if block.page == request.page and block.line > request.line
        ][:1]
        pairs.append((request, response))
    return pairs


@pytest.mark.parametrize(("request_block", "response_block"), _request_and_response(), ids=lambda b: b.name)
def test_the_request_shown_is_answered_as_shown(
    request_block: Block, response_block: Block, tensors: tuple[str, str]
) -> None:
    """The request (its id and keys ``...`` made one request's) with its inputs uploaded to moto's S3 first,
    answered with the response shown."""
    body: dict[str, Any] = json.loads(request_block.code.replace("...", "-docs"))
    server, moto = tensors
    s3 = _aws("s3", moto)
    for tensor in body["inputs"]:
        bucket, key = tensor["parameters"]["s3_uri"].removeprefix("s3://").split("/", 1)
        array = np.random.default_rng(0).random(tensor["shape"], dtype=np.float32)
        s3.put_object(Bucket=bucket, Key=key, Body=array.tobytes())
    model = json.loads(response_block.code.replace("...", ""))["model_name"]
    answer = httpx.post(f"{server}/v2/models/{model}/infer", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert output_matches(response_block.code, answer.text), answer.text


class _CloudFormation(yaml.SafeLoader):
    """YAML with CloudFormation's short tags read as their long forms (``!Sub x`` as ``{"Fn::Sub": x}``)."""


_CloudFormation.add_multi_constructor(
    "!",
    lambda loader, tag, node: {
        f"Fn::{tag}" if tag != "Ref" else "Ref": (
            loader.construct_scalar(node)
            if isinstance(node, yaml.ScalarNode)
            else loader.construct_sequence(node, deep=True)
            if isinstance(node, yaml.SequenceNode)
            else loader.construct_mapping(node, deep=True)
        )
    },
)


def _statements(node: object) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "Sid" in node and "Effect" in node:
            yield node
        for value in node.values():
            yield from _statements(value)
    elif isinstance(node, list):
        for value in node:
            yield from _statements(value)


@pytest.mark.parametrize("block", titled("IAM policy"), ids=lambda b: b.name)
def test_the_policy_shown_is_the_templates_and_valid(block: Block, tensors: tuple[str, str]) -> None:
    """Each statement is the template's of that ``Sid`` (its resource for the page's bucket and prefix, in the
    ``aws`` partition), and IAM (moto's) accepts the document."""
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=_CloudFormation)  # a SafeLoader
    granted = {statement["Sid"]: statement for statement in _statements(template)}
    document = json.loads(block.code)
    for statement in document["Statement"]:
        theirs = granted[statement["Sid"]]
        assert (theirs["Effect"], theirs["Action"]) == (statement["Effect"], statement["Action"])
        pattern, _ = theirs["Resource"]["Fn::Sub"]
        bucket, prefix = re.fullmatch(r"arn:aws:s3:::([^/]+)/(.*)\*", statement["Resource"]).groups()  # type: ignore[union-attr]
        resource = pattern.replace("${AWS::Partition}", "aws").replace("${Bucket}", bucket)
        assert resource.replace("${TensorPrefix}", prefix) == statement["Resource"]
    iam = _aws("iam", tensors[1])
    iam.create_policy(PolicyName="docs-tensors", PolicyDocument=block.code)


#: The command serving.md says its start-up log is from, and the ports it shows.
START_UP = "oip serve --grpc-port 8001 --metrics-port 8002 --workers 2 --exit-on-error false"


@pytest.mark.parametrize("block", titled("Start-up log"), ids=lambda b: b.name)
def test_oip_serve_starts_with_the_lines_shown(block: Block, tmp_path: Path) -> None:
    """The page's command (on held ports) over iris and a model whose file is garbage writes the block's lines, in
    order, among its own: its ports and supervisor pid for the page's, and ``...`` for the in-flight bound, which
    counts the cores."""
    assert START_UP in block.page.read_text().replace("\n", " ")
    shutil.copytree(IRIS, tmp_path / "iris")
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "1" / "model.onnx").write_bytes(b"not a model")
    args = ("--model-repository", str(tmp_path), "--exit-on-error", "false")
    env = {"OIP_LOG_LEVEL": "info"}
    drop = ("MODEL_REPOSITORY", "OIP_")
    # Live, never ready: the broken model answers not ready.
    with oip_serve(*args, grpc=True, metrics=True, workers=2, env=env, drop=drop, probe=live) as server:
        last = block.code.strip().splitlines()[-1].split(":", 1)[1].strip()
        wait_for(lambda: last in server.child.text(), "the start-up log's last line", detail=server.child.text)
        written = server.child.text().splitlines()
    # In one pass: a port can hold the page's pid (42421 holds 4242), which a second replacement would change.
    ours = {"8000": server.port, "8001": server.grpc_port, "8002": server.metrics_port, "4242": server.pid}
    shown = re.sub(r"\b(?:8000|8001|8002|4242)\b", lambda match: str(ours[match.group()]), block.code)
    shown = re.sub(r"\b\d+ inference requests", "... inference requests", shown)
    position = 0
    for line in shown.strip().splitlines():
        found = next((i for i in range(position, len(written)) if output_matches(line, written[i])), None)
        assert found is not None, f"{line!r} not written (after line {position}):\n" + "\n".join(written)
        position = found + 1


@pytest.mark.parametrize("block", titled(PACKAGE_TITLE), ids=lambda b: b.name)
def test_an_installed_package_makes_its_codec_known(block: Block, tmp_path: Path) -> None:
    """``my_package`` (the block's entry points; ``codecs.py`` the page's codec class, without the lines that use
    it) installed by pip into a directory of its own: a process with it on its path that never imports it encodes
    with the codec's content type."""
    (codec,) = [b for b in blocks(block.page) if b.line < block.line and "class Shout" in b.code][-1:]
    project = tmp_path / "project"
    (project / "my_package").mkdir(parents=True)
    (project / "my_package" / "__init__.py").write_text("")
    (project / "my_package" / "codecs.py").write_text(codec.code.split("\nrequest = ")[0])
    metadata = '[project]\nname = "my-package"\nversion = "0.1"\n\n'
    (project / "pyproject.toml").write_text(metadata + block.code)
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(project)]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    use = (
        "import sys; from oip_client import encode_request; "
        "request = encode_request(['quiet please'], content_type='shout'); "
        "assert 'my_package.codecs' in sys.modules; print(request['inputs'][0]['parameters'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(target)}
    used = subprocess.run([sys.executable, "-c", use], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert used.returncode == 0 and "shout" in used.stdout, used.stderr[-3000:]


#: The resource fields that vary with the machine and the moment, and the form each takes.
VARYING = {
    "createTime": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z",
    "lastUseTime": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z",
    "runtimeVersion": r"oip-serverless \S+, onnxruntime \S+",
    "pythonVersion": r"3\.\d+",
}


@pytest.mark.parametrize("block", titled("Version resource"), ids=lambda b: b.name)
def test_a_version_resource_is_as_shown(block: Block, tmp_path: Path) -> None:
    """iris with the block's labels (config.pbtxt) and scaling (``OIP_AUTOSCALING_*``), after a prediction: the
    same fields, the same values but for times and versions, which take the same form."""
    shown = json.loads(block.code)
    shutil.copytree(IRIS, tmp_path / "iris")
    labels = ",".join(f"{key}={value}" for key, value in shown["labels"].items())
    with (tmp_path / "iris" / "config.pbtxt").open("a") as config:
        config.write(f'parameters {{ key: "labels" value {{ string_value: "{labels}" }} }}\n')
    scaling = shown["autoScaling"]
    env = {"OIP_AUTOSCALING_MIN_NODES": str(scaling["minNodes"]), "OIP_AUTOSCALING_MAX_NODES": str(scaling["maxNodes"])}
    args = ("--model-repository", str(tmp_path))
    with oip_serve(*args, workers=1, env=env, drop=("MODEL_REPOSITORY", "OIP_", "AWS_")) as server:
        assert httpx.post(f"{server.url}/v2/models/iris/infer", json=IRIS_BODY).status_code == 200
        served = httpx.get(f"{server.url}/v2/models/iris/versions/1/resource").json()
    assert set(served) == set(shown), served
    for field, value in shown.items():
        if field in VARYING:
            assert re.fullmatch(VARYING[field], value) and re.fullmatch(VARYING[field], served[field]), field
        else:
            assert served[field] == value, (field, served[field])


def _linear_model(inputs: str, width: int, outputs: str) -> onnx.ModelProto:
    """``outputs = inputs @ ones(width, 1)``: FP32 [n, width] in, [n, 1] out."""
    weights = onnx.helper.make_tensor("weights", onnx.TensorProto.FLOAT, [width, 1], [1.0] * width)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", [inputs, "weights"], [outputs])],
        "linear",
        [onnx.helper.make_tensor_value_info(inputs, onnx.TensorProto.FLOAT, ["n", width])],
        [onnx.helper.make_tensor_value_info(outputs, onnx.TensorProto.FLOAT, ["n", 1])],
        [weights],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("block", titled("RolloutChecks"), ids=lambda b: b.name)
def test_the_rollout_checks_pass_on_a_function_serving_their_model(block: Block, tmp_path: Path) -> None:
    """The hooks' checks (``handler.rollout.hook.run_checks``, as ``OIP_ROLLOUT_CHECKS`` gives them) through the
    Lambda HTTP app serving each model they call, one input of the width they send and one output: none fails."""
    checks = json.loads(block.code)
    for check in checks:
        model = re.fullmatch(r"/v2/models/([\w-]+)/infer", check["path"])
        assert model, check["path"]
        (tensor,) = check["body"]["inputs"]
        directory = tmp_path / model[1] / "1"
        directory.mkdir(parents=True, exist_ok=True)
        onnx.save(_linear_model(tensor["name"], tensor["shape"][1], "score"), directory / "model.onnx")
    app = Mangum(build_app(make_settings(tmp_path)), lifespan="off")
    assert hook.run_checks(lambda event: app(event, LocalLambdaContext()), checks) == []


def test_every_checked_title_is_used() -> None:
    """Each title the docs test promises to check names a block (a renamed title would check nothing)."""
    assert all(titled(title) for title in CHECKED_TITLES), [title for title in CHECKED_TITLES if not titled(title)]
