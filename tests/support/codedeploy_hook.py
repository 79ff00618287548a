"""The CodeDeploy lifecycle hook event the rollout hook tests send, and the status report a botocore ``Stubber`` of
CodeDeploy then expects."""

from __future__ import annotations

from botocore.stub import Stubber

HOOK_EVENT = {"DeploymentId": "d-ABCDEF123", "LifecycleEventHookExecutionId": "hook-execution-1"}


def expect_report(stubber: Stubber, status: str) -> None:
    """``put_lifecycle_event_hook_execution_status`` for ``HOOK_EVENT`` with ``status``, as the next call."""
    stubber.add_response(
        "put_lifecycle_event_hook_execution_status",
        {"lifecycleEventHookExecutionId": HOOK_EVENT["LifecycleEventHookExecutionId"]},
        {
            "deploymentId": HOOK_EVENT["DeploymentId"],
            "lifecycleEventHookExecutionId": HOOK_EVENT["LifecycleEventHookExecutionId"],
            "status": status,
        },
    )
