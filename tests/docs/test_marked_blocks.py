"""What runs here of the blocks marked ``<!-- not run: ... -->``: each keeps its mark (it needs a deployed stack, an
AWS account), but its AWS CLI and ``oip`` commands run against moto's server (``AWS_ENDPOINT_URL``, as the AWS CLI
reads it: the commands stay as the reader types them), its ``<placeholders>`` filled with resources made there as a
stack would make them; an Athena query runs in SQLite over the template's request-log table; the scrape
annotations name the image's metrics port and the path ``oip serve`` serves metrics on; and every repository file
any marked block names exists."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import yaml

from tests.docs.test_examples import _run
from tests.support.doc_examples import ROOT, USER_PAGES, Block, Example, blocks, page_path
from tests.support.doc_reader_blocks import AWS_VARIABLES, clone_view, starts_a_server
from tests.support.servers import LOOPBACK, moto_server, oip_serve

ACCOUNT, REGION = "123456789012", "us-east-1"
#: The placeholders of the marked blocks that moto's resources fill (``{...}`` made by the fixture).
PLACEHOLDERS = {
    "<RequestQueueUrl>": "{request_queue}",
    "<BatchFailedFilesQueueUrl>": "{failed_queue}",
    "<BatchBucketName>": "oip-batch",
    "<BatchStateMachineArn>": "{state_machine}",
    "<stack>": "oip",
    "<bucket>": "oip-models",
    "<account>": ACCOUNT,
    "<region>": REGION,
    "<role-arn>": f"arn:aws:iam::{ACCOUNT}:role/oip",
}
#: Commands that need more than AWS's APIs (a container runtime, a cluster, another cloud, the SAM CLI's deploy), and
#: ``aws sqs``, which AWS CLI v1 sends to queue.amazonaws.com whatever ``AWS_ENDPOINT_URL`` says.
ELSEWHERE = re.compile(r"\b(sam|kubectl|helm|docker|gcloud|awscurl|make)\b|\baws sqs\b")
PLACEHOLDER = re.compile(r"<[A-Za-z][\w-]*>")


def _partly_runnable(block: Block) -> bool:
    return (
        block.not_run is not None
        and block.language == "bash"
        and not ELSEWHERE.search(block.code)
        and not starts_a_server(block)
        and set(PLACEHOLDER.findall(block.code)) <= set(PLACEHOLDERS)
    )


MARKED = [block for stem in USER_PAGES for block in blocks(page_path(stem)) if block.not_run is not None]
PARTLY_RUNNABLE = [block for block in MARKED if _partly_runnable(block)]


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=AWS_VARIABLES["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_VARIABLES["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[str, dict[str, str]]]:
    """moto's server holding what the pages' stack outputs name (queues, buckets, a state machine, a role, a stack
    whose ``ApiUrl`` is a local ``oip serve``): (moto's URL, the placeholders' values)."""
    with moto_server() as moto, oip_serve(workers=1, drop=("MODEL_REPOSITORY", "AWS_", "OIP_")) as server:
        sqs, s3 = _client("sqs", moto), _client("s3", moto)
        for bucket in ("oip-batch", "oip-models"):
            s3.create_bucket(Bucket=bucket)
        trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                 "Principal": {"Service": ["lambda.amazonaws.com", "sagemaker.amazonaws.com"]}}]}  # fmt: skip
        _client("iam", moto).create_role(RoleName="oip", AssumeRolePolicyDocument=json.dumps(trust))
        definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
        machine = _client("stepfunctions", moto).create_state_machine(
            name="oip-batch", definition=json.dumps(definition), roleArn=PLACEHOLDERS["<role-arn>"]
        )
        template = {
            "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
            "Outputs": {"ApiUrl": {"Value": f"http://{LOOPBACK}:{server.port}"}},
        }
        _client("cloudformation", moto).create_stack(StackName="oip", TemplateBody=json.dumps(template))
        made = {
            "request_queue": sqs.create_queue(QueueName="oip-requests")["QueueUrl"],
            "failed_queue": sqs.create_queue(QueueName="oip-failed-files")["QueueUrl"],
            "state_machine": machine["stateMachineArn"],
        }
        yield moto, {name: value.format(**made) for name, value in PLACEHOLDERS.items()}


@pytest.mark.parametrize("block", PARTLY_RUNNABLE, ids=lambda b: b.name)
def test_a_marked_blocks_aws_commands_run_against_moto(
    block: Block, stack: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    moto, values = stack
    code = PLACEHOLDER.sub(lambda found: values[found[0]], block.code)
    env = AWS_VARIABLES | {"AWS_ENDPOINT_URL": moto, "HOME": os.environ["HOME"]}
    result = _run(Example(dataclasses.replace(block, code=code), None), (0, 0), clone_view(tmp_path), env)
    assert result.returncode == 0, f"{block.name}:\n{code}\n{result.stdout[-2000:]}{result.stderr[-3000:]}"


def test_some_marked_blocks_run_in_part() -> None:
    assert {block.page.stem for block in PARTLY_RUNNABLE} >= {"batch", "aws-lambda", "platforms"}


#: A path of the repository as the blocks name them (``infra/...``, ``events/...``, the requirement locks).
REPOSITORY_PATH = re.compile(r"(?<![\w/.-])((?:infra|events|models|scripts)/[\w./-]+|requirements[\w-]*\.txt)")


@pytest.mark.parametrize("block", MARKED, ids=lambda b: b.name)
def test_the_files_a_marked_block_names_exist(block: Block) -> None:
    missing = [path for path in REPOSITORY_PATH.findall(block.code) if not (ROOT / path.rstrip(".")).exists()]
    assert not missing, f"{block.name} names files the repository does not have: {missing}"


def _request_log_columns() -> list[str]:
    """The columns of the template's Glue table ``requests`` (the request logs), its partition key last."""
    text = (ROOT / "template.yaml").read_text()
    table = text[text.index("Name: requests") :]
    columns = re.findall(
        r"\{ Name: (\w+), Type: \w+ \}", table[: table.index("Outputs:") if "Outputs:" in table else None]
    )
    partition = re.search(r"PartitionKeys: \[\{ Name: (\w+)", table)
    assert partition, "the request-log table has a partition key"
    return [column for column in dict.fromkeys(columns) if column != partition[1]] + [partition[1]]


@pytest.mark.parametrize("block", [b for b in MARKED if b.language == "sql"], ids=lambda b: b.name)
def test_an_athena_query_runs_over_the_request_log_table(block: Block) -> None:
    """The query, in SQLite over a table with the template's columns, counts the rows it should."""
    columns = _request_log_columns()
    assert {"model", "model_version", "dt"} <= set(columns), columns
    database = sqlite3.connect(":memory:")
    database.execute(f"CREATE TABLE requests ({', '.join(columns)})")
    rows = [{"model": "iris", "model_version": "1", "dt": "2024-05-02"}] * 3
    rows += [{"model": "iris", "model_version": "1", "dt": "2024-04-30"}]
    for row in rows:
        database.execute(
            f"INSERT INTO requests ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values())
        )
    assert database.execute(block.code).fetchall() == [("iris", "1", 3)]


@pytest.mark.parametrize("block", [b for b in MARKED if "prometheus.io/port" in b.code], ids=lambda b: b.name)
def test_the_scrape_annotations_name_the_images_metrics(block: Block) -> None:
    """The port is one the image exposes for metrics, and ``oip serve`` serves Prometheus's text at the path."""
    annotations = yaml.safe_load(block.code)["metadata"]["annotations"]
    dockerfile = (ROOT / "infra" / "Dockerfile.edge").read_text()
    assert re.search(rf"^EXPOSE .*\b{annotations['prometheus.io/port']}\b", dockerfile, re.M), dockerfile
    with oip_serve(workers=1, metrics=True, drop=("MODEL_REPOSITORY", "OIP_")) as server:
        scraped = httpx.get(f"http://{LOOPBACK}:{server.metrics_port}{annotations['prometheus.io/path']}")
    assert scraped.status_code == 200 and "# TYPE" in scraped.text
