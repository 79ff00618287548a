"""Everything the product reads from its environment, read here and nowhere else, typed.

One dataclass per program: ``Settings`` for every server process (the Lambda HTTP function, ``oip serve`` and its
workers, ``oip batch``; the fields only ``oip serve``'s processes read are ``ServeSettings``', in
handler/config/serve_settings.py), ``LambdaSettings`` for what only the Lambda entry points read, ``BatchSettings`` for
the batch function's destinations. Each field is declared once, with ``setting`` (handler/config/variables.py): its
variable, its reader, its default, what it means and its ``oip serve`` option if it has one; ``from_env``,
``VARIABLES``, ``oip serve``'s options (handler/cli/) and the configuration reference's check all come
from those declarations. The modules that use a value receive it (as a field, or as a constructor parameter from
handler/runtime/container.py for the adapters); none of them reads the environment. ``oip serve``'s workers build their
app from the ``Settings`` object the supervisor hands them before it forks them (``hand_to_workers``); nothing writes
to the environment to pass a value on.
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

from handler.config.platform import read_platform
from handler.config.serve_settings import CONNECTION_LIMITS, FLAG, POSITIVE, SECONDS, TEXT, ServeSettings
from handler.config.setting_lists import checked_default_versions, parse_s3_prefixes
from handler.config.triton_settings import opentelemetry_on, read_triton
from handler.config.variables import OFF as OFF
from handler.config.variables import ON as ON
from handler.config.variables import (
    Choice,
    Derived,
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
)
from handler.config.variables import SettingsError as SettingsError

if TYPE_CHECKING:
    from adapters.triton.settings import TritonSettings

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

#: Server-side encryption of tensors written by reference.
S3_TENSOR_SSE: tuple[str, ...] = ("aes256", "aws:kms")


def _model_repository(env: Mapping[str, str]) -> str:
    """``MODEL_REPOSITORY``, else the platform's own location, else ``OIP_DEFAULT_REPOSITORY``, else the demo."""
    return (
        raw(env, "MODEL_REPOSITORY")
        or read_platform(env).model_repository
        or Text().read_variable(env, "OIP_DEFAULT_REPOSITORY", str(DEMO_REPOSITORY))
    )


COUNT = Integer()


@dataclass(frozen=True)
class Settings(ServeSettings):
    """What a server process reads from its environment: the data plane's settings, and ``oip serve``'s
    processes' (``ServeSettings``)."""

    # The data plane.
    model_repository: str = setting(
        "MODEL_REPOSITORY",
        str(DEMO_REPOSITORY),
        Derived(_model_repository),
        "the model repository: a local directory, ``s3://bucket/prefix`` or ``gs://bucket/prefix``",
        option=Option(
            ("--model-repository", "--model_dir", "--model-store"),  # KServe's and Triton's spellings too
            default="the platform's own location (SageMaker's /opt/ml/model, Vertex AI's AIP_STORAGE_URI), else "
            "OIP_DEFAULT_REPOSITORY (what a container image ships), else the demo repository",
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


#: ``Settings``' fields read from a variable of their own -> that variable (``from_env`` reads each from there).
VARIABLES: dict[str, str] = {
    each.name: declaration.variable for each, declaration in declared(Settings) if declaration.passed_on
}


#: The settings ``oip serve``'s supervisor hands the workers it forks (``hand_to_workers``), which inherit this value
#: with the rest of its memory; None in a process that ``oip serve`` did not start.
_handed: Settings | None = None


def hand_to_workers(settings: Settings) -> None:
    """Give ``settings`` to the workers this process forks from now on, which inherit them as they are
    (``inherited_settings``): ``oip serve``'s supervisor, before its first worker (with one worker, its own process);
    the workers SIGHUP or ``--max-requests`` starts are forked from it too."""
    global _handed
    _handed = settings


def inherited_settings() -> Settings:
    """The settings ``oip serve``'s supervisor handed this process (``hand_to_workers``), else its environment's: a
    fresh interpreter that builds the app (gunicorn's or granian's workers, as bench/ runs them)."""
    return _handed if _handed is not None else Settings.from_env()


def onnxruntime_telemetry_off(env: Mapping[str, str] | None = None) -> bool:
    """Whether onnxruntime's telemetry is off: [ORT_DISABLE_TELEMETRY], onnxruntime's own variable, is ``1`` or
    unset (adapters/onnx/__init__.py sets it to ``1`` before onnxruntime is imported unless a deployment set it)."""
    env = os.environ if env is None else env
    return env.get("ORT_DISABLE_TELEMETRY", "1") == "1"
