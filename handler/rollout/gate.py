"""The pre-traffic hook's agreement gate: the same requests answered by the version the alias serves and by the new
one, their V2 answers compared by handler/observability/comparison.py's rules.

The requests are a JSON Lines object in S3 (``OIP_ROLLOUT_COMPARISON_S3_URI``): each line either a check
(``{"method", "path", "body"}``, as in ``OIP_ROLLOUT_CHECKS``) or a V2 request with its model's name
(``{"model", "version"?, "inputs", ...}``, as sampled request logs hold them). Both versions are invoked with
``lambda:Invoke`` and a ``Qualifier``: the alias (``OIP_ROLLOUT_ALIAS``) and the new version's number. A request
is *compared* when the current version answers it 200 with V2 ``outputs``; it *agrees* when the new version
answers 200 too and every output agrees. Lines are answered until ``OIP_ROLLOUT_AGREEMENT_REQUESTS`` requests are
compared or the object ends; fewer compared, or an agreement (agreeing / compared) below
``OIP_ROLLOUT_MIN_AGREEMENT``, is a failure. ``OIP_ROLLOUT_AGREEMENT_REQUESTS`` of 0 (or unset) turns the gate off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from adapters.types import Tensor
from handler.observability.comparison import compare_outputs

#: One invocation of a function version: an event in, the function's answer out (the hook's ``Invoke``).
Invoke = Callable[[dict[str, Any]], dict[str, Any]]
#: The HTTP API event for a method, a path and a JSON body: the hook's ``http_event``, handed in by the hook, which
#: imports this module only when the gate is on (the post-traffic hook's package has the hook alone).
EventOf = Callable[[str, str, Any], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class GateSettings:
    """What the gate needs, from the hook function's environment."""

    requests: int
    min_agreement: float
    source: str
    alias: str

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> GateSettings:
        """The gate's variables, from ``environ`` or the hook function's environment."""
        env = _gate_variables() if environ is None else environ
        return cls(
            requests=int(env.get("OIP_ROLLOUT_AGREEMENT_REQUESTS", "0") or 0),
            min_agreement=float(env.get("OIP_ROLLOUT_MIN_AGREEMENT", "1") or 1),
            source=env.get("OIP_ROLLOUT_COMPARISON_S3_URI", "").strip(),
            alias=env.get("OIP_ROLLOUT_ALIAS", "live").strip() or "live",
        )

    @property
    def on(self) -> bool:
        return self.requests > 0


def _gate_variables() -> dict[str, str]:
    """The gate's variables as the pre-traffic hook function's environment sets them (template.yaml)."""
    found = {
        "OIP_ROLLOUT_AGREEMENT_REQUESTS": os.environ.get("OIP_ROLLOUT_AGREEMENT_REQUESTS"),
        "OIP_ROLLOUT_MIN_AGREEMENT": os.environ.get("OIP_ROLLOUT_MIN_AGREEMENT"),
        "OIP_ROLLOUT_COMPARISON_S3_URI": os.environ.get("OIP_ROLLOUT_COMPARISON_S3_URI"),
        "OIP_ROLLOUT_ALIAS": os.environ.get("OIP_ROLLOUT_ALIAS"),
    }
    return {name: value for name, value in found.items() if value is not None}


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """How many requests were compared and how many agreed; ``failure`` is None when the gate passes."""

    compared: int
    agreeing: int
    failure: str | None


def request_event(line: dict[str, Any], http_event: EventOf) -> dict[str, Any]:
    """The HTTP API event of one JSON Lines request (module docstring)."""
    if "path" in line:
        return http_event(line.get("method", "POST"), line["path"], line.get("body"))
    body = {key: value for key, value in line.items() if key not in ("model", "version")}
    version = f"/versions/{line['version']}" if line.get("version") else ""
    return http_event("POST", f"/v2/models/{line['model']}{version}/infer", body)


def answer_outputs(response: dict[str, Any]) -> list[Tensor] | None:
    """The V2 outputs of a 200 answer as tensors, None for any other answer."""
    if response.get("statusCode") != 200:
        return None
    try:
        document = json.loads(response.get("body") or "null")
        outputs = document["outputs"]
        return [
            Tensor(o["name"], o["datatype"], tuple(o["shape"]), np.asarray(o["data"]).reshape(o["shape"]))
            for o in outputs
        ]
    except (ValueError, KeyError, TypeError):
        return None


def run_gate(
    lines: Iterable[dict[str, Any]],
    current: Invoke,
    candidate: Invoke,
    requests: int,
    min_agreement: float,
    http_event: EventOf,
) -> GateOutcome:
    """Answer ``lines`` through both versions until ``requests`` are compared; judge the agreement."""
    compared = agreeing = 0
    for line in lines:
        if compared >= requests:
            break
        event = request_event(line, http_event)
        ours = answer_outputs(current(event))
        if ours is None:
            continue
        compared += 1
        try:
            theirs = answer_outputs(candidate(event))
        except Exception:  # the new version failing to answer is a disagreement, never a stuck deployment
            theirs = None
        if theirs is not None and compare_outputs(ours, theirs).agrees:
            agreeing += 1
    if compared < requests:
        return GateOutcome(compared, agreeing, f"agreement gate: {compared} requests compared, {requests} needed")
    agreement = agreeing / compared
    if agreement < min_agreement:
        failure = f"agreement gate: {agreeing} of {compared} requests agree ({agreement:.4f} < {min_agreement})"
        return GateOutcome(compared, agreeing, failure)
    return GateOutcome(compared, agreeing, None)


def parse_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON Lines text (blank lines skipped)."""
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def read_s3_text(uri: str, s3: Any) -> str:
    """The object ``s3://bucket/key`` as UTF-8 text."""
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"OIP_ROLLOUT_COMPARISON_S3_URI is not s3://bucket/key: {uri!r}")
    bucket, key = uri[5:].split("/", 1)
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")


def qualified_invoker(function: str, qualifier: str, client: Any) -> Invoke:
    """Invoke ``function`` at ``qualifier`` (an alias or a version number) synchronously."""

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        reply = client.invoke(FunctionName=function, Qualifier=qualifier, Payload=json.dumps(event).encode())
        payload = json.loads(reply["Payload"].read() or b"{}")
        if reply.get("FunctionError"):
            return {"statusCode": None, "body": json.dumps(payload)}
        return payload

    return invoke


def gate_failures(settings: GateSettings, target: str, lambda_client: Any, s3: Any, http_event: EventOf) -> list[str]:
    """The gate's failure for the version ARN ``target`` (empty when it passes or is off)."""
    if not settings.on:
        return []
    function, version = target.rsplit(":", 1)
    lines = parse_lines(read_s3_text(settings.source, s3))
    outcome = run_gate(
        lines,
        qualified_invoker(function, settings.alias, lambda_client),
        qualified_invoker(function, version, lambda_client),
        settings.requests,
        settings.min_agreement,
        http_event,
    )
    return [] if outcome.failure is None else [outcome.failure]
