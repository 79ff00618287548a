"""The benchmarks (``python -m bench.<name>``).

The ``oip serve`` processes they start serve no Prometheus metrics unless a benchmark asks (``--metrics-port``,
bench_metrics.py): the default port, Triton's 8002, is one per machine, and benchmarks start servers side by side.
"""

import os

os.environ.setdefault("OIP_METRICS_PORT", "0")
