"""template.yaml's gradual deployments: DeploymentPreference with the alarms as rollback triggers and the hooks,
and the environment the versions resource reads (test_templates.py runs sam validate --lint and cfn-lint)."""

from __future__ import annotations

import pytest
import yaml

from tests.integration.test_iam import _TagLoader
from tests.integration.test_templates import ROOT, load_template

pytestmark = pytest.mark.integration


def test_deployment_preference_rolls_back_on_the_alarms_and_runs_the_hooks() -> None:
    template = load_template(ROOT / "template.yaml")
    parameters = template["Parameters"]
    assert parameters["DeploymentType"]["Default"] == "AllAtOnce"
    assert {"Canary10Percent5Minutes", "Linear10PercentEvery1Minute"} <= set(
        parameters["DeploymentType"]["AllowedValues"]
    )
    function = template["Resources"]["InferenceFunction"]["Properties"]
    assert function["AutoPublishAlias"] == "live"
    preference = function["DeploymentPreference"]
    assert set(preference) == {"Type", "Alarms", "Hooks"}
    assert set(preference["Hooks"]) == {"PreTraffic", "PostTraffic"}
    assert len(preference["Alarms"]) == 3
    alarm = template["Resources"]["ModelErrorRateAlarm"]
    assert alarm["Type"] == "AWS::CloudWatch::Alarm"
    post = template["Resources"]["PostTrafficHookFunction"]["Properties"]
    assert post["Handler"] == "hook.lambda_handler" and post["CodeUri"] == "handler/rollout/"
    assert (ROOT / post["CodeUri"] / "hook.py").is_file()
    pre = template["Resources"]["PreTrafficHookFunction"]
    assert pre["Properties"]["Handler"] == "handler.rollout.hook.lambda_handler" and pre["Properties"]["CodeUri"] == "."
    assert pre["Metadata"]["BuildMethod"] == "makefile"  # the project's code, as the inference function's
    assert "build-PreTrafficHookFunction" in (ROOT / "Makefile").read_text()
    for hook in (pre["Properties"], post):
        assert {"OIP_ROLLOUT_TARGET", "OIP_ROLLOUT_CHECKS"} <= set(hook["Environment"]["Variables"])


def test_the_agreement_gate_is_off_by_default_and_reads_only_its_object() -> None:
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=_TagLoader)
    parameters = template["Parameters"]
    assert (
        parameters["RolloutAgreementRequests"]["Default"] == 0 and parameters["RolloutComparisonS3Uri"]["Default"] == ""
    )
    hook = template["Resources"]["PreTrafficHookFunction"]["Properties"]
    gated = {"!If": ["RolloutGateOn", {"!Ref": "RolloutAgreementRequests"}, "0"]}
    assert hook["Environment"]["Variables"]["OIP_ROLLOUT_AGREEMENT_REQUESTS"] == gated
    read = hook["Policies"][1]["Statement"][0]["!If"]
    assert read[0] == "RolloutGateOn" and read[2] == {"!Ref": "AWS::NoValue"}
    assert read[1]["Action"] == "s3:GetObject"
    arn, names = read[1]["Resource"]["!Sub"]
    assert arn == "arn:${AWS::Partition}:s3:::${Object}"

    def object_of(uri: str) -> str:
        """The object the Resource names for a RolloutComparisonS3Uri: !Select of !Split of !Sub, evaluated."""
        index, split = names["Object"]["!Select"]
        separator, sub = split["!Split"]
        return sub["!Sub"].replace("${RolloutComparisonS3Uri}", uri).split(separator)[index]

    assert object_of("s3://oip-logs/requests/sample.jsonl") == "oip-logs/requests/sample.jsonl"
    assert object_of("") == ""  # unset: the !Select stays in range


def test_the_function_environment_carries_what_the_versions_resource_reports() -> None:
    template = load_template(ROOT / "template.yaml")
    variables = template["Resources"]["InferenceFunction"]["Properties"]["Environment"]["Variables"]
    assert {"OIP_DEFAULT_VERSIONS", "OIP_AUTOSCALING_MIN_NODES", "OIP_AUTOSCALING_MAX_NODES",
            "OIP_REQUEST_LOG_SAMPLING", "OIP_REQUEST_LOG_STREAM"} <= set(variables)  # fmt: skip
    assert template["Parameters"]["DefaultModelVersions"]["Default"] == ""
