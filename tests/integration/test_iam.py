"""What a security review checks: checkov's CloudFormation checks over every template, with a short list of
accepted findings (anything new fails) and the project's own check that every HTTP API route requires authorization
(tests/checkov/), and the IAM shape the issue asks for in template.yaml."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from scripts.tool_env import executable

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = [ROOT / "template.yaml", *sorted((ROOT / "infra").glob("*.yaml"))]
#: Checks of our own (checkov's CloudFormation checks have no counterpart of CKV_AWS_309 for HTTP API routes).
CUSTOM_CHECKS = ROOT / "tests" / "checkov"
ROUTE_AUTHORIZATION = "CKV_OIP_1"

pytestmark = pytest.mark.integration

ALL = "*"
#: check id -> (resources it is accepted on, ALL for every resource of the kind it checks), with the reason.
ACCEPTED: dict[str, frozenset[str] | str] = {
    # Log groups use CloudWatch's own encryption; no payload is ever logged (request logging goes to Firehose).
    "CKV_AWS_158": ALL,
    # Environment variables hold settings, no secrets: a customer KMS key would add cost and nothing else.
    "CKV_AWS_173": ALL,
    # A DLQ is for asynchronous invocations: the HTTP and hook functions are invoked synchronously, and the batch
    # function's SQS messages already go to RequestDeadLetterQueue by the queue's redrive policy.
    "CKV_AWS_116": ALL,
    # Subnets are a parameter (only needed to reach Triton in a VPC); the hooks and the container variant need none.
    "CKV_AWS_117": frozenset({"PreTrafficHookFunction", "PostTrafficHookFunction", "InferenceFunction"}),
    # The CodeDeploy hooks run once per deployment; a reserved concurrency would only take from the account's pool.
    "CKV_AWS_115": frozenset({"PreTrafficHookFunction", "PostTrafficHookFunction"}),
    # Request logs expire after 90 days, batch outputs are re-creatable (idempotent by message id / ETag) and tensors
    # by reference live for one request: neither versioning nor server access logs are wanted on them.
    "CKV_AWS_18": frozenset({"RequestLogBucket", "BatchBucket", "TensorStore"}),
    "CKV_AWS_21": frozenset({"RequestLogBucket", "BatchBucket", "TensorStore"}),
    # The queues use SQS-managed server-side encryption (SqsManagedSseEnabled); checkov asks for a KMS key.
    "CKV_AWS_27": frozenset({"RequestQueue", "RequestDeadLetterQueue", "BatchFailedFilesQueue", "BatchResultsQueue"}),
    # Triton's internal NLB: access logs would need a bucket the GPU stack does not otherwise have.
    "CKV_AWS_91": frozenset({"LoadBalancer"}),
}


def _checkov_results(template: Path, *options: str) -> dict[str, list[dict[str, Any]]]:
    result = subprocess.run(
        [executable("checkov"), "--file", str(template), "--framework", "cloudformation", "--output", "json",
         "--compact", "--skip-download", "--external-checks-dir", str(CUSTOM_CHECKS), *options],
        capture_output=True, text=True, cwd=ROOT, timeout=600, env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )  # fmt: skip
    assert result.stdout.strip(), result.stderr[-3000:]
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    assert all(r["summary"]["parsing_errors"] == 0 for r in reports), reports
    assert sum(r["summary"]["passed"] + r["summary"]["failed"] for r in reports) > 0
    return {
        outcome: [check for r in reports for check in r["results"].get(outcome, [])]
        for outcome in ("passed_checks", "failed_checks")
    }


def _checkov(template: Path) -> list[dict[str, Any]]:
    results = _checkov_results(template)
    assert results["passed_checks"]
    return results["failed_checks"]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_checkov_finds_nothing_new(template: Path) -> None:
    new = []
    for check in _checkov(template):
        resource = check["resource"].rsplit(".", 1)[-1]
        accepted = ACCEPTED.get(check["check_id"], frozenset())
        if accepted != ALL and resource not in accepted:
            new.append(f"{check['check_id']} {check['resource']}: {check['check_name']}")
    assert not new, "\n".join(new)


class _TagLoader(yaml.SafeLoader):
    """Keeps CloudFormation short forms as {"!Tag": value}."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {f"!{suffix}": value}


_TagLoader.add_multi_constructor("!", _tag)


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return yaml.load((ROOT / "template.yaml").read_text(), Loader=_TagLoader)["Resources"]


def _mentions(value: Any, text: str) -> bool:
    return text in json.dumps(value)


@pytest.mark.parametrize("function", ["InferenceFunction", "BatchFunction"])
def test_vpc_policy_only_with_subnets(resources: dict[str, Any], function: str) -> None:
    properties = resources[function]["Properties"]
    # SAM attaches AWSLambdaVPCAccessExecutionRole to the role it generates whenever VpcConfig is present, even
    # under an !If that resolves to nothing; so the function has a role of ours, with the policy conditional.
    role = properties["Role"]["!GetAtt"]
    assert "Policies" not in properties
    managed = resources[role.split(".")[0]]["Properties"]["ManagedPolicyArns"]
    vpc = [arn for arn in managed if _mentions(arn, "AWSLambdaVPCAccessExecutionRole")]
    assert len(vpc) == 1 and vpc[0]["!If"][0] == "InVpc", vpc
    assert properties["VpcConfig"]["!If"][0] == "InVpc"


def test_no_wildcard_actions_or_resources_of_ours(resources: dict[str, Any]) -> None:
    checked = []
    for name, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        for policy in resource["Properties"].get("Policies", []):
            text = json.dumps(policy)
            assert '"Resource": "*"' not in text and '"Action": "*"' not in text, name
            assert '"s3:*"' not in text and '"sqs:*"' not in text, name
            checked.append(name)
    assert "RequestLogDeliveryRole" in checked, "no inline policy of ours was checked"


def test_provisioned_concurrency_target_waits_for_the_alias(resources: dict[str, Any]) -> None:
    target = resources["ProvisionedConcurrencyTarget"]
    assert target["DependsOn"] == "InferenceFunctionAliaslive"  # SAM's name for AutoPublishAlias: live
    assert resources["InferenceFunction"]["Properties"]["AutoPublishAlias"] == "live"


def test_firehose_may_write_its_error_prefix(resources: dict[str, Any]) -> None:
    stream = resources["RequestLogStream"]["Properties"]["ExtendedS3DestinationConfiguration"]
    error_prefix = stream["ErrorOutputPrefix"].split("/", 1)[0]
    statements = [
        s
        for p in resources["RequestLogDeliveryRole"]["Properties"]["Policies"]
        for s in p["PolicyDocument"]["Statement"]
        if "s3:PutObject" in s["Action"]
    ]
    writable = json.dumps([s["Resource"] for s in statements])
    assert f"/{error_prefix}/*" in writable and f"/{stream['Prefix'].split('/', 1)[0]}/*" in writable


def _routes(template: Path) -> set[str]:
    resources = yaml.load(template.read_text(), Loader=_TagLoader)["Resources"]
    return {name for name, body in resources.items() if body["Type"] == "AWS::ApiGatewayV2::Route"}


@pytest.mark.parametrize("template", [ROOT / "template.yaml", ROOT / "infra" / "container.yaml"], ids=lambda p: p.name)
def test_no_route_is_open_by_default_and_the_check_sees_an_open_one(template: Path, tmp_path: Path) -> None:
    """No allow-list entry: every route passes the authorization check with the template's defaults; the same
    template with AuthType's default set to NONE fails it on every route."""
    assert ROUTE_AUTHORIZATION not in ACCEPTED
    routes = _routes(template)
    results = _checkov_results(template, "--check", ROUTE_AUTHORIZATION)
    assert {c["resource"].rsplit(".", 1)[-1] for c in results["passed_checks"]} == routes and routes
    assert results["failed_checks"] == []
    text = template.read_text()
    default = "  AuthType:\n    Type: String\n    Default: IAM\n"
    assert text.count(default) == 1
    opened = tmp_path / template.name
    opened.write_text(text.replace(default, default.replace("IAM", "NONE")))
    results = _checkov_results(opened, "--check", ROUTE_AUTHORIZATION)
    assert {c["resource"].rsplit(".", 1)[-1] for c in results["failed_checks"]} == routes
