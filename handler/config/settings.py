"""Everything the product reads from its environment, read here and nowhere else, typed.

One dataclass per program: ``Settings`` for every server process (the Lambda HTTP function, ``oip serve`` and its
workers, ``oip batch``), ``LambdaSettings`` for what only the Lambda entry points read, ``BatchSettings`` for the
batch function's destinations. Each field is declared once, with ``setting`` (handler/config/variables.py): its
variable, its reader, its default and what it means; ``from_env``, ``VARIABLES``, ``to_env`` and the configuration
reference's check all come from those declarations. The modules that use a value receive it (as a field, or as a
constructor parameter from handler/runtime/container.py for the adapters); none of them reads the environment, and
nothing writes to it to pass a value on, but ``export_to_workers`` for the worker processes ``oip serve`` starts.
(The rollout hooks, handler/rollout/hook.py, are a Lambda package of their own, with only the standard library: they
read their two variables themselves. Two libraries' own variables are set where the library is loaded, before it
reads them: ``ORT_DISABLE_TELEMETRY`` in adapters/onnx/__init__.py and ``OPENBLAS_NUM_THREADS`` in ``oip serve``'s
supervisor.)

A value its variable does not accept raises ``SettingsError``, whose message is one line naming the variable, the
value and what it accepts: ``oip`` prints it and exits, a Lambda function's init fails with it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from handler.config.cores import available_cores
from handler.config.platform import Platform, read_platform
from handler.config.setting_lists import checked_default_versions, parse_s3_prefixes
from handler.config.triton_settings import opentelemetry_on, read_triton
from handler.config.variables import OFF as OFF
from handler.config.variables import ON as ON
from handler.config.variables import (
    Choice,
    Derived,
    Flag,
    Integer,
    Name,
    Number,
    Option,
    Parsed,
    Text,
    declared,
    raw,
    read_declared,
    setting,
    spelled,
)
from handler.config.variables import SettingsError as SettingsError

if TYPE_CHECKING:
    from adapters.triton.settings import TritonSettings

#: ``host:port`` for the V2 gRPC API beside HTTP in each ``oip serve`` worker (set by ``oip serve --grpc-port``).
GRPC_ADDRESS_ENV = "OIP_GRPC_ADDRESS"
#: Where the HTTP socket of ``oip serve`` listens, for its workers' start-up log.
HTTP_ADDRESS_ENV = "OIP_HTTP_ADDRESS"
#: The directory through which the workers of one ``oip serve`` share their statistics counters.
STATS_DIR_ENV = "OIP_STATS_DIR"

#: Lambda's synchronous invocation payload limit (6 MB).
LAMBDA_SYNC_PAYLOAD_BYTES = 6 * 1024 * 1024
#: The largest request body (and gRPC message) of every other server process (``oip serve``, ``oip batch``).
SERVE_MAX_BODY_BYTES = 64 * 1024 * 1024
#: The most bytes one request may bring into memory, inline and by reference in S3 together.
MAX_REQUEST_BYTES = 256 * 1024 * 1024
#: The most inputs, and the most outputs, a request may name when its model's own counts are not known.
MAX_REQUEST_TENSORS = 1024

#: The demo repository shipped beside the packages (``models/``).
DEMO_REPOSITORY = Path(__file__).resolve().parents[2] / "models"

#: uvicorn's log levels.
LOG_LEVELS: tuple[str, ...] = ("critical", "error", "warning", "info", "debug", "trace")
#: The ``--help`` group of ``oip serve``'s options for what one HTTP connection may hold.
CONNECTION_LIMITS = "connection limits"
#: Server-side encryption of tensors written by reference.
S3_TENSOR_SSE: tuple[str, ...] = ("aes256", "aws:kms")


def _model_repository(env: Mapping[str, str]) -> str:
    """``MODEL_REPOSITORY``, else the platform's own location, else ``OIP_DEFAULT_REPOSITORY``, else the demo."""
    return (
        raw(env, "MODEL_REPOSITORY")
        or read_platform(env).model_repository
        or Text().read_variable(env, "OIP_DEFAULT_REPOSITORY", str(DEMO_REPOSITORY))
    )


TEXT = Text()
FLAG = Flag()
COUNT = Integer()
POSITIVE = Integer(minimum=1)
SECONDS = Number()
POSITIVE_SECONDS = Number(positive=True)


@dataclass(frozen=True)
class Settings:
    """What a server process reads from its environment."""

    # The data plane.
    model_repository: str = setting(
        "MODEL_REPOSITORY",
        str(DEMO_REPOSITORY),
        Derived(_model_repository),
        "the model repository: a local directory, ``s3://bucket/prefix`` or ``gs://bucket/prefix``",
        option=Option(
            ("--model-repository", "--model_dir", "--model-store"),  # KServe's and Triton's spellings too
            default="the platform's own location (handler/config/platform.py), else OIP_DEFAULT_REPOSITORY (what a "
            "container image ships), else the demo repository",
        ),
    )
    max_body_bytes: int = setting(
        "OIP_MAX_BODY_BYTES",
        SERVE_MAX_BODY_BYTES,
        POSITIVE,
        "largest request body accepted, after decompression, and largest gRPC message",
        option=Option(("--max-body-bytes",), default="67108864, 64 MiB; 6 MiB on Lambda"),
    )
    max_request_bytes: int = setting(
        "OIP_MAX_REQUEST_BYTES",
        MAX_REQUEST_BYTES,
        POSITIVE,
        "most bytes one request may bring into memory: its body, or its inline tensors and those it passes by "
        "reference in S3 together (handler/inference/s3_tensors.py); more get 413",
    )
    max_inflight_bytes: int | None = setting(
        "OIP_MAX_INFLIGHT_BYTES",
        None,
        POSITIVE,
        "request bytes this process holds at once before more get 503 with Retry-After "
        "(handler/inference/byte_budget.py); None: a quarter of the memory the process may use, shared by the workers",
    )
    max_tensor_bytes: int = setting(
        "OIP_MAX_TENSOR_BYTES",
        64 * 1024 * 1024,
        POSITIVE,
        "largest tensor a request's shape may ask the server to hold",
    )
    server_name: str = setting("OIP_SERVER_NAME", "oip-serverless", TEXT, "name reported by ``GET /v2``")
    eager_load: bool = setting(
        "OIP_EAGER_LOAD", True, FLAG, "load default model versions at start-up (off defers them to first use)"
    )
    default_versions: str = setting(
        "OIP_DEFAULT_VERSIONS",
        "",
        Parsed(checked_default_versions),
        "``model=version,...``: default versions over config.pbtxt's ``default_version``",
    )
    model_name: str | None = setting(
        "OIP_MODEL_NAME",
        None,
        Name(),
        "serve a repository that is one model's own files (config.pbtxt, version directories or a model file at its "
        "top, as KServe's storage initializer leaves them in /mnt/models) as this model, as KServe passes it; a "
        "repository of model directories keeps their names",
        option=Option(("--model_name", "--model-name"), default="none"),
    )
    max_request_tensors: int = setting(
        "OIP_MAX_REQUEST_TENSORS",
        MAX_REQUEST_TENSORS,
        POSITIVE,
        "most inputs, and most requested outputs, one request may name where the model's own counts do not apply "
        "(a model served by Triton, a request-level content type that maps inputs)",
    )
    # What ``oip serve`` (uvicorn) allows a connection; Lambda's front door (API Gateway) sets its own.
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
        "open connections (or requests in progress) per worker before new requests get 503",
        option=Option(("--max-connections",), group=CONNECTION_LIMITS),
    )
    # Running models (adapters/onnx/backend.py's SessionSettings, adapters/repository/object_uri.py).
    ort_intra_op_threads: int = setting(
        "OIP_ORT_INTRA_OP_THREADS", 0, COUNT, "onnxruntime's intra-op thread pool; 0 lets it choose"
    )
    ort_inter_op_threads: int = setting(
        "OIP_ORT_INTER_OP_THREADS", 0, COUNT, "onnxruntime's inter-op thread pool; 0 lets it choose"
    )
    ort_allow_spinning: bool = setting(
        "OIP_ORT_ALLOW_SPINNING", False, FLAG, "let onnxruntime's intra-op threads spin between runs"
    )
    inline_run_ms: float = setting(
        "OIP_INLINE_RUN_MS",
        1.0,
        Number(infinite=True),
        "models whose recent runs took less run on the event loop's thread (``inf``: all)",
    )
    dynamic_batching: bool = setting("OIP_DYNAMIC_BATCHING", True, FLAG, "honour config.pbtxt's ``dynamic_batching``")
    cache_dir: str | None = setting(
        "OIP_CACHE_DIR", None, TEXT, "where an object-store repository is copied; None: the temporary directory"
    )
    triton: TritonSettings | None = setting(  # noqa: RUF009 (declared, read by Derived)
        "OIP_TRITON_URL",
        None,
        Derived(read_triton),
        "where and how to reach Triton, from OIP_TRITON_* (adapters/triton/settings.py); None without OIP_TRITON_URL",
        passed_on=False,
    )
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
    malloc_keep_mb: int = setting(
        "OIP_MALLOC_KEEP_MB",
        64,
        COUNT,
        "MiB of freed memory glibc keeps for the next request (handler/runtime/memory.py)",
    )
    opentelemetry: bool = setting(
        "OIP_OTEL",
        False,
        Derived(opentelemetry_on),
        "OpenTelemetry server spans and step spans; unset, on when an SDK exporter (OTEL_*) is",
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
    # What version resources report (handler/protocol/version_catalog.py) and the request log.
    autoscaling_min_nodes: int | None = setting(
        "OIP_AUTOSCALING_MIN_NODES", None, COUNT, "the deployment's least scaling"
    )
    autoscaling_max_nodes: int | None = setting(
        "OIP_AUTOSCALING_MAX_NODES", None, COUNT, "the deployment's most scaling"
    )
    request_log_sampling: float = setting(
        "OIP_REQUEST_LOG_SAMPLING", 0.0, SECONDS, "percentage of successful inferences written to the request log"
    )
    request_log_stream: str = setting(
        "OIP_REQUEST_LOG_STREAM", "", TEXT, "the request log's Firehose stream; empty: no request log"
    )
    # Overload and deadlines (handler/inference/admission.py, adapters/deadline.py).
    max_inflight: int | None = setting(
        "OIP_MAX_INFLIGHT",
        None,
        POSITIVE,
        "inference requests one worker (or Lambda environment) works on at once; more are answered 503 with "
        "Retry-After at once; set, it is the one cap unless OIP_ADMISSION_TARGET_MS is set too",
        option=Option(
            ("--max-inflight",),
            default="64 per core plus twice the largest dynamic batch, with each model "
            "admitted by its measured run time",
            group=CONNECTION_LIMITS,
        ),
    )
    admission_target_ms: int | None = setting(
        "OIP_ADMISSION_TARGET_MS",
        None,
        COUNT,
        "the queueing delay (ms) beyond one run each model's adaptive admission accepts before it answers 503; 0: no "
        "adaptive admission. None: 100, or 0 when OIP_MAX_INFLIGHT is set",
    )
    deadline_margin_ms: int = setting(
        "OIP_DEADLINE_MARGIN_MS",
        500,
        COUNT,
        "on Lambda, what a request's deadline leaves of the invocation's remaining time, to answer 504 before the "
        "function times out",
    )
    # Tensors by reference in S3 (the s3_tensors extension, handler/inference/s3_tensors.py).
    s3_tensor_prefixes: tuple[str, ...] = setting(
        "OIP_S3_TENSOR_PREFIXES",
        (),
        Parsed(parse_s3_prefixes),
        "``s3://bucket/prefix/`` locations, comma-separated, that inputs may be read from and outputs written to; "
        "none: the extension is off",
    )
    s3_tensor_sse: str = setting(
        "OIP_S3_TENSOR_SSE",
        "",
        Choice(S3_TENSOR_SSE),
        "server-side encryption of the outputs written: ``aes256``, ``aws:kms``; empty: the bucket's default",
    )
    s3_tensor_kms_key: str = setting(
        "OIP_S3_TENSOR_KMS_KEY",
        "",
        TEXT,
        "the KMS key (id, alias or ARN) of ``aws:kms`` writes; empty: the AWS managed key",
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``env`` (this process's environment when None), then explicit overrides (None: unset).

        SettingsError for a value its variable does not accept.
        """
        env = os.environ if env is None else env
        values = read_declared(cls, env)
        values.update({name: value for name, value in overrides.items() if value is not None})
        return cls(**values)

    @classmethod
    def for_lambda(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """``from_env``, for a process that answers one event at a time (a Lambda function; ``oip invoke`` and
        ``oip redrive``, which run as the function does): bodies within Lambda's 6 MB unless ``OIP_MAX_BODY_BYTES``
        says otherwise, no dynamic batching (there is nothing to merge, only its delay to add), and models run on
        the calling thread however long they take unless ``OIP_INLINE_RUN_MS`` says otherwise (a worker thread
        only helps a server with other requests to answer meanwhile)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {"dynamic_batching": False}
        if raw(env, "OIP_INLINE_RUN_MS") is None:
            values["inline_run_ms"] = math.inf
        if raw(env, "OIP_MAX_BODY_BYTES") is None:
            values["max_body_bytes"] = LAMBDA_SYNC_PAYLOAD_BYTES
        values.update({name: value for name, value in overrides.items() if value is not None})
        return cls.from_env(env, **values)

    def to_env(self) -> dict[str, str]:
        """These settings as the variables ``from_env`` reads them from (an empty value for one unset), only to
        give a child process the settings of its parent (``export_to_workers``). The Triton and platform settings
        are not among them: a child reads those from the environment it inherits."""
        return {variable: spelled(getattr(self, name)) for name, variable in VARIABLES.items()}


#: ``Settings``' fields -> the variables ``to_env`` writes them to (``from_env`` reads each from there).
VARIABLES: dict[str, str] = {
    each.name: declaration.variable for each, declaration in declared(Settings) if declaration.passed_on
}


def export_to_workers(settings: Settings) -> None:
    """Put ``settings`` in this process's environment for the worker processes it starts next, which inherit it
    and read it back with ``Settings.from_env``: ``oip serve``'s supervisor, before its workers start."""
    os.environ.update(settings.to_env())


def onnxruntime_telemetry_off(env: Mapping[str, str] | None = None) -> bool:
    """Whether onnxruntime's telemetry is off: [ORT_DISABLE_TELEMETRY], onnxruntime's own variable, is ``1`` or
    unset (adapters/onnx/__init__.py sets it to ``1`` before onnxruntime is imported unless a deployment set it)."""
    env = os.environ if env is None else env
    return env.get("ORT_DISABLE_TELEMETRY", "1") == "1"
