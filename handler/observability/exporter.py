"""The Prometheus endpoint of ``oip serve`` (``--metrics-port``, Triton's 8002): one scrape for the whole server.

What a scrape holds, all rendered by prometheus_client from metric families built at scrape time (its
custom-collector API; the workers never import it, and its multiprocess mode is not used):

- Triton's per-model counters (``nv_inference_request_success``, ``nv_inference_request_failure``,
  ``nv_inference_count``, ``nv_inference_exec_count``, ``nv_inference_*_duration_us``), labels ``model`` and
  ``version`` (and ``reason`` on failures), read from the statistics extension's shared counters
  (``OIP_STATS_DIR``): the numbers ``/v2/models/stats`` gives, every worker's, dead ones' included. Failures are
  counted by Triton's reason as each request ends (``prometheus.py``: ``failure_reason``), refusals before the
  model included, a client's 4xx excluded; a dead worker's requests in progress are ``BACKEND`` failures. Their samples
  carry Triton's names exactly; prometheus_client writes a counter's samples with a ``_total`` suffix, so they
  are exposed untyped (``rate`` and ``increase`` work on them as on Triton's);
- the latency histograms ``oip_inference_{request,queue,compute}_duration_seconds`` (labels ``model`` and
  ``version``), from the buckets the same counters keep, and Triton's ``nv_inference_pending_request_count`` from
  the workers' pending rows (``prometheus.py``); a dead worker's counts stay in, its pending requests do not
  (``retire``, called by the supervisor as it reaps it);
- Triton's host gauges ``nv_cpu_utilization``, ``nv_cpu_memory_total_bytes`` and ``nv_cpu_memory_used_bytes``;
- ``process_*``: CPU seconds, resident and virtual memory and open files summed over the supervisor and its
  workers, the supervisor's start time and file limit;
- ``oip_build_info``: the server's version, Python's and onnxruntime's;
- shadow serving's comparisons (``oip_shadow_*``), from every worker's ``shadow-<pid>.json`` in the same
  directory (``shadow_metrics.py``).

With ``--workers N`` it runs in a process of its own that the supervisor forks and replaces (``workers.py``), so
the supervisor stays single-threaded; with one worker, in a thread of the serving process. It answers at most
``MAX_CONNECTIONS`` connections at once, each in a thread; more wait in the listen backlog (then are refused by
the kernel), and a stalled one is dropped after ``_QuietHandler.timeout``. A scrape that fails (a counters file
half written, a bug) is answered 500, logged once per kind, and the next one is served as usual.
"""

from __future__ import annotations

import importlib.metadata
import logging
import platform
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from handler import __version__
from handler.observability.shadow_metrics import ShadowMetrics
from handler.protocol.statistics_counters import BUCKETS_NS, FAILURE_REASONS, HISTOGRAMS, Snapshot, read_snapshot

logger = logging.getLogger(__name__)
#: Most connections the metrics server answers at once (a thread each); the rest wait in the listen backlog.
MAX_CONNECTIONS: Final = 16

#: Triton's counters: name -> (help text, what of a ``$model_stat`` document it counts).
TRITON_COUNTERS: Final[dict[str, tuple[str, Callable[[dict[str, Any]], float]]]] = {
    "nv_inference_request_success": (
        "Number of successful inference requests, all batch sizes",
        lambda d: d["inference_stats"]["success"]["count"],
    ),
    "nv_inference_count": ("Number of inferences performed (a batch of n counts n)", lambda d: d["inference_count"]),
    "nv_inference_exec_count": (
        "Number of model executions performed (a merged batch counts one)",
        lambda d: d["execution_count"],
    ),
    "nv_inference_request_duration_us": (
        "Cumulative inference request duration in microseconds, successes",
        lambda d: d["inference_stats"]["success"]["ns"] // 1000,
    ),
    "nv_inference_queue_duration_us": (
        "Cumulative inference queuing duration in microseconds",
        lambda d: d["inference_stats"]["queue"]["ns"] // 1000,
    ),
    "nv_inference_compute_input_duration_us": (
        "Cumulative compute input duration in microseconds",
        lambda d: d["inference_stats"]["compute_input"]["ns"] // 1000,
    ),
    "nv_inference_compute_infer_duration_us": (
        "Cumulative compute inference duration in microseconds",
        lambda d: d["inference_stats"]["compute_infer"]["ns"] // 1000,
    ),
    "nv_inference_compute_output_duration_us": (
        "Cumulative inference compute output duration in microseconds",
        lambda d: d["inference_stats"]["compute_output"]["ns"] // 1000,
    ),
}
FAILURE: Final = "nv_inference_request_failure"
LABELS: Final = ("model", "version")
#: The latency histograms: statistics' histogram -> (name, help text).
HISTOGRAM_NAMES: Final = {
    "request": (
        "oip_inference_request_duration_seconds",
        "Time from a request reaching the model to its result, successes only",
    ),
    "queue": ("oip_inference_queue_duration_seconds", "Time a successful request waited before its execution"),
    "compute": (
        "oip_inference_compute_duration_seconds",
        "Compute time (input, inference, output) of a successful request",
    ),
}
#: The histograms' ``le`` labels: the buckets' bounds in seconds, as prometheus_client's ``Histogram`` writes them.
BOUNDS: Final = (*(repr(bound / 1e9) for bound in BUCKETS_NS), "+Inf")
PENDING: Final = "nv_inference_pending_request_count"


class ModelMetrics:
    """Every per-model metric, from one read of the statistics counters in ``stats_dir``: Triton's counters, the
    latency histograms and the pending gauge."""

    def __init__(self, stats_dir: str | Path) -> None:
        self.stats_dir = stats_dir

    def collect(self) -> Iterator[Any]:
        snapshot = read_snapshot(self.stats_dir)
        yield from self._counters(snapshot)
        yield from self._histograms(snapshot)
        from prometheus_client.core import GaugeMetricFamily

        pending = GaugeMetricFamily(PENDING, "Requests in the server not answered yet", labels=LABELS)
        for labels, count in sorted(snapshot.pending().items()):
            pending.add_metric(labels, count)
        yield pending

    def _histograms(self, snapshot: Snapshot) -> Iterator[Any]:
        from prometheus_client.core import HistogramMetricFamily

        families = {histogram: HistogramMetricFamily(*HISTOGRAM_NAMES[histogram], labels=LABELS)
                    for histogram in HISTOGRAMS}  # fmt: skip
        for name, version in snapshot.versions():
            for histogram, values in snapshot.histograms(name, version).items():
                cumulative, buckets = 0, []
                for bound, count in zip(BOUNDS, values.buckets, strict=True):
                    cumulative += count
                    buckets.append((bound, cumulative))
                families[histogram].add_metric((name, version), buckets, values.sum_ns / 1e9)
        yield from families.values()

    def _counters(self, snapshot: Snapshot) -> Iterator[Any]:
        from prometheus_client.core import UnknownMetricFamily

        documents = snapshot.documents(snapshot.versions())
        failure = UnknownMetricFamily(
            FAILURE, "Number of failed inference requests, all batch sizes", labels=("model", "version", "reason")
        )
        for document in documents:
            counts = snapshot.failures(document["name"], document["version"])
            for reason in FAILURE_REASONS:
                failure.add_metric((document["name"], document["version"], reason), counts[reason])
        yield failure
        for name, (text, value) in TRITON_COUNTERS.items():
            family = UnknownMetricFamily(name, text, labels=("model", "version"))
            for document in documents:
                family.add_metric((document["name"], document["version"]), value(document))
            yield family


class HostGauges:
    """Triton's host gauges: CPU utilisation since the previous scrape (0 to 1), memory total and used."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = Path(proc)
        self._previous: tuple[int, int] | None = None

    def _cpu(self) -> float:
        fields = [int(value) for value in (self.proc / "stat").read_text().splitlines()[0].split()[1:]]
        idle, total = fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields[:8])
        previous, self._previous = self._previous, (idle, total)
        if previous is None or total <= previous[1]:
            return 0.0
        return 1.0 - (idle - previous[0]) / (total - previous[1])

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        memory = {}
        for line in (self.proc / "meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            memory[key] = int(value.split()[0]) * 1024
        total = memory.get("MemTotal", 0)
        used = total - memory.get("MemAvailable", memory.get("MemFree", 0))
        yield GaugeMetricFamily("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", value=self._cpu())
        yield GaugeMetricFamily("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", value=total)
        yield GaugeMetricFamily("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", value=used)


#: ``process_*`` samples added up over the server's processes; the others are the supervisor's own.
SUMMED: Final = frozenset(
    {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds"}
)


def server_pids(root: int, proc: str = "/proc") -> list[int]:
    """``root`` and its children, from ``proc``'s process table."""
    pids = [root]
    for entry in Path(proc).iterdir():
        if not entry.name.isdigit() or int(entry.name) == root:
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        if int(stat.rpartition(")")[2].split()[1]) == root:
            pids.append(int(entry.name))
    return pids


class ServerProcesses:
    """prometheus_client's process metrics of each of the server's processes, added up (``SUMMED``)."""

    def __init__(self, root: int, proc: str = "/proc") -> None:
        self.root, self.proc = root, proc

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        from prometheus_client.process_collector import ProcessCollector

        totals: dict[str, float] = {}
        documentation: dict[str, tuple[str, str, str]] = {}
        for pid in server_pids(self.root, self.proc):
            collector = ProcessCollector(pid=lambda pid=pid: pid, proc=self.proc, registry=None)
            for family in collector.collect():
                for sample in family.samples:
                    if pid != self.root and sample.name not in SUMMED:
                        continue
                    totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
                    documentation[sample.name] = (family.name, family.documentation, family.type)
        for name, value in totals.items():
            family_name, text, kind = documentation[name]
            if kind == "counter":
                yield CounterMetricFamily(family_name, text, value=value)
            else:
                yield GaugeMetricFamily(family_name, text, value=value)


class BuildInfo:
    """``oip_build_info``: this server's version and what it runs on."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import InfoMetricFamily

        try:
            onnxruntime = importlib.metadata.version("onnxruntime")
        except importlib.metadata.PackageNotFoundError:
            onnxruntime = ""
        yield InfoMetricFamily(
            "oip_build",
            "The server's version and what it runs on",
            value={"version": __version__, "python": platform.python_version(), "onnxruntime": onnxruntime},
        )


def registry(stats_dir: str | Path, root: int) -> Any:
    """A prometheus_client registry with every collector above (``root``: the supervisor's pid)."""
    from prometheus_client import CollectorRegistry

    collected = CollectorRegistry(auto_describe=False)
    collectors = (ModelMetrics(stats_dir), ShadowMetrics(stats_dir), HostGauges(), ServerProcesses(root), BuildInfo())
    for collector in collectors:
        collected.register(collector)
    return collected


class _Server(ThreadingMixIn, WSGIServer):
    """A WSGI server answering each connection in a thread of its own, ``MAX_CONNECTIONS`` at most at once: the
    accepting thread waits for a free slot before it accepts the next connection. An exception while answering
    one is logged once per kind (the connection closed), and the server goes on."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.logged: set[str] = set()

    def get_request(self) -> tuple[Any, Any]:
        self.slots.acquire()
        try:
            return super().get_request()
        except BaseException:
            self.slots.release()
            raise

    def shutdown_request(self, request: Any) -> None:  # once per accepted connection, however it ended
        try:
            super().shutdown_request(request)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        kind = type(sys.exc_info()[1]).__name__
        if kind not in self.logged:
            self.logged.add(kind)
            logger.exception("the metrics server failed to answer a connection; it goes on")


class _QuietHandler(WSGIRequestHandler):
    """No line per scrape on stderr; a client that stalls is dropped after ``timeout`` seconds."""

    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        return


def listen(host: str, port: int) -> socket.socket:
    """The metrics socket, bound and listening (OSError when the port is taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def metrics_server(sock: socket.socket, collected: Any) -> WSGIServer:
    """A WSGI server on the listening ``sock`` answering prometheus_client's exposition of ``collected`` (its
    ``make_wsgi_app``: any path, ``?name[]=`` filters, gzip and OpenMetrics when asked)."""
    from prometheus_client import make_wsgi_app

    server = _Server(sock.getsockname()[:2], _QuietHandler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.server_address = sock.getsockname()[:2]
    server.server_name, server.server_port = str(server.server_address[0]), int(server.server_address[1])
    server.setup_environ()
    server.set_app(guarded(make_wsgi_app(collected), server.logged))
    return server


def guarded(app: Callable[..., Any], logged: set[str]) -> Callable[..., Any]:
    """``app`` answering 500 when it raises, the exception logged once per kind (a scrape's failure never stops
    the server, nor fills its log)."""

    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        try:
            return app(environ, start_response)
        except Exception as exc:
            kind = type(exc).__name__
            if kind not in logged:
                logged.add(kind)
                logger.exception("a metrics scrape failed; it is answered 500 and the server goes on")
            start_response("500 Internal Server Error", [("Content-Type", "text/plain")], sys.exc_info())
            return [b"the metrics could not be collected; the server log has the reason\n"]

    return answer


def serve_in_thread(sock: socket.socket, collected: Any) -> WSGIServer:
    """Serve ``collected`` on ``sock`` from a daemon thread (a process that forks no more: one worker)."""
    server = metrics_server(sock, collected)
    threading.Thread(target=server.serve_forever, name="oip-metrics", daemon=True).start()
    return server


def run_exporter(sock: socket.socket, stats_dir: str, root: int) -> None:
    """The exporter process: serve until SIGTERM (``workers.py`` forks it)."""
    import signal

    server = metrics_server(sock, registry(stats_dir, root))

    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when this process stops
    try:
        server.serve_forever()
    finally:
        server.server_close()
