"""Shadow serving on AWS Lambda: ``handler.http.lambda_handler`` answers with the default version, then runs the
copy of each request through the candidate version before it returns, and writes the comparison as EMF records;
their values equal what onnxruntime's two sessions give on the same inputs. A candidate that fails or never ends
leaves every answer 200 and unchanged; a copy the invocation has no time for is skipped.

Each case runs in a process of its own: the handler wires its repository once per process (handler/runtime).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tests.support.onnx_models import OPSET
from tests.support.overload_models import forever
from tests.support.shadow_models import classifier_repository, rows

ROOT = Path(__file__).resolve().parents[2]
EVENT = ROOT / "events" / "http-api" / "infer-json.json"
REQUESTS = 30
DIMENSIONS = {"model": "clf", "model_version": "1", "shadow_version": "2"}

#: Calls the handler once per event of the JSON list in argv[1], with ``LocalLambdaContext(timeout_ms=argv[2])``;
#: writes the answers to argv[3]. The EMF records are on stdout.
SCRIPT = """
import json, sys
from handler.cli.lambda_context import LocalLambdaContext
from handler.http import lambda_handler
answers = [lambda_handler(event, LocalLambdaContext(timeout_ms=int(sys.argv[2])))
           for event in json.loads(open(sys.argv[1]).read())]
open(sys.argv[3], "w").write(json.dumps(answers))
"""


def event_of(body: dict[str, Any], path: str = "/v2/models/clf/infer") -> dict[str, Any]:
    event = json.loads(EVENT.read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["body"] = json.dumps(body)
    return event


def body(array: np.ndarray) -> dict[str, Any]:
    data = array.ravel().tolist()
    return {"inputs": [{"name": "input", "shape": list(array.shape), "datatype": "FP32", "data": data}]}


def arrays() -> list[np.ndarray]:
    """Most requests one row, every fifth three rows."""
    data = rows(REQUESTS * 3, seed=9)
    return [data[i * 3 : i * 3 + (3 if i % 5 == 0 else 1)] for i in range(REQUESTS)]


def invoke(repository: Path, tmp_path: Path, events: list[dict[str, Any]], timeout_ms: int = 60_000):
    """(the answers, the shadow's EMF records) of the events, one invocation each, in a fresh process."""
    (tmp_path / "events.json").write_text(json.dumps(events))
    env = {**os.environ, "MODEL_REPOSITORY": str(repository), "OIP_WARM_UP": "0", "OIP_DEADLINE_MARGIN_MS": "500"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "events.json"), str(timeout_ms), str(tmp_path / "answers.json")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = []
    for line in done.stdout.splitlines():
        if line.startswith('{"_aws"'):
            record = json.loads(line)
            names = [m["Name"] for m in record["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
            if names[0].startswith("Shadow"):
                records.append(record)
    return json.loads((tmp_path / "answers.json").read_text()), records, done.stderr


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
    one, two = (ort.InferenceSession(str(model / v / "model.onnx"), providers=["CPUExecutionProvider"]) for v in "12")
    agreeing = label_agreeing = elements = 0
    largest = []
    values: set[str] = set()
    for array, answer in zip(sent, answers, strict=True):
        p1, l1 = one.run(["probabilities", "label"], {"input": array})
        p2, l2 = two.run(["probabilities", "label"], {"input": array})
        values.update(repr(v) for v in (*p1.ravel().tolist(), *p2.ravel().tolist()))
        assert outputs(answer)["label"] == l1.tolist()  # the default's answer, unchanged
        label_agreeing += int((l1 == l2).sum())
        elements += l1.size
        agreeing += bool((l1 == l2).all())
        largest.append(float(np.abs(p1.astype(np.float64) - p2.astype(np.float64)).max()))
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
        assert not [value for value in values if value in log]  # no value of either answer reaches a log
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
    classifier_repository(root, "clf", perturbed=False, parameters={"shadow_version": "2"})
    graph = helper.make_graph(
        [helper.make_node("ArgMax", ["input"], ["label"], axis=1, keepdims=0)],
        "five",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 5])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["n"])],
    )
    onnx.save(helper.make_model(graph, opset_imports=OPSET, ir_version=8), root / "clf" / "2" / "model.onnx")
    sent = arrays()[:5]
    answers, records, _ = invoke(root, tmp_path, [event_of(body(a)) for a in sent])
    one = ort.InferenceSession(str(root / "clf" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [outputs(a)["label"] for a in answers] == [one.run(["label"], {"input": a})[0].tolist() for a in sent]
    assert total(records, "ShadowFailures", reason="error") == 5
    assert total(records, "ShadowCompared") == 0


def endless_candidate(root: Path, timeout_ms: int) -> dict[str, Any]:
    """Version 1 an identity, version 2 a run that never ends by itself (``forever``); a request for them."""
    identity = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "fast",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 1])],
    )
    for version, model in (("1", helper.make_model(identity, opset_imports=OPSET, ir_version=8)), ("2", forever())):
        (root / "clf" / version).mkdir(parents=True)
        onnx.save(model, root / "clf" / version / "model.onnx")
    (root / "clf" / "config.pbtxt").write_text(
        'name: "clf"\nparameters { key: "default_version" value { string_value: "1" } }\n'
        'parameters { key: "shadow_version" value { string_value: "2" } }\n'
        f'parameters {{ key: "shadow_timeout_ms" value {{ string_value: "{timeout_ms}" }} }}\n'
    )
    return {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.5]}]}


def test_a_candidate_that_never_ends_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    request = endless_candidate(tmp_path / "models", timeout_ms=100)
    answers, records, _ = invoke(tmp_path / "models", tmp_path, [event_of(request)] * 3)
    assert [outputs(answer)["y"] for answer in answers] == [[1.5]] * 3
    assert total(records, "ShadowFailures", reason="timeout") == 3
    assert total(records, "ShadowCompared") == 0


def test_a_copy_the_invocation_has_no_time_for_is_skipped(tmp_path: Path) -> None:
    """The shadow's timeout (20 s) is longer than the invocation has left (10 s less the 0.5 s margin): the copy
    never starts, so the never-ending candidate cannot hold the answer back."""
    request = endless_candidate(tmp_path / "models", timeout_ms=20_000)
    answers, records, _ = invoke(tmp_path / "models", tmp_path, [event_of(request)] * 2, timeout_ms=10_000)
    assert [outputs(answer)["y"] for answer in answers] == [[1.5]] * 2
    assert total(records, "ShadowFailures", reason="skipped") == 2
    assert total(records, "ShadowCompared") == 0 and total(records, "ShadowFailures", reason="timeout") == 0
