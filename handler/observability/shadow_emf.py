"""Shadow serving's comparisons on AWS Lambda as CloudWatch Embedded Metric Format records (namespace ``OIP``), one
JSON line on stdout per record, which Lambda's log agent turns into metrics: the Prometheus families of
``shadow_metrics.py`` under CloudWatch's names, dimensioned ``model``, ``model_version`` (the default's, as the
inference metrics name it) and ``shadow_version``:

- ``ShadowCompared`` and ``ShadowAgreement`` (Count): a compared request, and 1 when its every output agreed;
- ``ShadowFailures`` (Count, and ``reason``: ``error``, ``timeout``, ``overloaded``, or ``skipped`` when the
  invocation had less than the shadow's timeout left);
- ``ShadowOutputElements`` and ``ShadowOutputAgreement`` (Count, and ``output``): the elements an output's agreement
  counts, and those that agreed;
- ``ShadowMaxAbsDifference`` and ``ShadowMaxRelDifference`` (None, and ``output``): a float output's largest
  differences in the request, left out when infinite (a mismatched output: CloudWatch takes finite values only;
  its elements count as disagreeing all the same).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Final

import orjson

from handler.observability.comparison import Comparison
from handler.observability.shadow_metrics import Key

NAMESPACE: Final = "OIP"
DIMENSIONS: Final = ("model", "model_version", "shadow_version")


class ShadowEmf:
    """Counts what a Lambda function's shadow did (``handler/inference/shadow.py``) as EMF records on stdout."""

    def __init__(self, namespace: str = NAMESPACE) -> None:
        self.namespace = namespace

    def compared(self, key: Key, comparison: Comparison) -> None:
        """One record for the request and one per output."""
        lines = [
            self._record(
                key, {}, [("ShadowCompared", "Count", 1.0), ("ShadowAgreement", "Count", float(comparison.agrees))]
            )
        ]
        for output in comparison.outputs:
            values = [
                ("ShadowOutputElements", "Count", float(output.elements)),
                ("ShadowOutputAgreement", "Count", float(output.agreeing if output.matched else 0)),
            ]
            for name, value in (("ShadowMaxAbsDifference", output.max_abs), ("ShadowMaxRelDifference", output.max_rel)):
                if value is not None and math.isfinite(value):
                    values.append((name, "None", value))
            lines.append(self._record(key, {"output": output.name}, values))
        sys.stdout.write("".join(lines))

    def failed(self, key: Key, reason: str) -> None:
        """One record: a copy dropped for ``reason``."""
        sys.stdout.write(self._record(key, {"reason": reason}, [("ShadowFailures", "Count", 1.0)]))

    def _record(self, key: Key, extra: dict[str, str], values: list[tuple[str, str, float]]) -> str:
        dimensions = [*DIMENSIONS, *extra]
        document: dict[str, Any] = {
            "_aws": {
                "Timestamp": time.time_ns() // 1_000_000,
                "CloudWatchMetrics": [
                    {
                        "Namespace": self.namespace,
                        "Dimensions": [dimensions],
                        "Metrics": [{"Name": name, "Unit": unit} for name, unit, _ in values],
                    }
                ],
            },
            **dict(zip(DIMENSIONS, key, strict=True)),
            **extra,
        }
        document.update((name, [value]) for name, _, value in values)
        return orjson.dumps(document).decode() + "\n"
