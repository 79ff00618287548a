"""What only ``oip serve``'s processes read: where and what the platform serves, the ports and addresses, the
workers and their supervision, the logs, what one HTTP connection may hold (uvicorn's and httptools' limits; Lambda's
front door, API Gateway, sets its own) and the Prometheus endpoint. ``ServeSettings`` holds these fields, declared
as every field of ``Settings`` is (handler/config/variables.py's ``setting``), most with their ``oip serve`` option;
``Settings`` (handler/config/settings.py) is a server process's whole set, these fields included."""

from __future__ import annotations

from dataclasses import dataclass

from handler.config.cores import available_cores
from handler.config.platform import Platform, read_platform
from handler.config.variables import Choice, Derived, Flag, Integer, Number, Option, Text, setting

#: ``host:port`` for the V2 gRPC API beside HTTP in each ``oip serve`` worker (set by ``oip serve --grpc-port``).
GRPC_ADDRESS_ENV = "OIP_GRPC_ADDRESS"
#: Where the HTTP socket of ``oip serve`` listens, for its workers' start-up log.
HTTP_ADDRESS_ENV = "OIP_HTTP_ADDRESS"
#: The directory through which the workers of one ``oip serve`` share their statistics counters.
STATS_DIR_ENV = "OIP_STATS_DIR"
#: uvicorn's log levels.
LOG_LEVELS: tuple[str, ...] = ("critical", "error", "warning", "info", "debug", "trace")
#: The ``--help`` group of ``oip serve``'s options for what one HTTP connection may hold.
CONNECTION_LIMITS = "connection limits"

TEXT = Text()
FLAG = Flag()
COUNT = Integer()
POSITIVE = Integer(minimum=1)
SECONDS = Number()
POSITIVE_SECONDS = Number(positive=True)


@dataclass(frozen=True)
class ServeSettings:
    """What ``oip serve``'s supervisor and workers read, beside the data plane's settings (``Settings``)."""

    # ``oip serve``'s processes.
    platform: Platform = setting(  # noqa: RUF009 (declared, read by Derived)
        "OIP_PLATFORM",
        None,
        Derived(read_platform),
        "where and what ``oip serve`` serves: OIP_PLATFORM, OIP_HOST, OIP_PORT, OIP_DEFAULT_MODEL and the platforms' "
        "own variables (handler/config/platform.py)",
        factory=Platform,
        passed_on=False,
    )
    grpc_port: int = setting(
        "OIP_GRPC_PORT",
        0,
        Integer(maximum=65535),
        "also serve the V2 gRPC API on this port, 0 for off; needs oip-serverless[grpc]",
        option=Option(("--grpc-port", "--grpc_port")),
    )
    grpc_address: str | None = setting(
        GRPC_ADDRESS_ENV, None, TEXT, "``host:port`` of the gRPC server each worker starts (``oip serve`` sets it)"
    )
    http_address: str | None = setting(
        HTTP_ADDRESS_ENV,
        None,
        TEXT,
        "``host:port`` the workers' HTTP socket listens on, for the start-up log (``oip serve`` sets it)",
    )
    stats_dir: str | None = setting(
        STATS_DIR_ENV, None, TEXT, "the directory through which the workers share statistics (``oip serve`` sets it)"
    )
    workers: int | None = setting(
        "OIP_WORKERS",
        None,
        POSITIVE,
        "worker processes sharing the ports, each with its own model sessions and statistics; 1 for models too large "
        "to load twice",
        option=Option(("--workers",), default=lambda: f"the cores this process may use, {available_cores()}"),
    )
    drain_timeout: float = setting(
        "OIP_DRAIN_TIMEOUT",
        30.0,
        SECONDS,
        "seconds requests in flight may take to finish after SIGTERM",
        option="--drain-timeout",
    )
    exit_on_error: bool = setting(
        "OIP_EXIT_ON_ERROR",
        True,
        FLAG,
        "stop when a model fails to load at start-up, as Triton's --exit-on-error; false serves the other models and "
        "that one as unavailable",
        option="--exit-on-error",
    )
    worker_timeout: float = setting(
        "OIP_WORKER_TIMEOUT",
        60.0,
        SECONDS,
        "seconds a serving worker's event loop may stay silent before it is aborted and replaced (with one worker: "
        "the process exits with code 70); 0: never",
        option="--worker-timeout",
    )
    max_requests: int = setting(
        "OIP_MAX_REQUESTS",
        0,
        COUNT,
        "HTTP requests after which a worker is replaced (its replacement starts first); 0: never; needs --workers 2 "
        "or more",
        option="--max-requests",
    )
    max_requests_jitter: int = setting(
        "OIP_MAX_REQUESTS_JITTER",
        0,
        COUNT,
        "up to this many more requests, drawn for each worker, so that workers are not replaced all at once",
        option="--max-requests-jitter",
    )
    log_level: str = setting("OIP_LOG_LEVEL", "info", Choice(LOG_LEVELS), "uvicorn's log level", option="--log-level")
    access_log: bool = setting(
        "OIP_ACCESS_LOG",
        False,
        FLAG,
        "a log line per request; off unless asked, as in Triton, since a line per request costs throughput",
        option=Option(("--access-log",), negatable=True),
    )
    # What one HTTP connection may hold.
    max_header_bytes: int = setting(
        "OIP_MAX_HEADER_BYTES",
        32 * 1024,
        POSITIVE,
        "largest request head (request line and headers); larger ones get 431",
        option=Option(("--max-header-bytes",), group=CONNECTION_LIMITS),
    )
    max_headers: int = setting(
        "OIP_MAX_HEADERS",
        100,
        POSITIVE,
        "most header fields in a request; more get 431",
        option=Option(("--max-headers",), group=CONNECTION_LIMITS),
    )
    header_timeout: float = setting(
        "OIP_HEADER_TIMEOUT",
        10.0,
        POSITIVE_SECONDS,
        "seconds a client has to send a request's whole head, from the connection or the request's first byte: 408 "
        "and the connection closed after that (a gRPC connection: its HTTP/2 handshake)",
        option=Option(("--header-timeout",), group=CONNECTION_LIMITS),
    )
    body_timeout: float = setting(
        "OIP_BODY_TIMEOUT",
        30.0,
        POSITIVE_SECONDS,
        "seconds a request body may pause between two reads before the connection is closed",
        option=Option(("--body-timeout",), group=CONNECTION_LIMITS),
    )
    keep_alive_timeout: int = setting(
        "OIP_KEEP_ALIVE_TIMEOUT",
        5,
        POSITIVE,
        "seconds an idle keep-alive connection stays open after an answer",
        option=Option(("--keep-alive-timeout",), default="5, uvicorn's", group=CONNECTION_LIMITS),
    )
    max_connections: int = setting(
        "OIP_MAX_CONNECTIONS",
        1024,
        POSITIVE,
        "open connections a worker accepts (more wait in the backlog); past as many requests in progress, 503",
        option=Option(("--max-connections",), group=CONNECTION_LIMITS),
    )
    # Prometheus metrics of ``oip serve`` (handler/observability/prometheus.py, exporter.py).
    metrics_port: int = setting(
        "OIP_METRICS_PORT",
        8002,
        Integer(maximum=65535),
        "port of ``oip serve``'s Prometheus metrics endpoint (``/metrics``), Triton's 8002 by default; 0: off",
        option="--metrics-port",
    )
    metrics_host: str | None = setting(
        "OIP_METRICS_HOST",
        None,
        TEXT,
        "address the metrics endpoint listens on",
        option=Option(("--metrics-host",), default="the HTTP host (--host)"),
    )
