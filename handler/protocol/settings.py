"""Everything the product reads from its environment, read here and nowhere else, typed.

One dataclass per program: ``Settings`` for every server process (the Lambda HTTP function, ``oip serve`` and its
workers, ``oip batch``), ``LambdaSettings`` for what only the Lambda entry points read, ``BatchSettings`` for the
batch function's destinations. The modules that use a value receive it (as a field, or as a constructor parameter
from handler/runtime/container.py for the adapters); none of them reads the environment, and nothing writes to it
to pass a value on, but ``export_to_workers`` for the worker processes ``oip serve`` starts. (The rollout hooks,
handler/rollout/hook.py, are a Lambda package of their own, with only the standard library: they read their two
variables themselves. Two libraries' own variables are set where the library is loaded, before it reads them:
``ORT_DISABLE_TELEMETRY`` in adapters/onnx/__init__.py and ``OPENBLAS_NUM_THREADS`` in ``oip serve``'s supervisor.)

Switches accept ``1``, ``true``, ``yes`` or ``on`` and ``0``, ``false``, ``no`` or ``off``, in any case. An empty
value is the default, as an unset one (a template may pass ``""`` for a parameter left empty). A value its
variable does not accept raises ``SettingsError``, whose message is one line naming the variable, the value and
what it accepts: ``oip`` prints it and exits, a Lambda function's init fails with it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from handler.protocol.platform import PLATFORM_PORT, SAGEMAKER, SAGEMAKER_MODEL_DIR, SERVER, VERTEX, Platform

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

#: The spellings of a switch, in any case.
ON: tuple[str, ...] = ("1", "true", "yes", "on")
OFF: tuple[str, ...] = ("0", "false", "no", "off")
#: uvicorn's log levels.
LOG_LEVELS: tuple[str, ...] = ("critical", "error", "warning", "info", "debug", "trace")
#: A bucket name as S3 accepts it; server-side encryption of tensors written by reference.
_S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
S3_TENSOR_SSE: tuple[str, ...] = ("aes256", "aws:kms")


class SettingsError(ValueError):
    """A variable whose value it does not accept; the message is one line naming the variable and what it takes."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        super().__init__(f"{name}={value!r}: expected {expected}")
        self.name = name


def _either(words: Sequence[str]) -> str:
    return f"{', '.join(words[:-1])} or {words[-1]}"


def _raw(env: Mapping[str, str], name: str) -> str | None:
    """The variable's value, None when unset or empty."""
    value = env.get(name)
    return value if value else None


def _read_text(env: Mapping[str, str], name: str, default: str) -> str:
    value = _raw(env, name)
    return default if value is None else value


def _read_optional(env: Mapping[str, str], name: str) -> str | None:
    return _raw(env, name)


def _read_flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = _raw(env, name)
    if value is None:
        return default
    spelling = value.strip().lower()
    if spelling in ON:
        return True
    if spelling in OFF:
        return False
    raise SettingsError(name, value, f"{_either(ON)} (on), or {_either(OFF)} (off), in any case")


def _read_int(env: Mapping[str, str], name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
    value = _raw(env, name)
    return default if value is None else _integer(name, value, minimum, maximum)


def _read_optional_int(env: Mapping[str, str], name: str, minimum: int = 0) -> int | None:
    value = _raw(env, name)
    return None if value is None else _integer(name, value, minimum, None)


def _integer(name: str, value: str, minimum: int, maximum: int | None) -> int:
    accepts = f"an integer from {minimum}" + ("" if maximum is None else f" to {maximum}")
    try:
        number = int(value.strip())
    except ValueError:
        raise SettingsError(name, value, accepts) from None
    if number < minimum or (maximum is not None and number > maximum):
        raise SettingsError(name, value, accepts)
    return number


def _read_float(
    env: Mapping[str, str], name: str, default: float, *, positive: bool = False, infinite: bool = False
) -> float:
    """A number of at least 0 (more than 0 when ``positive``), ``inf`` only when ``infinite``."""
    value = _raw(env, name)
    if value is None:
        return default
    accepts = "a number " + ("greater than 0" if positive else "of at least 0") + (" or inf" if infinite else "")
    try:
        number = float(value.strip())
    except ValueError:
        raise SettingsError(name, value, accepts) from None
    if math.isnan(number) or number < 0 or (positive and number == 0) or (math.isinf(number) and not infinite):
        raise SettingsError(name, value, accepts)
    return number


def _read_choice(env: Mapping[str, str], name: str, default: str, choices: Sequence[str]) -> str:
    value = _raw(env, name)
    if value is None:
        return default
    if value.strip().lower() not in choices:
        raise SettingsError(name, value, _either(choices))
    return value.strip().lower()


def _read_port(env: Mapping[str, str], name: str, default: int) -> int:
    return _read_int(env, name, default, minimum=1, maximum=65535)


def parse_default_versions(text: str) -> dict[str, str]:
    """``OIP_DEFAULT_VERSIONS``: ``model=version`` pairs, comma-separated; SettingsError for anything else."""
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, wanted = item.partition("=")
        if not sep or not name.strip() or not wanted.strip().isdigit():
            raise SettingsError("OIP_DEFAULT_VERSIONS", text, "model=version pairs, comma-separated (iris=2,bert=1)")
        pairs[name.strip()] = wanted.strip()
    return pairs


def _read_default_versions(env: Mapping[str, str], name: str) -> str:
    text = _read_text(env, name, "")
    parse_default_versions(text)
    return text


def _platform(env: Mapping[str, str]) -> Platform:
    """Where and what ``oip serve`` serves, as the platform's variables say (handler/protocol/platform.py)."""
    chosen = _read_choice(env, "OIP_PLATFORM", "", (SERVER, SAGEMAKER, VERTEX))
    if not chosen:
        if _raw(env, "SAGEMAKER_BIND_TO_PORT"):
            chosen = SAGEMAKER
        elif any(_raw(env, key) for key in ("AIP_HTTP_PORT", "AIP_HEALTH_ROUTE", "AIP_PREDICT_ROUTE")):
            chosen = VERTEX
        else:
            chosen = SERVER
    default_model = _read_optional(env, "OIP_DEFAULT_MODEL")
    repository = _read_optional(env, "MODEL_REPOSITORY")
    if chosen == SAGEMAKER:
        return Platform(
            SAGEMAKER,
            "0.0.0.0",
            _read_port(env, "SAGEMAKER_BIND_TO_PORT", PLATFORM_PORT),
            repository or SAGEMAKER_MODEL_DIR,
            default_model=default_model or _read_optional(env, "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"),
        )
    if chosen == VERTEX:
        return Platform(
            VERTEX,
            "0.0.0.0",
            _read_port(env, "AIP_HTTP_PORT", PLATFORM_PORT),
            repository or _read_optional(env, "AIP_STORAGE_URI"),
            _read_optional(env, "AIP_HEALTH_ROUTE"),
            _read_optional(env, "AIP_PREDICT_ROUTE"),
            default_model,
        )
    host = _read_text(env, "OIP_HOST", "127.0.0.1")
    return Platform(SERVER, host, _read_port(env, "OIP_PORT", 8000), default_model=default_model)


def _triton(env: Mapping[str, str]) -> TritonSettings | None:
    """Triton's settings when ``OIP_TRITON_URL`` is set; None otherwise (nothing can be forwarded without a URL,
    and a deployment with no remote model does not import the Triton adapter at all)."""
    url = _read_optional(env, "OIP_TRITON_URL")
    if url is None:
        return None
    from adapters.triton.settings import TritonSettings

    headers_text = _read_text(env, "OIP_TRITON_HEADERS", "{}")
    try:
        headers = json.loads(headers_text)
    except ValueError:
        headers = None
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise SettingsError("OIP_TRITON_HEADERS", headers_text, 'a JSON object of strings ({"Authorization": "..."})')
    return TritonSettings(
        url=url,
        protocol=_read_choice(env, "OIP_TRITON_PROTOCOL", "http", ("http", "grpc")),
        routes=TritonSettings.parse_routes(_read_text(env, "OIP_TRITON_MODELS", "")),
        proxy_all=_read_flag(env, "OIP_TRITON_PROXY", False),
        connect_timeout=_read_float(env, "OIP_TRITON_CONNECT_TIMEOUT", 2.0, positive=True),
        request_timeout=_read_float(env, "OIP_TRITON_TIMEOUT", 30.0, positive=True),
        retries=_read_int(env, "OIP_TRITON_RETRIES", 2),
        ssl=_read_flag(env, "OIP_TRITON_SSL", False),
        ssl_ca=_read_text(env, "OIP_TRITON_SSL_CA", ""),
        trace_context=_opentelemetry(env),
        headers=headers,
        passthrough=_read_flag(env, "OIP_TRITON_PASSTHROUGH", True),
    )


def parse_s3_prefixes(text: str, name: str = "OIP_S3_TENSOR_PREFIXES") -> tuple[str, ...]:
    """``s3://bucket/prefix/`` locations, comma-separated, each ending in ``/`` (one is added); SettingsError for
    anything else (another scheme, no bucket, an empty, ``.`` or ``..`` segment)."""
    prefixes: list[str] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        bucket, _, key = item.removeprefix("s3://").partition("/")
        segments = key.split("/")[:-1] if key.endswith("/") else key.split("/")
        if (
            not item.startswith("s3://")
            or not _S3_BUCKET.fullmatch(bucket)
            or (key and any(part in ("", ".", "..") for part in segments))
            or not item.isprintable()
        ):
            raise SettingsError(name, text, "s3://bucket/prefix/ locations, comma-separated")
        prefixes.append(f"s3://{bucket}/{key}" if not key or key.endswith("/") else f"s3://{bucket}/{key}/")
    return tuple(prefixes)


def _opentelemetry(env: Mapping[str, str]) -> bool:
    """``OIP_OTEL`` when set, else whether any of the OpenTelemetry SDK's own exporter variables is."""
    exporter = any(
        _raw(env, name) for name in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    return _read_flag(env, "OIP_OTEL", exporter)


@dataclass(frozen=True)
class Settings:
    """What a server process reads from its environment (names in brackets)."""

    # The data plane.
    #: [MODEL_REPOSITORY] a local directory, ``s3://bucket/prefix`` or ``gs://bucket/prefix``; when unset, the
    #: platform's own location (handler/protocol/platform.py), else [OIP_DEFAULT_REPOSITORY] (what a container image
    #: ships), else the demo repository.
    model_repository: str = str(DEMO_REPOSITORY)
    #: [OIP_MAX_BODY_BYTES] largest request body accepted, after decompression, and largest gRPC message
    #: (``for_lambda``: Lambda's 6 MB).
    max_body_bytes: int = SERVE_MAX_BODY_BYTES
    #: [OIP_MAX_REQUEST_BYTES] most bytes one request may bring into memory: its body, or its inline tensors and
    #: those it passes by reference in S3 together (handler/inference/s3_tensors.py); more get 413.
    max_request_bytes: int = MAX_REQUEST_BYTES
    #: [OIP_MAX_INFLIGHT_BYTES] request bytes this process holds at once before more get 503 with Retry-After
    #: (handler/inference/byte_budget.py). None: a quarter of the memory the process may use, shared by the workers.
    max_inflight_bytes: int | None = None
    #: [OIP_MAX_TENSOR_BYTES] largest tensor a request's shape may ask the server to hold.
    max_tensor_bytes: int = 64 * 1024 * 1024
    #: [OIP_SERVER_NAME] name reported by ``GET /v2``.
    server_name: str = "oip-serverless"
    #: [OIP_EAGER_LOAD] load default model versions at start-up (off defers them to first use).
    eager_load: bool = True
    #: [OIP_DEFAULT_VERSIONS] ``model=version,...``: default versions over config.pbtxt's ``default_version``.
    default_versions: str = ""
    #: [OIP_MODEL_NAME] the name a repository that is one model's own files (config.pbtxt, version directories or
    #: a model file at its top, as KServe's storage initializer leaves them) is served under: ``oip serve
    #: --model_name``, as KServe passes it; None: the repository's directories are its models.
    model_name: str | None = None
    #: [OIP_MAX_REQUEST_TENSORS] most inputs, and most requested outputs, one request may name where the model's
    #: own counts do not apply (a model served by Triton, a request-level content type that maps inputs).
    max_request_tensors: int = MAX_REQUEST_TENSORS
    # What ``oip serve`` (uvicorn) allows a connection; Lambda's front door (API Gateway) sets its own.
    #: [OIP_MAX_HEADER_BYTES] largest request head (request line and headers); larger ones get 431.
    max_header_bytes: int = 32 * 1024
    #: [OIP_MAX_HEADERS] most header fields in a request; more get 431.
    max_headers: int = 100
    #: [OIP_HEADER_TIMEOUT] seconds a client has to send a request's whole head, from the connection or the
    #: request's first byte: 408 and the connection closed after that (a gRPC connection: its HTTP/2 handshake).
    header_timeout: float = 10.0
    #: [OIP_BODY_TIMEOUT] seconds a request body may pause between two reads before the connection is closed.
    body_timeout: float = 30.0
    #: [OIP_KEEP_ALIVE_TIMEOUT] seconds an idle keep-alive connection stays open after an answer.
    keep_alive_timeout: int = 5
    #: [OIP_MAX_CONNECTIONS] open connections (or requests in progress) per worker before new requests get 503.
    max_connections: int = 1024
    # Running models (adapters/onnx/backend.py's SessionSettings, adapters/repository/object_uri.py).
    #: [OIP_ORT_INTRA_OP_THREADS], [OIP_ORT_INTER_OP_THREADS] onnxruntime's thread pools; 0 lets it choose.
    ort_intra_op_threads: int = 0
    ort_inter_op_threads: int = 0
    #: [OIP_ORT_ALLOW_SPINNING] let onnxruntime's intra-op threads spin between runs.
    ort_allow_spinning: bool = False
    #: [OIP_INLINE_RUN_MS] models whose recent runs took less run on the event loop's thread (``inf``: all).
    inline_run_ms: float = 1.0
    #: [OIP_DYNAMIC_BATCHING] honour config.pbtxt's ``dynamic_batching``.
    dynamic_batching: bool = True
    #: [OIP_CACHE_DIR] where an object-store repository is copied; None: the temporary directory.
    cache_dir: str | None = None
    #: [OIP_TRITON_*] where and how to reach Triton (adapters/triton/settings.py); None without ``OIP_TRITON_URL``.
    triton: TritonSettings | None = None
    # ``oip serve``'s processes.
    #: [OIP_HOST], [OIP_PORT], [OIP_PLATFORM], [OIP_DEFAULT_MODEL] and the platforms' own variables.
    platform: Platform = field(default_factory=Platform)
    #: [OIP_GRPC_PORT] also serve the V2 gRPC API on this port; 0 for off.
    grpc_port: int = 0
    #: [OIP_GRPC_ADDRESS] ``host:port`` of the gRPC server each worker starts (``oip serve`` sets it).
    grpc_address: str | None = None
    #: [OIP_HTTP_ADDRESS] ``host:port`` the workers' HTTP socket listens on, for the start-up log (``oip serve``
    #: sets it).
    http_address: str | None = None
    #: [OIP_STATS_DIR] the directory through which the workers share statistics (``oip serve`` sets it).
    stats_dir: str | None = None
    #: [OIP_WORKERS] worker processes; None: the cores this process may use.
    workers: int | None = None
    #: [OIP_DRAIN_TIMEOUT] seconds requests in flight may take to finish after SIGTERM.
    drain_timeout: float = 30.0
    #: [OIP_LOG_LEVEL] uvicorn's log level.
    log_level: str = "info"
    #: [OIP_ACCESS_LOG] a log line per request.
    access_log: bool = False
    #: [OIP_MALLOC_KEEP_MB] MiB of freed memory glibc keeps for the next request (handler/runtime/memory.py).
    malloc_keep_mb: int = 64
    #: [OIP_OTEL] OpenTelemetry server spans and step spans; unset, on when an SDK exporter ([OTEL_*]) is.
    opentelemetry: bool = False
    # Prometheus metrics of ``oip serve`` (handler/observability/prometheus.py, exporter.py).
    #: [OIP_METRICS_PORT] port of ``oip serve``'s Prometheus metrics endpoint (``/metrics``), Triton's 8002 by
    #: default; 0: off.
    metrics_port: int = 8002
    #: [OIP_METRICS_HOST] address the metrics endpoint listens on; None: ``oip serve``'s HTTP host.
    metrics_host: str | None = None
    # What version resources report (handler/protocol/versions.py) and the request log.
    #: [OIP_AUTOSCALING_MIN_NODES], [OIP_AUTOSCALING_MAX_NODES] the deployment's scaling.
    autoscaling_min_nodes: int | None = None
    autoscaling_max_nodes: int | None = None
    #: [OIP_REQUEST_LOG_SAMPLING] percentage of successful inferences written to the request log.
    request_log_sampling: float = 0.0
    #: [OIP_REQUEST_LOG_STREAM] the request log's Firehose stream; empty: no request log.
    request_log_stream: str = ""
    # Overload and deadlines (handler/inference/admission.py, adapters/deadline.py).
    #: [OIP_MAX_INFLIGHT] inference requests one worker (or Lambda environment) works on at once; more are answered
    #: 503 with Retry-After at once. None: 64 per core plus twice the largest dynamic batch (``default_inflight``).
    max_inflight: int | None = None
    #: [OIP_ADMISSION_TARGET_MS] the queueing delay (ms) beyond one run each model's adaptive admission accepts
    #: before it answers 503; 0: no adaptive admission. None: 100, or 0 when OIP_MAX_INFLIGHT is set.
    admission_target_ms: int | None = None
    #: [OIP_DEADLINE_MARGIN_MS] on Lambda, what a request's deadline leaves of the invocation's remaining time, to
    #: answer 504 before the function times out.
    deadline_margin_ms: int = 500
    # Tensors by reference in S3 (the s3_tensors extension, handler/inference/s3_tensors.py).
    #: [OIP_S3_TENSOR_PREFIXES] ``s3://bucket/prefix/`` locations, comma-separated, that inputs may be read from and
    #: outputs written to; none: the extension is off.
    s3_tensor_prefixes: tuple[str, ...] = ()
    #: [OIP_S3_TENSOR_SSE] server-side encryption of the outputs written: ``aes256``, ``aws:kms``; empty: the
    #: bucket's default.
    s3_tensor_sse: str = ""
    #: [OIP_S3_TENSOR_KMS_KEY] the KMS key (id, alias or ARN) of ``aws:kms`` writes; empty: the AWS managed key.
    s3_tensor_kms_key: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``env`` (this process's environment when None), then explicit overrides (None: unset).

        SettingsError for a value its variable does not accept.
        """
        env = os.environ if env is None else env
        platform = _platform(env)
        values: dict[str, Any] = {
            "model_repository": (
                _read_optional(env, "MODEL_REPOSITORY")
                or platform.model_repository
                or _read_text(env, "OIP_DEFAULT_REPOSITORY", cls.model_repository)
            ),
            "max_body_bytes": _read_int(env, "OIP_MAX_BODY_BYTES", cls.max_body_bytes, minimum=1),
            "max_request_bytes": _read_int(env, "OIP_MAX_REQUEST_BYTES", cls.max_request_bytes, minimum=1),
            "max_inflight_bytes": _read_optional_int(env, "OIP_MAX_INFLIGHT_BYTES", minimum=1),
            "max_tensor_bytes": _read_int(env, "OIP_MAX_TENSOR_BYTES", cls.max_tensor_bytes, minimum=1),
            "server_name": _read_text(env, "OIP_SERVER_NAME", cls.server_name),
            "eager_load": _read_flag(env, "OIP_EAGER_LOAD", cls.eager_load),
            "default_versions": _read_default_versions(env, "OIP_DEFAULT_VERSIONS"),
            "model_name": _read_optional(env, "OIP_MODEL_NAME"),
            "max_request_tensors": _read_int(env, "OIP_MAX_REQUEST_TENSORS", cls.max_request_tensors, minimum=1),
            "max_header_bytes": _read_int(env, "OIP_MAX_HEADER_BYTES", cls.max_header_bytes, minimum=1),
            "max_headers": _read_int(env, "OIP_MAX_HEADERS", cls.max_headers, minimum=1),
            "header_timeout": _read_float(env, "OIP_HEADER_TIMEOUT", cls.header_timeout, positive=True),
            "body_timeout": _read_float(env, "OIP_BODY_TIMEOUT", cls.body_timeout, positive=True),
            "keep_alive_timeout": _read_int(env, "OIP_KEEP_ALIVE_TIMEOUT", cls.keep_alive_timeout, minimum=1),
            "max_connections": _read_int(env, "OIP_MAX_CONNECTIONS", cls.max_connections, minimum=1),
            "ort_intra_op_threads": _read_int(env, "OIP_ORT_INTRA_OP_THREADS", cls.ort_intra_op_threads),
            "ort_inter_op_threads": _read_int(env, "OIP_ORT_INTER_OP_THREADS", cls.ort_inter_op_threads),
            "ort_allow_spinning": _read_flag(env, "OIP_ORT_ALLOW_SPINNING", cls.ort_allow_spinning),
            "inline_run_ms": _read_float(env, "OIP_INLINE_RUN_MS", cls.inline_run_ms, infinite=True),
            "dynamic_batching": _read_flag(env, "OIP_DYNAMIC_BATCHING", cls.dynamic_batching),
            "cache_dir": _read_optional(env, "OIP_CACHE_DIR"),
            "triton": _triton(env),
            "platform": platform,
            "grpc_port": _read_int(env, "OIP_GRPC_PORT", cls.grpc_port, maximum=65535),
            "grpc_address": _read_optional(env, GRPC_ADDRESS_ENV),
            "http_address": _read_optional(env, HTTP_ADDRESS_ENV),
            "stats_dir": _read_optional(env, STATS_DIR_ENV),
            "workers": _read_optional_int(env, "OIP_WORKERS", minimum=1),
            "drain_timeout": _read_float(env, "OIP_DRAIN_TIMEOUT", cls.drain_timeout),
            "log_level": _read_choice(env, "OIP_LOG_LEVEL", cls.log_level, LOG_LEVELS),
            "access_log": _read_flag(env, "OIP_ACCESS_LOG", cls.access_log),
            "malloc_keep_mb": _read_int(env, "OIP_MALLOC_KEEP_MB", cls.malloc_keep_mb),
            "opentelemetry": _opentelemetry(env),
            "metrics_port": _read_int(env, "OIP_METRICS_PORT", cls.metrics_port, maximum=65535),
            "metrics_host": _read_optional(env, "OIP_METRICS_HOST"),
            "autoscaling_min_nodes": _read_optional_int(env, "OIP_AUTOSCALING_MIN_NODES"),
            "autoscaling_max_nodes": _read_optional_int(env, "OIP_AUTOSCALING_MAX_NODES"),
            "request_log_sampling": _read_float(env, "OIP_REQUEST_LOG_SAMPLING", cls.request_log_sampling),
            "request_log_stream": _read_text(env, "OIP_REQUEST_LOG_STREAM", cls.request_log_stream),
            "max_inflight": _read_optional_int(env, "OIP_MAX_INFLIGHT", minimum=1),
            "admission_target_ms": _read_optional_int(env, "OIP_ADMISSION_TARGET_MS"),
            "deadline_margin_ms": _read_int(env, "OIP_DEADLINE_MARGIN_MS", cls.deadline_margin_ms),
            "s3_tensor_prefixes": parse_s3_prefixes(_read_text(env, "OIP_S3_TENSOR_PREFIXES", "")),
            "s3_tensor_sse": _read_choice(env, "OIP_S3_TENSOR_SSE", cls.s3_tensor_sse, S3_TENSOR_SSE),
            "s3_tensor_kms_key": _read_text(env, "OIP_S3_TENSOR_KMS_KEY", cls.s3_tensor_kms_key),
        }
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
        if _read_optional(env, "OIP_INLINE_RUN_MS") is None:
            values["inline_run_ms"] = math.inf
        if _read_optional(env, "OIP_MAX_BODY_BYTES") is None:
            values["max_body_bytes"] = LAMBDA_SYNC_PAYLOAD_BYTES
        values.update({name: value for name, value in overrides.items() if value is not None})
        return cls.from_env(env, **values)

    def to_env(self) -> dict[str, str]:
        """These settings as the variables ``from_env`` reads them from (an empty value for one unset), only to
        give a child process the settings of its parent (``export_to_workers``). The Triton and platform settings
        are not among them: a child reads those from the environment it inherits."""
        env: dict[str, str] = {}
        for each in fields(self):
            name = VARIABLES.get(each.name)
            if name is not None:
                env[name] = _spelled(getattr(self, each.name))
        return env


#: ``Settings``' fields -> the variables ``to_env`` writes them to (``from_env`` reads each from there).
VARIABLES: dict[str, str] = {
    "model_repository": "MODEL_REPOSITORY",
    "max_body_bytes": "OIP_MAX_BODY_BYTES",
    "max_request_bytes": "OIP_MAX_REQUEST_BYTES",
    "max_inflight_bytes": "OIP_MAX_INFLIGHT_BYTES",
    "max_tensor_bytes": "OIP_MAX_TENSOR_BYTES",
    "server_name": "OIP_SERVER_NAME",
    "eager_load": "OIP_EAGER_LOAD",
    "default_versions": "OIP_DEFAULT_VERSIONS",
    "model_name": "OIP_MODEL_NAME",
    "max_request_tensors": "OIP_MAX_REQUEST_TENSORS",
    "max_header_bytes": "OIP_MAX_HEADER_BYTES",
    "max_headers": "OIP_MAX_HEADERS",
    "header_timeout": "OIP_HEADER_TIMEOUT",
    "body_timeout": "OIP_BODY_TIMEOUT",
    "keep_alive_timeout": "OIP_KEEP_ALIVE_TIMEOUT",
    "max_connections": "OIP_MAX_CONNECTIONS",
    "ort_intra_op_threads": "OIP_ORT_INTRA_OP_THREADS",
    "ort_inter_op_threads": "OIP_ORT_INTER_OP_THREADS",
    "ort_allow_spinning": "OIP_ORT_ALLOW_SPINNING",
    "inline_run_ms": "OIP_INLINE_RUN_MS",
    "dynamic_batching": "OIP_DYNAMIC_BATCHING",
    "cache_dir": "OIP_CACHE_DIR",
    "grpc_port": "OIP_GRPC_PORT",
    "grpc_address": GRPC_ADDRESS_ENV,
    "http_address": HTTP_ADDRESS_ENV,
    "stats_dir": STATS_DIR_ENV,
    "workers": "OIP_WORKERS",
    "drain_timeout": "OIP_DRAIN_TIMEOUT",
    "log_level": "OIP_LOG_LEVEL",
    "access_log": "OIP_ACCESS_LOG",
    "malloc_keep_mb": "OIP_MALLOC_KEEP_MB",
    "opentelemetry": "OIP_OTEL",
    "metrics_port": "OIP_METRICS_PORT",
    "metrics_host": "OIP_METRICS_HOST",
    "autoscaling_min_nodes": "OIP_AUTOSCALING_MIN_NODES",
    "autoscaling_max_nodes": "OIP_AUTOSCALING_MAX_NODES",
    "request_log_sampling": "OIP_REQUEST_LOG_SAMPLING",
    "request_log_stream": "OIP_REQUEST_LOG_STREAM",
    "max_inflight": "OIP_MAX_INFLIGHT",
    "admission_target_ms": "OIP_ADMISSION_TARGET_MS",
    "deadline_margin_ms": "OIP_DEADLINE_MARGIN_MS",
    "s3_tensor_prefixes": "OIP_S3_TENSOR_PREFIXES",
    "s3_tensor_sse": "OIP_S3_TENSOR_SSE",
    "s3_tensor_kms_key": "OIP_S3_TENSOR_KMS_KEY",
}


def _spelled(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def export_to_workers(settings: Settings) -> None:
    """Put ``settings`` in this process's environment for the worker processes it starts next, which inherit it
    and read it back with ``Settings.from_env``: ``oip serve``'s supervisor, before its workers start."""
    os.environ.update(settings.to_env())


def onnxruntime_telemetry_off(env: Mapping[str, str] | None = None) -> bool:
    """Whether onnxruntime's telemetry is off: [ORT_DISABLE_TELEMETRY], onnxruntime's own variable, is ``1`` or
    unset (adapters/onnx/__init__.py sets it to ``1`` before onnxruntime is imported unless a deployment set it)."""
    env = os.environ if env is None else env
    return env.get("ORT_DISABLE_TELEMETRY", "1") == "1"


@dataclass(frozen=True)
class LambdaSettings:
    """What only the Lambda entry points read (handler/http.py, handler/batch/)."""

    #: [OIP_TRACING] AWS X-Ray subsegments.
    tracing: bool = False
    #: [OIP_WARM_UP] run each default version once on zeros in the init phase.
    warm_up: bool = True
    #: [POWERTOOLS_SERVICE_NAME] Powertools' ``service`` key on log lines and metrics.
    service_name: str = "oip-serverless"
    #: [POWERTOOLS_LOGGER_LOG_EVENT] log each event (Powertools' variable, in Powertools' spellings).
    log_event: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LambdaSettings:
        """From ``env`` (this process's environment when None); SettingsError for a value not accepted."""
        env = os.environ if env is None else env
        return cls(
            tracing=_read_flag(env, "OIP_TRACING", cls.tracing),
            warm_up=_read_flag(env, "OIP_WARM_UP", cls.warm_up),
            service_name=_read_text(env, "POWERTOOLS_SERVICE_NAME", cls.service_name),
            log_event=_powertools_flag(env, "POWERTOOLS_LOGGER_LOG_EVENT"),
        )


def _powertools_flag(env: Mapping[str, str], name: str) -> bool:
    """A Powertools switch as Powertools reads it (``strtobool``: also ``y``, ``t``, ``n`` and ``f``)."""
    from aws_lambda_powertools.shared.functions import strtobool

    value = _read_text(env, name, "false")
    try:
        return strtobool(value)
    except ValueError:
        raise SettingsError(name, value, "true or false, as Powertools reads it") from None


@dataclass(frozen=True)
class BatchSettings:
    """The batch function's destinations and defaults (``BatchConfig`` in handler/batch/config.py)."""

    #: [OIP_RESULTS_S3_URI] where SQS requests' results go.
    results_s3_uri: str = ""
    #: [OIP_RESULTS_QUEUE_URL] the results queue.
    results_queue_url: str = ""
    #: [OIP_BATCH_OUTPUT_PREFIX], [OIP_BATCH_INPUT_PREFIX] where files are written and read.
    output_prefix: str = "output/"
    input_prefix: str = "input/"
    #: [OIP_BATCH_CHUNK_SIZE] rows predicted together.
    chunk_size: int = 256
    #: [OIP_BATCH_MODEL] the model when a request or file names none.
    default_model: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BatchSettings:
        """From ``env`` (this process's environment when None); SettingsError for a value not accepted."""
        env = os.environ if env is None else env
        return cls(
            _read_text(env, "OIP_RESULTS_S3_URI", cls.results_s3_uri),
            _read_text(env, "OIP_RESULTS_QUEUE_URL", cls.results_queue_url),
            _read_text(env, "OIP_BATCH_OUTPUT_PREFIX", cls.output_prefix),
            _read_text(env, "OIP_BATCH_INPUT_PREFIX", cls.input_prefix),
            _read_int(env, "OIP_BATCH_CHUNK_SIZE", cls.chunk_size, minimum=1),
            _read_optional(env, "OIP_BATCH_MODEL"),
        )
