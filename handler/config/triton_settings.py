"""Triton's settings from ``OIP_TRITON_*``, and whether OpenTelemetry is on (``OIP_OTEL``, which Triton's trace
context follows): ``Settings.triton`` and ``Settings.opentelemetry`` (handler/config/settings.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from handler.config.variables import Choice, Flag, Integer, Number, SettingsError, Text, raw

if TYPE_CHECKING:
    from adapters.triton.settings import TritonSettings


def read_triton(env: Mapping[str, str]) -> TritonSettings | None:
    """Triton's settings when ``OIP_TRITON_URL`` is set; None otherwise (nothing can be forwarded without a URL,
    and a deployment with no remote model does not import the Triton adapter at all)."""
    url = raw(env, "OIP_TRITON_URL")
    if url is None:
        return None
    from adapters.triton.settings import TritonSettings

    headers_text = Text().read_variable(env, "OIP_TRITON_HEADERS", "{}")
    try:
        headers = json.loads(headers_text)
    except ValueError:
        headers = None
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise SettingsError("OIP_TRITON_HEADERS", headers_text, 'a JSON object of strings ({"Authorization": "..."})')
    flag, seconds = Flag(), Number(positive=True)
    return TritonSettings(
        url=url,
        protocol=Choice(("http", "grpc")).read_variable(env, "OIP_TRITON_PROTOCOL", "http"),
        routes=TritonSettings.parse_routes(Text().read_variable(env, "OIP_TRITON_MODELS", "")),
        proxy_all=flag.read_variable(env, "OIP_TRITON_PROXY", False),
        connect_timeout=seconds.read_variable(env, "OIP_TRITON_CONNECT_TIMEOUT", 2.0),
        request_timeout=seconds.read_variable(env, "OIP_TRITON_TIMEOUT", 30.0),
        retries=Integer().read_variable(env, "OIP_TRITON_RETRIES", 2),
        ssl=flag.read_variable(env, "OIP_TRITON_SSL", False),
        ssl_ca=Text().read_variable(env, "OIP_TRITON_SSL_CA", ""),
        trace_context=opentelemetry_on(env),
        headers=headers,
        passthrough=flag.read_variable(env, "OIP_TRITON_PASSTHROUGH", True),
    )


def opentelemetry_on(env: Mapping[str, str]) -> bool:
    """``OIP_OTEL`` when set, else whether any of the OpenTelemetry SDK's own exporter variables is."""
    exporter = any(
        raw(env, name) for name in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    return bool(Flag().read_variable(env, "OIP_OTEL", exporter))
