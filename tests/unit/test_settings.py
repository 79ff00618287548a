"""handler/config/settings.py: every variable read once, typed, with its default; a value a variable does not
take stops ``oip serve``, ``oip batch`` and the Lambda init with one line; nothing else in handler/ or adapters/
touches the environment."""

# covers: handler/config/lambda_settings.py
# covers: handler/config/setting_lists.py
# covers: handler/config/settings.py
# covers: handler/config/variables.py

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from adapters.triton.settings import TritonRoute
from handler.config.lambda_settings import BatchSettings, LambdaSettings
from handler.config.platform import Platform
from handler.config.settings import VARIABLES, Settings
from handler.config.variables import OFF, ON, Reader, SettingsError, declared
from tests.support.code_reference import environment_variables

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_MODULE = "handler/config/settings.py"
#: The modules whose ``from_env`` takes this process's environment when given none.
ENVIRONMENT_MODULES = {SETTINGS_MODULE, "handler/config/lambda_settings.py"}
#: The modules that read a variable's value (the readers) or name one outside a declaration (the settings module).
SETTINGS_READERS = {"handler.config.variables", "handler.config.settings"}

#: (variable, Settings field, value given, value read)
SETTINGS_READS: list[tuple[str, str, str, Any]] = [
    ("MODEL_REPOSITORY", "model_repository", "/srv/models", "/srv/models"),
    ("OIP_DEFAULT_REPOSITORY", "model_repository", "s3://bucket/models", "s3://bucket/models"),
    ("OIP_MAX_BODY_BYTES", "max_body_bytes", "1024", 1024),
    ("OIP_MAX_REQUEST_BYTES", "max_request_bytes", "4096", 4096),
    ("OIP_MAX_INFLIGHT_BYTES", "max_inflight_bytes", "8192", 8192),
    ("OIP_MAX_TENSOR_BYTES", "max_tensor_bytes", " 2048 ", 2048),
    ("OIP_SERVER_NAME", "server_name", "triton", "triton"),
    ("OIP_EAGER_LOAD", "eager_load", "off", False),
    ("OIP_DEFAULT_VERSIONS", "default_versions", "iris=2, tiny_image=1", "iris=2, tiny_image=1"),
    ("OIP_MODEL_NAME", "model_name", "iris", "iris"),
    ("OIP_MAX_REQUEST_TENSORS", "max_request_tensors", "8", 8),
    ("OIP_MAX_HEADER_BYTES", "max_header_bytes", "4096", 4096),
    ("OIP_MAX_HEADERS", "max_headers", "20", 20),
    ("OIP_HEADER_TIMEOUT", "header_timeout", "2.5", 2.5),
    ("OIP_BODY_TIMEOUT", "body_timeout", "4", 4.0),
    ("OIP_KEEP_ALIVE_TIMEOUT", "keep_alive_timeout", "7", 7),
    ("OIP_MAX_CONNECTIONS", "max_connections", "64", 64),
    ("OIP_ORT_INTRA_OP_THREADS", "ort_intra_op_threads", "2", 2),
    ("OIP_ORT_INTER_OP_THREADS", "ort_inter_op_threads", "1", 1),
    ("OIP_ORT_ALLOW_SPINNING", "ort_allow_spinning", "yes", True),
    ("OIP_INLINE_RUN_MS", "inline_run_ms", "inf", math.inf),
    ("OIP_DYNAMIC_BATCHING", "dynamic_batching", "false", False),
    ("OIP_CACHE_DIR", "cache_dir", "/var/cache/oip", "/var/cache/oip"),
    ("OIP_GRPC_PORT", "grpc_port", "8001", 8001),
    ("OIP_GRPC_ADDRESS", "grpc_address", "127.0.0.1:8001", "127.0.0.1:8001"),
    ("OIP_HTTP_ADDRESS", "http_address", "127.0.0.1:8000", "127.0.0.1:8000"),
    ("OIP_STATS_DIR", "stats_dir", "/tmp/oip-stats", "/tmp/oip-stats"),
    ("OIP_WORKERS", "workers", "3", 3),
    ("OIP_DRAIN_TIMEOUT", "drain_timeout", "0", 0.0),
    ("OIP_WORKER_TIMEOUT", "worker_timeout", "2.5", 2.5),
    ("OIP_EXIT_ON_ERROR", "exit_on_error", "false", False),
    ("OIP_MAX_REQUESTS", "max_requests", "500", 500),
    ("OIP_MAX_REQUESTS_JITTER", "max_requests_jitter", "50", 50),
    ("OIP_LOG_LEVEL", "log_level", "WARNING", "warning"),
    ("OIP_ACCESS_LOG", "access_log", "On", True),
    ("OIP_MALLOC_KEEP_MB", "malloc_keep_mb", "0", 0),
    ("OIP_OTEL", "opentelemetry", "1", True),
    ("OIP_METRICS_PORT", "metrics_port", "0", 0),
    ("OIP_METRICS_HOST", "metrics_host", "0.0.0.0", "0.0.0.0"),
    ("OTEL_TRACES_EXPORTER", "opentelemetry", "otlp", True),
    ("OTEL_METRICS_EXPORTER", "opentelemetry", "otlp", True),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "opentelemetry", "http://collector:4318", True),
    ("OIP_AUTOSCALING_MIN_NODES", "autoscaling_min_nodes", "0", 0),
    ("OIP_AUTOSCALING_MAX_NODES", "autoscaling_max_nodes", "50", 50),
    ("OIP_REQUEST_LOG_SAMPLING", "request_log_sampling", "2.5", 2.5),
    ("OIP_REQUEST_LOG_STREAM", "request_log_stream", "oip-request-log", "oip-request-log"),
    ("OIP_S3_TENSOR_PREFIXES", "s3_tensor_prefixes", "s3://bk1/in, s3://bk2/a/b/", ("s3://bk1/in/", "s3://bk2/a/b/")),
    ("OIP_S3_TENSOR_SSE", "s3_tensor_sse", "AWS:KMS", "aws:kms"),
    ("OIP_S3_TENSOR_KMS_KEY", "s3_tensor_kms_key", "alias/tensors", "alias/tensors"),
    ("OIP_MAX_INFLIGHT", "max_inflight", "12", 12),
    ("OIP_ADMISSION_TARGET_MS", "admission_target_ms", "250", 250),
    ("OIP_DEADLINE_MARGIN_MS", "deadline_margin_ms", "250", 250),
]
LAMBDA_READS: list[tuple[str, str, str, Any]] = [
    ("OIP_TRACING", "tracing", "true", True),
    ("OIP_WARM_UP", "warm_up", "0", False),
    ("POWERTOOLS_SERVICE_NAME", "service_name", "inference", "inference"),
    ("POWERTOOLS_LOGGER_LOG_EVENT", "log_event", "t", True),  # Powertools' own spellings
]
BATCH_READS: list[tuple[str, str, str, Any]] = [
    ("OIP_RESULTS_S3_URI", "results_s3_uri", "s3://bucket/results", "s3://bucket/results"),
    ("OIP_RESULTS_QUEUE_URL", "results_queue_url", "https://sqs/q", "https://sqs/q"),
    ("OIP_BATCH_OUTPUT_PREFIX", "output_prefix", "out/", "out/"),
    ("OIP_BATCH_INPUT_PREFIX", "input_prefix", "in/", "in/"),
    ("OIP_BATCH_CHUNK_SIZE", "chunk_size", "512", 512),
    ("OIP_BATCH_MODEL", "default_model", "iris", "iris"),
]
TRITON_URL = {"OIP_TRITON_URL": "triton:8001"}
#: (variable, TritonSettings field, value given, value read), with ``OIP_TRITON_URL`` set.
TRITON_READS: list[tuple[str, str, str, Any]] = [
    ("OIP_TRITON_URL", "url", "triton:8001", "triton:8001"),
    ("OIP_TRITON_PROTOCOL", "protocol", "GRPC", "grpc"),
    ("OIP_TRITON_MODELS", "routes", "big=big_model:2", {"big": TritonRoute("big_model", "2")}),
    ("OIP_TRITON_PROXY", "proxy_all", "yes", True),
    ("OIP_TRITON_CONNECT_TIMEOUT", "connect_timeout", "0.5", 0.5),
    ("OIP_TRITON_TIMEOUT", "request_timeout", "3.5", 3.5),
    ("OIP_TRITON_RETRIES", "retries", "0", 0),
    ("OIP_TRITON_SSL", "ssl", "TRUE", True),
    ("OIP_TRITON_SSL_CA", "ssl_ca", "/etc/ca.pem", "/etc/ca.pem"),
    ("OIP_TRITON_HEADERS", "headers", '{"Authorization": "Bearer t"}', {"Authorization": "Bearer t"}),
    ("OIP_TRITON_PASSTHROUGH", "passthrough", "off", False),
]
#: Read by the platform detection (tests/component/test_platform_env.py serves with them).
PLATFORM_VARIABLES = {
    "OIP_PLATFORM", "OIP_HOST", "OIP_PORT", "OIP_DEFAULT_MODEL", "SAGEMAKER_BIND_TO_PORT",
    "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", "AIP_HTTP_PORT", "AIP_HEALTH_ROUTE", "AIP_PREDICT_ROUTE", "AIP_STORAGE_URI",
}  # fmt: skip
#: onnxruntime's own variable (``onnxruntime_telemetry_off``; tests/unit/test_onnxruntime_telemetry.py).
LIBRARY_VARIABLES = {"ORT_DISABLE_TELEMETRY"}

FLAG_VARIABLES = [
    *(name for name, _, _, value in SETTINGS_READS if isinstance(value, bool) and name.startswith("OIP_")),
    "OIP_TRACING",
    "OIP_WARM_UP",
    "OIP_TRITON_PROXY",
    "OIP_TRITON_SSL",
    "OIP_TRITON_PASSTHROUGH",
]
FLAG_ERROR = "1, true, yes or on (on), or 0, false, no or off (off), in any case"


def _read(name: str, text: str) -> Any:
    """Read ``name`` = ``text`` through whichever settings class reads it; the settings object."""
    if name in {n for n, *_ in LAMBDA_READS}:
        return LambdaSettings.from_env({name: text})
    if name in {n for n, *_ in BATCH_READS}:
        return BatchSettings.from_env({name: text})
    if name.startswith("OIP_TRITON_"):
        return Settings.from_env({**TRITON_URL, name: text}).triton
    return Settings.from_env({name: text})


def test_unset_or_empty_variables_give_the_defaults() -> None:
    assert Settings.from_env({}) == Settings()
    assert Settings().model_repository == str(ROOT / "models") and Settings().platform == Platform()
    assert (Settings().max_body_bytes, Settings().inline_run_ms, Settings().workers) == (64 * 1024 * 1024, 1.0, None)
    assert Settings.for_lambda({}).max_body_bytes == 6 * 1024 * 1024  # Lambda's synchronous payload limit
    assert Settings.for_lambda({"OIP_MAX_BODY_BYTES": "1000"}).max_body_bytes == 1000
    assert LambdaSettings.from_env({}) == LambdaSettings() == LambdaSettings(False, True, "oip-serverless", False)
    assert BatchSettings.from_env({}) == BatchSettings() == BatchSettings("", "", "output/", "input/", 256, None)
    assert Settings.from_env({}).triton is None  # no URL, nothing forwarded (and the adapter not imported)
    every = [*SETTINGS_READS, *LAMBDA_READS, *BATCH_READS]
    assert Settings.from_env({name: "" for name, *_ in every}) == Settings()
    assert LambdaSettings.from_env({name: "" for name, *_ in every}) == LambdaSettings()
    assert BatchSettings.from_env({name: "" for name, *_ in every}) == BatchSettings()


@pytest.mark.parametrize(
    ("name", "field", "text", "value"),
    [*SETTINGS_READS, *LAMBDA_READS, *BATCH_READS, *TRITON_READS],
    ids=[row[0] for row in (*SETTINGS_READS, *LAMBDA_READS, *BATCH_READS, *TRITON_READS)],
)
def test_each_variable_is_read_into_its_field_with_its_type(name: str, field: str, text: str, value: Any) -> None:
    read = getattr(_read(name, text), field)
    assert read == value and type(read) is type(value)


def test_the_tables_above_cover_every_variable_the_settings_module_reads() -> None:
    read_here = {name for name, modules in environment_variables().items() if modules & SETTINGS_READERS}
    tested = {name for name, *_ in (*SETTINGS_READS, *LAMBDA_READS, *BATCH_READS, *TRITON_READS)}
    assert read_here == tested | PLATFORM_VARIABLES | LIBRARY_VARIABLES


@pytest.mark.parametrize("name", FLAG_VARIABLES)
def test_switches_take_every_spelling_in_any_case_and_refuse_the_rest(name: str) -> None:
    field = next(f for n, f, *_ in [*SETTINGS_READS, *LAMBDA_READS, *TRITON_READS] if n == name)
    for spelling in ON:
        for given in (spelling, spelling.upper(), spelling.capitalize(), f" {spelling} "):
            assert getattr(_read(name, given), field) is True, given
    for spelling in OFF:
        for given in (spelling, spelling.upper(), spelling.capitalize()):
            assert getattr(_read(name, given), field) is False, given
    for wrong in ("maybe", "2", "y", "enabled", "on off"):
        with pytest.raises(SettingsError) as raised:
            _read(name, wrong)
        assert str(raised.value) == f"{name}={wrong!r}: expected {FLAG_ERROR}"


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("OIP_MAX_BODY_BYTES", "abc", "an integer from 1"),
        ("OIP_MAX_BODY_BYTES", "0", "an integer from 1"),
        ("OIP_MAX_BODY_BYTES", "1.5", "an integer from 1"),
        ("OIP_ORT_INTRA_OP_THREADS", "-1", "an integer from 0"),
        ("OIP_GRPC_PORT", "70000", "an integer from 0 to 65535"),
        ("OIP_WORKERS", "0", "an integer from 1"),
        ("OIP_BATCH_CHUNK_SIZE", "many", "an integer from 1"),
        ("OIP_HEADER_TIMEOUT", "0", "a number greater than 0"),
        ("OIP_HEADER_TIMEOUT", "soon", "a number greater than 0"),
        ("OIP_DRAIN_TIMEOUT", "inf", "a number of at least 0"),
        ("OIP_DRAIN_TIMEOUT", "-5", "a number of at least 0"),
        ("OIP_INLINE_RUN_MS", "nan", "a number of at least 0 or inf"),
        ("OIP_TRITON_TIMEOUT", "0", "a number greater than 0"),
        ("OIP_LOG_LEVEL", "loud", "critical, error, warning, info, debug or trace"),
        ("OIP_TRITON_PROTOCOL", "smtp", "http or grpc"),
        ("OIP_TRITON_HEADERS", "[1]", 'a JSON object of strings ({"Authorization": "..."})'),
        ("OIP_TRITON_HEADERS", '{"a": 1}', 'a JSON object of strings ({"Authorization": "..."})'),
        ("OIP_DEFAULT_VERSIONS", "iris", "model=version pairs, comma-separated (iris=2,bert=1)"),
        ("OIP_PLATFORM", "azure", "server, sagemaker or vertex"),
        ("OIP_PORT", "http", "an integer from 1 to 65535"),
        ("POWERTOOLS_LOGGER_LOG_EVENT", "maybe", "true or false, as Powertools reads it"),
    ],
)
def test_a_value_not_taken_is_one_line_naming_the_variable_and_what_it_takes(
    name: str, text: str, expected: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        _read(name, text)
    assert str(raised.value) == f"{name}={text!r}: expected {expected}"
    assert raised.value.name == name and isinstance(raised.value, ValueError)


def test_a_value_with_a_newline_stays_on_one_line() -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"OIP_MAX_HEADERS": "1\n2"})
    assert "\n" not in str(raised.value)


def test_model_repository_precedence() -> None:
    """``MODEL_REPOSITORY``, then the platform's own location, then ``OIP_DEFAULT_REPOSITORY``, then the demo."""
    default = {"OIP_DEFAULT_REPOSITORY": "/image/models"}
    assert Settings.from_env({**default, "MODEL_REPOSITORY": "/mine"}).model_repository == "/mine"
    assert Settings.from_env({**default, "SAGEMAKER_BIND_TO_PORT": "8080"}).model_repository == "/opt/ml/model"
    vertex = {**default, "AIP_HTTP_PORT": "8080", "AIP_STORAGE_URI": "gs://b/m"}
    assert Settings.from_env(vertex).model_repository == "gs://b/m"
    assert Settings.from_env(default).model_repository == "/image/models"


def test_overrides_beat_the_environment_and_none_leaves_it() -> None:
    env = {"OIP_MAX_BODY_BYTES": "100", "OIP_ACCESS_LOG": "1", "OIP_GRPC_PORT": "9000"}
    settings = Settings.from_env(env, max_body_bytes=None, access_log=False, grpc_port=0)
    assert (settings.max_body_bytes, settings.access_log, settings.grpc_port) == (100, False, 0)


def test_a_lambda_function_batches_nothing_and_runs_models_inline_unless_told() -> None:
    assert Settings.for_lambda({}).dynamic_batching is False
    assert Settings.for_lambda({"OIP_DYNAMIC_BATCHING": "1"}).dynamic_batching is False
    assert Settings.for_lambda({}).inline_run_ms == math.inf
    assert Settings.for_lambda({"OIP_INLINE_RUN_MS": "1000000"}).inline_run_ms == 1_000_000
    assert Settings.for_lambda({}, inline_run_ms=2.0, model_repository="/m").inline_run_ms == 2.0
    assert Settings.for_lambda({}, model_repository=None).model_repository == Settings().model_repository


def test_every_field_is_declared_once_with_its_variable_reader_and_meaning() -> None:
    """Each field of the three settings classes carries its declaration; no variable is declared twice."""
    variables = [
        declaration.variable
        for cls in (Settings, LambdaSettings, BatchSettings)
        for each, declaration in declared(cls)
        if declaration.doc.strip() and isinstance(declaration.reader, Reader)
    ]
    assert len(variables) == sum(len(fields(cls)) for cls in (Settings, LambdaSettings, BatchSettings))
    assert len(set(variables)) == len(variables)
    assert {name for name, *_ in (*SETTINGS_READS, *LAMBDA_READS, *BATCH_READS)} >= set(variables) - {
        "OIP_TRITON_URL",  # Triton's settings, read from OIP_TRITON_* (TRITON_READS)
        "OIP_PLATFORM",  # the platform, read from PLATFORM_VARIABLES
    }


def test_every_field_but_the_platforms_and_tritons_is_read_from_its_variable() -> None:
    """Every field but the platform's and Triton's (read from their own variables) has a variable of its own, and
    each is read from it."""
    assert set(VARIABLES) == {f.name for f in fields(Settings)} - {"platform", "triton"}
    changed = Settings.from_env({name: text for name, _, text, _ in SETTINGS_READS if name in VARIABLES.values()})
    assert all(getattr(changed, f) != getattr(Settings(), f) for f in VARIABLES), "each field away from its default"


def _clean_environment(**env: str) -> dict[str, str]:
    """This process's environment without the product's variables, with ``env``."""
    names = {name for name, *_ in (*SETTINGS_READS, *LAMBDA_READS, *BATCH_READS, *TRITON_READS)}
    names |= PLATFORM_VARIABLES | LIBRARY_VARIABLES
    return {k: v for k, v in os.environ.items() if k not in names} | env


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [("OIP_EAGER_LOAD", "maybe", FLAG_ERROR), ("OIP_ACCESS_LOG", "sometimes", FLAG_ERROR),
     ("OIP_MAX_BODY_BYTES", "abc", "an integer from 1")],
)  # fmt: skip
def test_oip_serve_stops_with_one_line(name: str, text: str, expected: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "handler.cli", "serve", "--port", "0", "--workers", "1"],
        cwd=ROOT,
        env=_clean_environment(**{name: text}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert _one_line(result.stderr) == f"oip serve: error: {name}={text!r}: expected {expected}"


def test_oip_batch_stops_with_one_line(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}\n')
    result = subprocess.run(
        [sys.executable, "-m", "handler.cli", "batch", str(rows), "--model", "iris", "--quiet"],
        cwd=ROOT,
        env=_clean_environment(OIP_DYNAMIC_BATCHING="nope"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert _one_line(result.stderr) == f"oip batch: error: OIP_DYNAMIC_BATCHING='nope': expected {FLAG_ERROR}"
    assert not (tmp_path / "rows.predictions.jsonl").exists()


#: What a fresh interpreter reports after ``import handler.http`` (the Lambda init, no warm-up).
LAMBDA_INIT = """
import json, os
before = dict(os.environ)
import handler.http
after = dict(os.environ)
changed = {k: v for k, v in after.items() if before.get(k) != v}
changed.update({k: None for k in before if k not in after})
print(json.dumps({"changed": changed, "tracing": handler.http.lambda_settings.tracing,
                  "span": type(handler.http.telemetry.span("infer")).__name__,
                  "dynamic_batching": handler.http.settings.dynamic_batching,
                  "inline_run_ms": handler.http.settings.inline_run_ms}))
"""


def _lambda_init(**env: str) -> subprocess.CompletedProcess[str]:
    environment = _clean_environment(MODEL_REPOSITORY=str(ROOT / "models"), OIP_WARM_UP="0", **env)
    return subprocess.run(
        [sys.executable, "-c", LAMBDA_INIT], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def test_the_lambda_init_stops_with_the_line_as_its_error() -> None:
    """The runtime reports an init that raises with the exception's message (``errorMessage``): that line."""
    result = _lambda_init(OIP_TRACING="maybe")
    assert result.returncode == 1 and not result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"handler.config.variables.SettingsError: OIP_TRACING='maybe': expected {FLAG_ERROR}"


def test_oip_tracing_true_turns_tracing_on_and_the_init_leaves_the_environment_as_it_was() -> None:
    """onnxruntime's own ``ORT_DISABLE_TELEMETRY`` is set before onnxruntime is imported when a deployment left it
    unset (adapters/onnx/__init__.py): nothing else is written, also when the deployment set it."""
    for given, changed in [({"ORT_DISABLE_TELEMETRY": "1"}, {}), ({}, {"ORT_DISABLE_TELEMETRY": "1"})]:
        result = _lambda_init(OIP_TRACING="true", **given)
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report == {
            "changed": changed,
            "tracing": True,
            "span": "SubsegmentContextManager",  # an X-Ray subsegment per infer call
            "dynamic_batching": False,
            "inline_run_ms": math.inf,
        }
    result = _lambda_init(OIP_TRACING="0", ORT_DISABLE_TELEMETRY="1")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (report["tracing"], report["span"], report["changed"]) == (False, "nullcontext", {})


#: Modules that touch the environment besides the settings module, and the only variables each may name:
#: libraries' own variables set before the library reads them, and a Lambda package of its own.
ENVIRONMENT_EXCEPTIONS: dict[str, set[str]] = {
    # onnxruntime starts its telemetry uploader at import unless this is set first.
    "adapters/onnx/__init__.py": {"ORT_DISABLE_TELEMETRY"},
    # numpy's OpenBLAS threads in ``oip serve``'s supervisor while it preloads (given back unchanged after).
    "handler/cli/serve.py": {"OPENBLAS_NUM_THREADS"},
    # The CodeDeploy hooks: a Lambda package of their own (CodeUri handler/rollout/), the standard library only.
    "handler/rollout/hook.py": {"OIP_ROLLOUT_TARGET", "OIP_ROLLOUT_CHECKS", "OIP_ROLLOUT_AGREEMENT_REQUESTS"},
    # The pre-traffic hook's agreement gate, imported by that hook alone.
    "handler/rollout/gate.py": {
        "OIP_ROLLOUT_AGREEMENT_REQUESTS",
        "OIP_ROLLOUT_MIN_AGREEMENT",
        "OIP_ROLLOUT_COMPARISON_S3_URI",
        "OIP_ROLLOUT_ALIAS",
    },
}
ENVIRONMENT_FUNCTIONS = frozenset({"getenv", "getenvb", "putenv", "unsetenv"})
ENVIRONMENT_ATTRIBUTES = frozenset({"environ", "environb"}) | ENVIRONMENT_FUNCTIONS


def _environment_touches(tree: ast.Module) -> list[tuple[ast.AST, str | None]]:
    """Each touch of the process environment -> the literal variable it names (None: not a literal name)."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    touches: list[tuple[ast.AST, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            touches += [(node, None) for alias in node.names if alias.name in ENVIRONMENT_ATTRIBUTES]
        if not (isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_ATTRIBUTES):
            continue
        if not (isinstance(node.value, ast.Name) and node.value.id == "os"):
            continue
        parent = parents.get(node)
        key: ast.AST | None = None
        if isinstance(parent, ast.Subscript) and parent.value is node:
            key = parent.slice
        elif isinstance(parent, ast.Attribute) and isinstance(call := parents.get(parent), ast.Call) and call.args:
            key = call.args[0]  # os.environ.get("X") / .setdefault("X", ...) / .pop("X")
        elif isinstance(parent, ast.Call) and parent.func is node and parent.args:
            key = parent.args[0]  # os.getenv("X")
        name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        touches.append((node, name))
    return touches


def test_only_the_settings_module_touches_the_environment() -> None:
    """An AST scan of handler/ and adapters/: ``os.environ``, ``os.getenv``, ``os.putenv`` and their imports appear
    in the settings modules; elsewhere only as ``ENVIRONMENT_EXCEPTIONS`` lists, each naming its variable."""
    offences = []
    for path in sorted([*(ROOT / "handler").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]):
        relative = path.relative_to(ROOT).as_posix()
        if relative in ENVIRONMENT_MODULES:
            continue
        allowed = ENVIRONMENT_EXCEPTIONS.get(relative, set())
        for node, name in _environment_touches(ast.parse(path.read_text(), relative)):
            if name is None or name not in allowed:
                offences.append(f"{relative}:{getattr(node, 'lineno', '?')}: {ast.unparse(node)} ({name})")
    assert not offences, offences


def test_the_settings_module_never_writes_the_environment() -> None:
    tree = ast.parse((ROOT / SETTINGS_MODULE).read_text())
    writers: set[str] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            target = node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
            method = node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else ""
            writes = method in ("update", "setdefault", "pop", "clear", "__setitem__") or (
                isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del)
            )
            if isinstance(node, ast.Subscript):
                target = node.value
            if writes and isinstance(target, ast.Attribute) and target.attr == "environ":
                writers.add(function.name)
    assert writers == set()


def test_the_scan_sees_every_form_of_touch() -> None:
    """The scan itself: each form is seen, with its name when it is a literal."""
    code = (
        "import os\nfrom os import environ\n"
        "a = os.environ['A']\nb = os.environ.get('B')\nc = os.getenv('C')\nos.environ.setdefault('D', '1')\n"
        "e = os.environ\nf = os.environ.get(NAME)\nos.putenv('G', '1')\ndel os.environ['H']\n"
    )
    names = [name for _, name in _environment_touches(ast.parse(code))]
    assert sorted(names, key=str) == sorted([None, "A", "B", "C", "D", None, None, "G", "H"], key=str)
