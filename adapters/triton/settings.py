"""Where and how to reach Triton, and which local names it serves (``OIP_TRITON_*``, read by
handler/config/settings.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TritonRoute:
    """A local model name served by a remote Triton model (optionally a pinned version)."""

    remote_name: str
    remote_version: str = ""


@dataclass(frozen=True)
class TritonSettings:
    """Where and how to reach Triton."""

    url: str = ""
    protocol: str = "http"
    routes: dict[str, TritonRoute] = field(default_factory=dict)
    proxy_all: bool = False
    connect_timeout: float = 2.0
    request_timeout: float = 30.0
    retries: int = 2
    backoff: float = 0.1
    ssl: bool = False
    ssl_ca: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    retry_after: float = 5.0
    #: REST inference bodies that need no decoding go to Triton as they are (HTTP protocol only).
    passthrough: bool = True
    #: Pass the current OpenTelemetry trace on to Triton (W3C ``traceparent``, ``tracestate``) with each inference.
    trace_context: bool = False

    @property
    def enabled(self) -> bool:
        """Whether any model is forwarded."""
        return bool(self.url) and (bool(self.routes) or self.proxy_all)

    @staticmethod
    def parse_routes(text: str) -> dict[str, TritonRoute]:
        """``"resnet, bert=bert_onnx:2"`` -> {resnet: resnet, bert: bert_onnx version 2}."""
        routes: dict[str, TritonRoute] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            local, _, remote = item.partition("=")
            name, _, version = (remote or local).partition(":")
            routes[local.strip()] = TritonRoute(name.strip() or local.strip(), version.strip())
        return routes
