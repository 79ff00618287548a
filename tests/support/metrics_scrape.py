"""Reading a Prometheus scrape in the tests: prometheus_client's own parser of the text format."""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    """One scrape: each family's type, and every sample's value by name and sorted labels."""

    types: dict[str, str]
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name`` with exactly these labels; 0 when there is none (a series not made yet)."""
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def label_sets(self, name: str) -> set[tuple[str, ...]]:
        """The label names of the samples called ``name``."""
        return {tuple(key for key, _ in labels) for sample, labels in self.samples if sample == name}

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}


def parse(text: str) -> Scrape:
    types: dict[str, str] = {}
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            samples[(sample.name, labels)] = sample.value
            if family.type == "counter" and sample.name == f"{family.name}_total":
                # The parser names a counter's samples ``_total`` even where the text did not (Triton's).
                samples[(family.name, labels)] = sample.value
    return Scrape(types, samples)


def scrape(url: str) -> Scrape:
    """GET ``url`` (a ``/metrics`` endpoint) and parse it."""
    response = httpx.get(url, timeout=10)
    response.raise_for_status()
    return parse(response.text)


#: PromQL's functions, aggregations and keywords the dashboard's expressions use: not metric names.
PROMQL_WORDS = frozenset(
    {
        "sum", "avg", "min", "max", "count", "rate", "irate", "increase", "histogram_quantile", "by", "without",
        "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "topk", "clamp_min",
    }
)  # fmt: skip


def dashboard_expressions(document: object) -> list[str]:
    """Every ``expr`` in a Grafana dashboard's JSON, however deep."""
    if isinstance(document, dict):
        found = [document["expr"]] if isinstance(document.get("expr"), str) else []
        return found + [expr for value in document.values() for expr in dashboard_expressions(value)]
    if isinstance(document, list):
        return [expr for value in document for expr in dashboard_expressions(value)]
    return []


def metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression selects (label matchers, ranges, grouping labels and strings aside)."""
    text = re.sub(r'"[^"]*"', "", expression)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    return {word for word in re.findall(r"(?<![\w.])[A-Za-z_:][\w:]*", text) if word not in PROMQL_WORDS}
