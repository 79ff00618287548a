"""Every template passes ``sam validate --lint`` and cfn-lint, and template.yaml declares what the issue names."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from scripts.lambda_events import tool

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = [ROOT / "template.yaml", *sorted((ROOT / "infra").glob("*.yaml"))]
SAM_ENV = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}

pytestmark = pytest.mark.integration


class _Loader(yaml.SafeLoader):
    """YAML loader that keeps CloudFormation short-form tags (!Ref, !If, ...) as plain values."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def load_template(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=_Loader)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_sam_validate_lint(template: Path) -> None:
    result = subprocess.run(
        [tool("sam"), "validate", "--lint", "-t", str(template)], capture_output=True, text=True, env=SAM_ENV, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is a valid SAM Template" in result.stdout + result.stderr


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_cfn_lint(template: Path) -> None:
    result = subprocess.run([tool("cfn-lint"), str(template)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_template_declares_the_operational_knobs() -> None:
    template = load_template(ROOT / "template.yaml")
    parameters = set(template["Parameters"])
    assert {
        "Architecture", "MemorySize", "ReservedConcurrency", "ProvisionedConcurrencyMin", "ProvisionedConcurrencyMax",
        "SnapStart", "AuthType", "JwtIssuer", "CorsAllowOrigins", "RequestLoggingSamplingPercentage",
        "LogRetentionDays", "ModelSource", "ModelBucket", "ModelPrefix", "ModelLayerArn",
        "InferenceThrottlingRateLimit", "InferenceThrottlingBurstLimit", "OtherThrottlingRateLimit",
        "OtherThrottlingBurstLimit",
    } <= parameters  # fmt: skip
    assert template["Parameters"]["RequestLoggingSamplingPercentage"]["Default"] == 0
    resources = {name: body["Type"] for name, body in template["Resources"].items()}
    for kind in (
        "AWS::Serverless::Function", "AWS::ApiGatewayV2::Api", "AWS::ApiGatewayV2::Authorizer",
        "AWS::ApiGatewayV2::Route", "AWS::Logs::LogGroup",
        "AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard", "AWS::ApplicationAutoScaling::ScalableTarget",
        "AWS::ApplicationAutoScaling::ScalingPolicy", "AWS::KinesisFirehose::DeliveryStream", "AWS::Glue::Table",
    ):  # fmt: skip
        assert kind in resources.values(), kind
    function = template["Resources"]["InferenceFunction"]["Properties"]
    assert function["Runtime"] == "python3.12"
    assert function["Handler"] == "handler.http.lambda_handler"
    assert template["Resources"]["InferenceFunction"]["Metadata"]["BuildMethod"] == "makefile"
    batch = template["Resources"]["BatchFunction"]
    assert batch["Properties"]["Handler"] == "handler.batch.lambda_handler"
    sqs = batch["Properties"]["Events"]["Requests"]["Properties"]
    assert sqs["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert {"BatchSize", "MaximumBatchingWindowInSeconds"} <= set(sqs)
    assert "RedrivePolicy" in template["Resources"]["RequestQueue"]["Properties"]
    state_machine = template["Resources"]["BatchStateMachine"]["Properties"]["Definition"]
    map_state = state_machine["States"]["PredictPrefix"]
    assert map_state["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert map_state["ItemReader"]["Resource"] == "arn:aws:states:::s3:listObjectsV2"
    assert {"MaxConcurrency", "ToleratedFailurePercentage", "ItemBatcher"} <= set(map_state)
    columns = template["Resources"]["RequestLogTable"]["Properties"]["TableInput"]["StorageDescriptor"]["Columns"]
    assert [c["Name"] for c in columns] == [
        "model",
        "model_version",
        "time",
        "raw_data",
        "raw_prediction",
        "groundtruth",
    ]


class _IntrinsicLoader(yaml.SafeLoader):
    """YAML loader that turns CloudFormation short forms into their long forms (``!Ref x`` -> ``{"Ref": "x"}``)."""


def _long_form(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict:
    if isinstance(node, yaml.ScalarNode):
        value: object = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}": value}


_IntrinsicLoader.add_multi_constructor("!", _long_form)
_NO_VALUE = object()


def resolved(path: Path, **parameters: str) -> dict:
    """The template's resources as CloudFormation would create them with ``parameters`` over the defaults: conditions
    evaluated, ``Fn::If`` chosen, parameters substituted, ``AWS::NoValue`` dropped, conditional resources left out."""
    template = yaml.load(path.read_text(), Loader=_IntrinsicLoader)
    values: dict[str, object] = {}
    for name, declaration in template["Parameters"].items():
        value = parameters.get(name, declaration.get("Default"))
        values[name] = str(value).split(",") if declaration["Type"] == "CommaDelimitedList" else value
    conditions: dict[str, bool] = {}

    def condition(name: str) -> bool:
        if name not in conditions:
            conditions[name] = bool(resolve(template["Conditions"][name]))
        return conditions[name]

    def resolve(node: object) -> object:
        if isinstance(node, list):
            return [item for item in map(resolve, node) if item is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            if key == "Ref":
                return _NO_VALUE if value == "AWS::NoValue" else values.get(value, node)
            if key == "Condition":
                return condition(value)
            if key == "Fn::If":
                return resolve(value[1] if condition(value[0]) else value[2])
            if key == "Fn::Equals":
                left, right = resolve(value)
                return str(left) == str(right)
            if key == "Fn::Not":
                return not resolve(value[0])
            if key == "Fn::Join":
                return value[0].join(map(str, resolve(value[1])))
        return {key: item for key, item in ((k, resolve(v)) for k, v in node.items()) if item is not _NO_VALUE}

    return {
        name: {**body, "Properties": resolve(body.get("Properties", {}))}
        for name, body in template["Resources"].items()
        if "Condition" not in body or condition(body["Condition"])
    }


#: The templates that put an HTTP API in front of the function.
API_TEMPLATES = [ROOT / "template.yaml", ROOT / "infra" / "container.yaml"]


def _of_type(resources: dict, kind: str) -> dict[str, dict]:
    return {name: body["Properties"] for name, body in resources.items() if body["Type"] == kind}


def _route_for(routes: dict[str, dict], method: str, path: str) -> str | None:
    """The key of the route API Gateway picks for a request: the longest literal prefix wins."""
    best, length = None, -1
    for route in routes.values():
        route_method, pattern = route["RouteKey"].split(" ", 1)
        if route_method not in (method, "ANY"):
            continue
        if pattern.endswith("/{proxy+}"):
            prefix = pattern[: -len("{proxy+}")]
            matches = path.startswith(prefix) and len(path) > len(prefix)
        else:
            matches = path == pattern
        if matches and len(pattern) > length:
            best, length = route["RouteKey"], len(pattern)
    return best


@pytest.mark.parametrize("template", API_TEMPLATES, ids=lambda p: p.name)
def test_a_fresh_deploy_answers_only_signed_requests(template: Path) -> None:
    defaults = _of_type(resolved(template), "AWS::ApiGatewayV2::Route")
    assert load_template(template)["Parameters"]["AuthType"]["Default"] == "IAM"
    assert defaults and {r["AuthorizationType"] for r in defaults.values()} == {"AWS_IAM"}
    assert all("AuthorizerId" not in route for route in defaults.values())
    # no catch-all: $default or ANY would also take browsers' unsigned CORS preflight requests
    assert not [r["RouteKey"] for r in defaults.values() if r["RouteKey"] == "$default" or r["RouteKey"][:4] == "ANY "]
    for method, path in [("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/v2/health/ready"), ("GET", "/v2"),
                         ("GET", "/v2/models/iris"), ("POST", "/v2/models/iris/infer"), ("POST", "/invocations"),
                         ("POST", "/v1/models/iris:predict"), ("POST", "/v2/repository/index")]:  # fmt: skip
        assert _route_for(defaults, method, path), (method, path)  # served, and so behind the same authorization
    opened = _of_type(resolved(template, AuthType="NONE"), "AWS::ApiGatewayV2::Route")
    assert {r["AuthorizationType"] for r in opened.values()} == {"NONE"}


def test_jwt_authorizes_every_route_with_the_authorizer() -> None:
    resources = resolved(ROOT / "template.yaml", AuthType="JWT", JwtIssuer="https://issuer.example", JwtAudience="a,b")
    routes = _of_type(resources, "AWS::ApiGatewayV2::Route")
    assert {(r["AuthorizationType"], json.dumps(r["AuthorizerId"])) for r in routes.values()} == {
        ("JWT", '{"Ref": "JwtAuthorizer"}')
    }
    authorizer = _of_type(resources, "AWS::ApiGatewayV2::Authorizer")["JwtAuthorizer"]
    assert authorizer["JwtConfiguration"] == {"Issuer": "https://issuer.example", "Audience": ["a", "b"]}
    assert "JwtAuthorizer" not in resolved(ROOT / "template.yaml")


def test_cors_allows_no_origin_until_configured() -> None:
    assert load_template(ROOT / "template.yaml")["Parameters"]["CorsAllowOrigins"]["Default"] == ""
    api = _of_type(resolved(ROOT / "template.yaml"), "AWS::ApiGatewayV2::Api")["HttpApi"]
    assert "CorsConfiguration" not in api
    origins = "https://app.example.com,https://admin.example.com"
    cors = _of_type(resolved(ROOT / "template.yaml", CorsAllowOrigins=origins), "AWS::ApiGatewayV2::Api")["HttpApi"]
    assert cors["CorsConfiguration"]["AllowOrigins"] == origins.split(",")
    assert {"authorization", "x-amz-date", "x-amz-security-token"} <= set(cors["CorsConfiguration"]["AllowHeaders"])
    assert "CorsConfiguration" not in _of_type(resolved(ROOT / "infra" / "container.yaml"), "AWS::ApiGatewayV2::Api")


@pytest.mark.parametrize("template", API_TEMPLATES, ids=lambda p: p.name)
def test_inference_and_other_routes_have_their_own_throttles(template: Path) -> None:
    parameters = load_template(template)["Parameters"]
    resources = resolved(template)
    routes = _of_type(resources, "AWS::ApiGatewayV2::Route")
    (stage,) = _of_type(resources, "AWS::ApiGatewayV2::Stage").values()
    other = {"ThrottlingRateLimit": "OtherThrottlingRateLimit", "ThrottlingBurstLimit": "OtherThrottlingBurstLimit"}
    inference = {k: v.replace("Other", "Inference") for k, v in other.items()}
    assert stage["DefaultRouteSettings"] == {k: parameters[v]["Default"] for k, v in other.items()}
    inference_keys = {_route_for(routes, "POST", path) for path in
                      ("/v2/models/iris/infer", "/v2/models/iris/versions/1/infer", "/v1/models/iris:predict",
                       "/invocations")}  # fmt: skip
    assert set(stage["RouteSettings"]) == inference_keys and None not in inference_keys
    for settings in stage["RouteSettings"].values():
        assert settings == {k: parameters[v]["Default"] for k, v in inference.items()}
    for name in (*other.values(), *inference.values()):
        assert parameters[name]["Default"] > 0
    assert parameters["InferenceThrottlingRateLimit"]["Default"] > parameters["OtherThrottlingRateLimit"]["Default"]
    # the health, metadata and control routes fall to the default settings
    assert _route_for(routes, "GET", "/v2/health/ready") not in stage["RouteSettings"]
    assert _route_for(routes, "POST", "/v2/repository/models/iris/load") not in stage["RouteSettings"]
    body = next(b for b in load_template(template)["Resources"].values() if b["Type"] == "AWS::ApiGatewayV2::Stage")
    assert set(body["DependsOn"]) == set(routes)  # RouteSettings name routes that must exist first
    (permission,) = _of_type(resources, "AWS::Lambda::Permission").values()
    assert permission["SourceArn"]["Fn::Sub"].endswith(":${HttpApi}/*")  # every route may invoke the function
