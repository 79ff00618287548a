"""The CloudWatch dashboard of template.yaml searches the OIP metrics by the dimensions the function's EMF records
carry: each ``SEARCH('{OIP,...} MetricName="..."')`` names a metric a record declares, with exactly that record's
dimension set (CloudWatch finds nothing for any other set)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from adapters.types import Tensor
from handler.observability.comparison import compare_outputs
from handler.observability.shadow_emf import ShadowEmf
from handler.observability.telemetry import InferObservation, emf_line

ROOT = Path(__file__).resolve().parents[2]
SEARCH = re.compile(r"SEARCH\('\{OIP,([^}]*)\} MetricName=\"(\w+)\"'")

pytestmark = pytest.mark.integration


class _Loader(yaml.SafeLoader):
    """Keeps !Sub's list (the dashboard's body and its variables) and drops the other short-form tags."""


_Loader.add_multi_constructor(
    "!", lambda loader, suffix, node: loader.construct_sequence(node) if isinstance(node, yaml.SequenceNode) else None
)


def dashboard_searches() -> list[tuple[str, frozenset[str]]]:
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=_Loader)
    body = json.loads(template["Resources"]["Dashboard"]["Properties"]["DashboardBody"][0])
    expressions = [
        item["expression"]
        for widget in body["widgets"]
        for row in widget["properties"].get("metrics", [])
        for item in row
        if isinstance(item, dict) and "expression" in item
    ]
    return [(metric, frozenset(names.split(","))) for text in expressions for names, metric in SEARCH.findall(text)]


def declared(records: list[dict[str, Any]]) -> dict[str, set[frozenset[str]]]:
    """Each metric name the records declare, with the dimension sets it is declared under."""
    found: dict[str, set[frozenset[str]]] = {}
    for record in records:
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                for dimensions in directive["Dimensions"]:
                    found.setdefault(metric["Name"], set()).add(frozenset(dimensions))
    return found


def test_every_dashboard_search_finds_a_metric_the_function_writes(capsys: pytest.CaptureFixture[str]) -> None:
    scores = Tensor("probabilities", "FP32", (1, 2), np.array([[0.4, 0.6]], np.float32))
    moved = Tensor("probabilities", "FP32", (1, 2), np.array([[0.6, 0.4]], np.float32))
    emf = ShadowEmf()
    emf.compared(("clf", "1", "2"), compare_outputs([scores], [moved]))
    emf.failed(("clf", "1", "2"), "timeout")
    lines = capsys.readouterr().out.splitlines()
    lines += [
        emf_line("OIP", InferObservation("iris", "1", 200), init_ms=100.0),
        emf_line("OIP", InferObservation("iris", "1", 500)),
    ]
    written = declared([json.loads(line) for line in lines])
    searches = dashboard_searches()
    assert {metric for metric, _ in searches} >= {"ShadowCompared", "ShadowAgreement", "ShadowFailures"}
    for metric, dimensions in searches:
        assert dimensions in written.get(metric, set()), (metric, sorted(dimensions), written.get(metric))
