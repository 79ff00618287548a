"""Shadow serving on AWS Lambda: ``handler.http.lambda_handler`` answers with the default version, then runs the
copy of each request through the candidate version before it returns, and writes the comparison as EMF records;
their values equal what onnxruntime's two sessions give on the same inputs. A candidate that fails or never ends
leaves every answer 200 and unchanged; a copy the invocation has no time for is skipped.

Each case runs in a process of its own: the handler wires its repository once per process (handler/runtime).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from tests.support import lambda_process, shadow_models
from tests.support.lambda_process import http_event
from tests.support.shadow_models import body, by_hand, classifier_repository, request_arrays, rows

REQUESTS = 30
DIMENSIONS = {"model": "clf", "model_version": "1", "shadow_version": "2"}


def event_of(body: dict[str, Any], path: str = "/v2/models/clf/infer") -> dict[str, Any]:
    return http_event(body, path)


def arrays() -> list[np.ndarray]:
    return request_arrays(REQUESTS, seed=9)


def invoke(repository: Path, tmp_path: Path, events: list[dict[str, Any]], timeout_ms: int = 60_000):
    """(the answers, the shadow's EMF records, the log) of the events, one invocation each, in a fresh process."""
    done = lambda_process.invoke(events, repository, tmp_path, timeout_ms, OIP_DEADLINE_MARGIN_MS="500")
    records = []
    for line in done.stdout.splitlines():
        if line.startswith('{"_aws"'):
            record = json.loads(line)
            names = [m["Name"] for m in record["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
            if names[0].startswith("Shadow"):
                records.append(record)
    return done.answers, records, done.stderr


def total(records: list[dict[str, Any]], metric: str, **dimensions: str) -> float:
    """The sum of ``metric`` over the records with these dimension values (besides the model's three)."""
    wanted = DIMENSIONS | dimensions
    found = 0.0
    for record in records:
        declared = set(record["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0])
        if metric in record and declared == set(wanted) and all(record[k] == v for k, v in wanted.items()):
            found += sum(record[metric])
    return found


def outputs(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["statusCode"] == 200, answer
    return {o["name"]: o["data"] for o in json.loads(answer["body"])["outputs"]}


@pytest.mark.parametrize("perturbed", [True, False], ids=["perturbed", "identical"])
def test_lambda_shadow_emf_metrics_equal_two_onnxruntime_sessions(tmp_path: Path, perturbed: bool) -> None:
    model = classifier_repository(tmp_path / "models", "clf", perturbed, {"shadow_version": "2"})
    sent = arrays()
    answers, records, log = invoke(tmp_path / "models", tmp_path, [event_of(body(a)) for a in sent])
    hand = by_hand(model, sent)
    assert [outputs(answer)["label"] for answer in answers] == hand.labels  # the default's answers, unchanged
    agreeing, label_agreeing, elements, largest = hand.agreeing, hand.label_agreeing, hand.elements, hand.largest
    assert total(records, "ShadowCompared") == REQUESTS
    assert total(records, "ShadowAgreement") == agreeing
    assert total(records, "ShadowOutputElements", output="label") == elements
    assert total(records, "ShadowOutputAgreement", output="label") == label_agreeing
    assert total(records, "ShadowOutputAgreement", output="probabilities") == label_agreeing
    shown = [r["ShadowMaxAbsDifference"][0] for r in records if r.get("output") == "probabilities"]
    assert shown == pytest.approx(largest, abs=1e-6)
    assert not [r for r in records if "ShadowFailures" in r]
    if perturbed:
        assert 0 < elements - label_agreeing < elements // 4  # some rows change class, most do not
        assert "shadow disagreement: model clf version 1 against 2, request id" in log
        assert "label " in log and "elements disagree" in log
        assert not [value for value in hand.values if value in log]  # no value of either answer reaches a log
    else:
        assert agreeing == REQUESTS and shown == [0.0] * REQUESTS


def test_a_request_to_the_candidate_or_a_failed_request_is_not_copied(tmp_path: Path) -> None:
    classifier_repository(tmp_path / "models", "clf", perturbed=True, parameters={"shadow_version": "2"})
    bad = {"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}
    events = [event_of(body(rows(1))), event_of(body(rows(1)), "/v2/models/clf/versions/2/infer"), event_of(bad)]
    answers, records, _ = invoke(tmp_path / "models", tmp_path, events)
    assert [answer["statusCode"] for answer in answers] == [200, 200, 400]
    assert total(records, "ShadowCompared") == 1


def test_a_failing_candidate_leaves_every_answer_200_and_counts_its_errors(tmp_path: Path) -> None:
    """Version 2 takes five features, not four: onnxruntime refuses every copy."""
    root = tmp_path / "models"
    shadow_models.failing_candidate(root)
    sent = arrays()[:5]
    answers, records, _ = invoke(root, tmp_path, [event_of(body(a)) for a in sent])
    one = ort.InferenceSession(str(root / "clf" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [outputs(a)["label"] for a in answers] == [one.run(["label"], {"input": a})[0].tolist() for a in sent]
    assert total(records, "ShadowFailures", reason="error") == 5
    assert total(records, "ShadowCompared") == 0


def test_a_candidate_that_never_ends_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    request = shadow_models.endless_candidate(tmp_path / "models", timeout_ms=100)
    answers, records, _ = invoke(tmp_path / "models", tmp_path, [event_of(request)] * 3)
    assert [outputs(answer)["y"] for answer in answers] == [[1.5]] * 3
    assert total(records, "ShadowFailures", reason="timeout") == 3
    assert total(records, "ShadowCompared") == 0


def test_a_copy_the_invocation_has_no_time_for_is_skipped(tmp_path: Path) -> None:
    """The shadow's timeout (20 s) is longer than the invocation has left (10 s less the 0.5 s margin): the copy
    never starts, so the never-ending candidate cannot hold the answer back."""
    request = shadow_models.endless_candidate(tmp_path / "models", timeout_ms=20_000)
    answers, records, _ = invoke(tmp_path / "models", tmp_path, [event_of(request)] * 2, timeout_ms=10_000)
    assert [outputs(answer)["y"] for answer in answers] == [[1.5]] * 2
    assert total(records, "ShadowFailures", reason="skipped") == 2
    assert total(records, "ShadowCompared") == 0 and total(records, "ShadowFailures", reason="timeout") == 0
