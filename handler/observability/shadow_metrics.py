"""Shadow serving's counters: what each ``oip serve`` worker's shadow compared (``ShadowCounters``, written to
``shadow-<pid>.json`` in the statistics directory, ``OIP_STATS_DIR``), and the Prometheus families the metrics
endpoint builds from every worker's file at scrape time (``ShadowMetrics``, registered by ``exporter.py``).

Every family is labelled ``model``, ``version`` (the default's) and ``shadow_version``:

- ``oip_shadow_compared_total``: requests both versions answered and compared;
- ``oip_shadow_agreement_total``: of those, requests whose every output agreed (``comparison.py``);
- ``oip_shadow_failures_total`` (and ``reason``: ``error``, ``timeout``, ``overloaded`` when the queue was full):
  copies dropped without a comparison;
- ``oip_shadow_output_elements_total`` and ``oip_shadow_output_agreement_total`` (and ``output``): the elements
  an output's agreement counts, and those that agreed;
- ``oip_shadow_max_abs_difference`` and ``oip_shadow_max_rel_difference`` (histograms, and ``output``): each
  compared request's largest difference per float output.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from handler.observability.comparison import Comparison

logger = logging.getLogger(__name__)

LABELS: Final = ("model", "version", "shadow_version")
FAILURE_REASONS: Final = ("error", "timeout", "overloaded")
#: Upper bounds of the difference histograms' buckets (``+Inf`` after them); 0 holds identical answers.
DIFFERENCE_BOUNDS: Final = (0.0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0)
FILE_PREFIX: Final = "shadow-"
#: Seconds between two writes of a worker's counters file at most (a scrape sees counts this old at most).
WRITE_INTERVAL_S: Final = 0.2

Key = tuple[str, str, str]


def _empty() -> dict[str, Any]:
    return {"compared": 0, "agreeing": 0, "failures": dict.fromkeys(FAILURE_REASONS, 0), "outputs": {}}


def _empty_output() -> dict[str, Any]:
    buckets = [0] * (len(DIFFERENCE_BOUNDS) + 1)
    return {"elements": 0, "agreeing": 0, "abs": list(buckets), "rel": list(buckets), "abs_sum": 0.0, "rel_sum": 0.0}


def _bucket(value: float) -> int:
    for index, bound in enumerate(DIFFERENCE_BOUNDS):
        if value <= bound:
            return index
    return len(DIFFERENCE_BOUNDS)


class ShadowCounters:
    """One process's shadow counters, written to ``directory`` (None: kept in memory only) at most every
    ``WRITE_INTERVAL_S`` while they change, and ``WRITE_INTERVAL_S`` after the last change at the latest."""

    def __init__(self, directory: str | Path | None) -> None:
        self.directory = Path(directory) if directory else None
        self.counts: dict[Key, dict[str, Any]] = {}
        self._written = 0.0
        self._pending: asyncio.TimerHandle | None = None

    @property
    def path(self) -> Path | None:
        """This process's file (named by its pid when it writes, so a worker forked after the counters were made
        writes its own)."""
        return self.directory / f"{FILE_PREFIX}{os.getpid()}.json" if self.directory else None

    def compared(self, key: Key, comparison: Comparison) -> None:
        """Count one compared request."""
        counts = self.counts.setdefault(key, _empty())
        counts["compared"] += 1
        counts["agreeing"] += comparison.agrees
        for output in comparison.outputs:
            tally = counts["outputs"].setdefault(output.name, _empty_output())
            tally["elements"] += output.elements
            tally["agreeing"] += output.agreeing
            if output.max_abs is not None and output.max_rel is not None:
                tally["abs"][_bucket(output.max_abs)] += 1
                tally["rel"][_bucket(output.max_rel)] += 1
                tally["abs_sum"] += output.max_abs if math.isfinite(output.max_abs) else 0.0
                tally["rel_sum"] += output.max_rel if math.isfinite(output.max_rel) else 0.0
        self._write()

    def failed(self, key: Key, reason: str) -> None:
        """Count one copy dropped for ``reason`` (``FAILURE_REASONS``)."""
        self.counts.setdefault(key, _empty())["failures"][reason] += 1
        self._write()

    def _write(self) -> None:
        """Write now if the last write is ``WRITE_INTERVAL_S`` old; else once it is (on the running loop, if any)."""
        if self.directory is None or self._pending is not None:
            return
        wait = self._written + WRITE_INTERVAL_S - time.monotonic()
        if wait > 0:
            try:
                self._pending = asyncio.get_running_loop().call_later(wait, self.flush)
                return
            except RuntimeError:  # no loop running: written at once
                pass
        self.flush()

    def flush(self) -> None:
        """Write the counters to the worker's file now (replacing it whole)."""
        self._pending = None
        path = self.path
        if path is None:
            return
        self._written = time.monotonic()
        rows = [{"labels": list(key), **counts} for key, counts in self.counts.items()]
        partial = path.with_name(path.name + ".partial")
        try:
            partial.write_text(json.dumps(rows))
            os.replace(partial, path)
        except OSError as exc:  # the statistics directory gone (the server stopping): counted in memory still
            logger.debug("shadow counters not written: %s", exc)


def read_counters(directory: str | Path) -> dict[Key, dict[str, Any]]:
    """Every worker's shadow counters in ``directory``, summed."""
    total: dict[Key, dict[str, Any]] = {}
    for path in sorted(Path(directory).glob(f"{FILE_PREFIX}*.json")):
        try:
            rows = json.loads(path.read_text())
        except (OSError, ValueError):  # a worker's file replaced while read: the next scrape reads it
            continue
        for row in rows:
            key: Key = tuple(row["labels"])  # type: ignore[assignment]
            counts = total.setdefault(key, _empty())
            counts["compared"] += row["compared"]
            counts["agreeing"] += row["agreeing"]
            for reason, count in row["failures"].items():
                counts["failures"][reason] = counts["failures"].get(reason, 0) + count
            for name, tally in row["outputs"].items():
                into = counts["outputs"].setdefault(name, _empty_output())
                for field in ("elements", "agreeing", "abs_sum", "rel_sum"):
                    into[field] += tally[field]
                for kind in ("abs", "rel"):
                    into[kind] = [a + b for a, b in zip(into[kind], tally[kind], strict=True)]
    return total


class ShadowMetrics:
    """The shadow families of a scrape (module docstring), from ``read_counters``."""

    def __init__(self, stats_dir: str | Path) -> None:
        self.stats_dir = stats_dir

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        counts = read_counters(self.stats_dir)
        compared = CounterMetricFamily(
            "oip_shadow_compared", "Requests both versions answered, compared", labels=LABELS
        )
        agreeing = CounterMetricFamily(
            "oip_shadow_agreement", "Compared requests whose every output agreed", labels=LABELS
        )
        failures = CounterMetricFamily(
            "oip_shadow_failures", "Shadow copies dropped without a comparison", labels=(*LABELS, "reason")
        )
        elements = CounterMetricFamily(
            "oip_shadow_output_elements", "Elements an output's agreement counts", labels=(*LABELS, "output")
        )
        agreeing_elements = CounterMetricFamily(
            "oip_shadow_output_agreement", "Elements of an output that agreed", labels=(*LABELS, "output")
        )
        histograms = {
            kind: HistogramMetricFamily(
                f"oip_shadow_max_{kind}_difference",
                f"Largest {'absolute' if kind == 'abs' else 'relative'} difference of a float output per request",
                labels=(*LABELS, "output"),
            )
            for kind in ("abs", "rel")
        }
        for key, row in sorted(counts.items()):
            labels = list(key)
            compared.add_metric(labels, row["compared"])
            agreeing.add_metric(labels, row["agreeing"])
            for reason in FAILURE_REASONS:
                failures.add_metric([*labels, reason], row["failures"].get(reason, 0))
            for name, tally in sorted(row["outputs"].items()):
                elements.add_metric([*labels, name], tally["elements"])
                agreeing_elements.add_metric([*labels, name], tally["agreeing"])
                for kind, family in histograms.items():
                    if sum(tally[kind]) == 0:
                        continue
                    cumulative, buckets = 0, []
                    for bound, count in zip((*DIFFERENCE_BOUNDS, math.inf), tally[kind], strict=True):
                        cumulative += count
                        buckets.append(("+Inf" if math.isinf(bound) else repr(bound), cumulative))
                    family.add_metric([*labels, name], buckets, tally[f"{kind}_sum"])
        yield from (compared, agreeing, failures, elements, agreeing_elements, *histograms.values())
