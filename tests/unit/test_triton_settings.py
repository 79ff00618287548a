"""Triton routing settings and lazy client import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from adapters.triton.settings import TritonRoute, TritonSettings
from handler.config.settings import Settings, SettingsError


def test_routes_with_mapping_and_pinned_versions() -> None:
    routes = TritonSettings.parse_routes(" resnet , bert=bert_onnx:2, gpt=:3 ")
    assert routes == {
        "resnet": TritonRoute("resnet"),
        "bert": TritonRoute("bert_onnx", "2"),
        "gpt": TritonRoute("gpt", "3"),
    }


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OIP_TRITON_URL", "triton.internal:8001")
    monkeypatch.setenv("OIP_TRITON_MODELS", "big=big_model")
    monkeypatch.setenv("OIP_TRITON_HEADERS", '{"Authorization": "Bearer t"}')
    monkeypatch.setenv("OIP_TRITON_TIMEOUT", "3.5")
    settings = Settings.from_env().triton
    assert settings is not None
    assert settings.enabled and settings.protocol == "http" and settings.request_timeout == 3.5
    assert settings.routes == {"big": TritonRoute("big_model")} and not settings.proxy_all
    assert settings.headers == {"Authorization": "Bearer t"}
    monkeypatch.setenv("OIP_TRITON_PROTOCOL", "smtp")
    with pytest.raises(SettingsError, match="http or grpc"):
        Settings.from_env()


def test_not_enabled_without_url_or_routes() -> None:
    assert not TritonSettings(routes={"a": TritonRoute("a")}).enabled
    assert not TritonSettings(url="x:1").enabled
    assert TritonSettings(url="x:1", proxy_all=True).enabled


def test_the_http_app_does_not_import_tritonclient_clients() -> None:
    code = (
        "import sys, handler.http; "
        "print(any(m.startswith(('tritonclient.http', 'tritonclient.grpc.aio', 'grpc')) and m != "
        "'tritonclient.grpc.model_config_pb2' for m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "False"
