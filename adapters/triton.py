"""Remote models on an NVIDIA Triton Inference Server, through tritonclient's asyncio clients.

The client is imported lazily (``tritonclient.http.aio`` costs about 0.5 s of cold start here, because it
pulls in gevent and aiohttp; ``tritonclient.grpc.aio`` about 0.3 s), so a deployment without remote models
pays nothing. HTTP is the default all the same: it forwards faster (bench/bench_triton.py) and copies binary
tensors once, where gRPC's protobuf message copies them twice.

Tensors go to Triton in binary: a binary request's tensors are zero-copy views of the request body, handed to
tritonclient without a per-element decode (tritonclient's body join is the one copy); outputs come back binary
and are re-encoded as the caller asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from adapters.errors import (
    InvalidInput,
    ModelNotFound,
    ModelNotReady,
    UpstreamError,
    UpstreamTimeout,
    V2Error,
)
from adapters.types import InferCall, InferResult, ModelIndexEntry, ModelMetadata, Tensor, TensorSpec

T = TypeVar("T")


@dataclass(frozen=True)
class TritonRoute:
    """A local model name served by a remote Triton model (optionally a pinned version)."""

    remote_name: str
    remote_version: str = ""


@dataclass(frozen=True)
class TritonSettings:
    """Where and how to reach Triton. From the environment by ``from_env`` (all ``OIP_TRITON_*``)."""

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

    @classmethod
    def from_env(cls) -> TritonSettings:
        """``OIP_TRITON_URL``, ``_PROTOCOL`` (http|grpc), ``_MODELS``, ``_PROXY``, ``_CONNECT_TIMEOUT``,
        ``_TIMEOUT``, ``_RETRIES``, ``_SSL``, ``_SSL_CA``, ``_HEADERS`` (a JSON object)."""
        env = os.environ
        protocol = env.get("OIP_TRITON_PROTOCOL", "http").lower()
        if protocol not in ("grpc", "http"):
            raise ValueError("OIP_TRITON_PROTOCOL must be grpc or http")
        return cls(
            url=env.get("OIP_TRITON_URL", ""),
            protocol=protocol,
            routes=cls.parse_routes(env.get("OIP_TRITON_MODELS", "")),
            proxy_all=env.get("OIP_TRITON_PROXY", "0") in ("1", "true", "True"),
            connect_timeout=float(env.get("OIP_TRITON_CONNECT_TIMEOUT", "2")),
            request_timeout=float(env.get("OIP_TRITON_TIMEOUT", "30")),
            retries=int(env.get("OIP_TRITON_RETRIES", "2")),
            ssl=env.get("OIP_TRITON_SSL", "0") in ("1", "true", "True"),
            ssl_ca=env.get("OIP_TRITON_SSL_CA", ""),
            headers=json.loads(env.get("OIP_TRITON_HEADERS", "{}") or "{}"),
        )


def _status(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    value = status() if callable(status) else status
    return str(value or "")


class TritonClient:
    """One asyncio tritonclient (HTTP or gRPC) for a Triton URL, with error translation, timeouts and retries."""

    def __init__(self, settings: TritonSettings) -> None:
        self.settings = settings
        self._client: Any = None
        self._module: Any = None

    def _connect(self) -> Any:
        if self._client is None:
            settings = self.settings
            if settings.protocol == "http":
                import ssl as ssl_module

                import tritonclient.http.aio as module

                context = ssl_module.create_default_context(cafile=settings.ssl_ca or None) if settings.ssl else None
                self._client = module.InferenceServerClient(
                    settings.url, conn_timeout=settings.request_timeout, ssl=settings.ssl, ssl_context=context
                )
            else:
                import tritonclient.grpc.aio as module
                from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE

                certificates = Path(settings.ssl_ca).read_bytes() if settings.ssl and settings.ssl_ca else None
                channel_args = [
                    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
                    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
                    # A channel of its own, with short reconnect backoff, so that a restarted Triton is
                    # reached at once instead of after gRPC's shared subchannel waits out its backoff.
                    ("grpc.use_local_subchannel_pool", 1),
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", 1000),
                ]
                self._client = module.InferenceServerClient(
                    settings.url, ssl=settings.ssl, root_certificates=certificates, channel_args=channel_args
                )
            self._module = module
        return self._client

    @property
    def module(self) -> Any:
        """``tritonclient.http.aio`` or ``tritonclient.grpc.aio``."""
        self._connect()
        return self._module

    def translate(self, exc: BaseException, what: str) -> V2Error:
        """Triton's and the transport's errors as ours: Triton's 4xx pass through with Triton's message."""
        if isinstance(exc, V2Error):
            return exc
        if isinstance(exc, TimeoutError):
            return UpstreamTimeout(f"Triton did not answer {what} within {self.settings.request_timeout} s")
        status = _status(exc)
        message = getattr(exc, "message", None)
        text = message() if callable(message) else str(exc)
        if status in ("400", "StatusCode.INVALID_ARGUMENT"):
            return InvalidInput(text)
        if status in ("404", "StatusCode.NOT_FOUND"):
            return ModelNotFound(text)
        if status in ("StatusCode.DEADLINE_EXCEEDED", "504"):
            return UpstreamTimeout(f"Triton did not answer {what} in time: {text}")
        if status in ("StatusCode.UNAVAILABLE", "503", "") or "connect" in text.lower():
            return ModelNotReady(
                f"Triton at {self.settings.url} is unavailable ({what}): {text}", retry_after=self.settings.retry_after
            )
        return UpstreamError(f"Triton failed {what} ({status}): {text}")

    async def call(self, what: str, make: Callable[[Any], Awaitable[T]], idempotent: bool = True) -> T:
        """Run one client call with the request timeout; retry idempotent calls on unavailability."""
        attempts = 1 + (self.settings.retries if idempotent else 0)
        for attempt in range(attempts):
            try:
                return await asyncio.wait_for(make(self._connect()), self.settings.request_timeout)
            except Exception as exc:  # translated below; tritonclient raises many kinds
                error = self.translate(exc, what)
                if isinstance(error, ModelNotReady):
                    await self.reset()
                if not (isinstance(error, ModelNotReady) and attempt + 1 < attempts):
                    raise error from None
                await asyncio.sleep(self.settings.backoff * 2**attempt)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Close the underlying connection pool."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def reset(self) -> None:
        """Drop the connection after Triton was unreachable: a gRPC channel would otherwise sit in its
        reconnect backoff (up to minutes) after Triton is back; a fresh one connects at once."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may fail; it is dropped all the same
                await client.close()

    def _as_json(self) -> dict[str, Any]:
        return {"as_json": True} if self.settings.protocol == "grpc" else {}

    async def probe(self, make: Callable[[Any], Awaitable[Any]]) -> bool:
        """A health probe within the connect timeout: False (and a fresh connection next time) on any failure."""
        try:
            return bool(await asyncio.wait_for(make(self._connect()), self.settings.connect_timeout))
        except Exception:
            await self.reset()
            return False

    async def server_ready(self) -> bool:
        """Whether Triton answers ready."""
        return await self.probe(lambda c: c.is_server_ready(headers=self.settings.headers))

    async def index(self) -> list[dict[str, Any]]:
        """Triton's repository index."""
        index = await self.call(
            "the repository index",
            lambda c: c.get_model_repository_index(headers=self.settings.headers, **self._as_json()),
        )
        return list(index.get("models", [])) if isinstance(index, dict) else list(index)


def _spec(entry: dict[str, Any]) -> TensorSpec:
    return TensorSpec(entry["name"], entry["datatype"], tuple(int(d) for d in entry.get("shape", [])))


class TritonBackend:
    """A model served by Triton: infer, metadata and readiness are forwarded."""

    def __init__(self, name: str, version: str, route: TritonRoute, client: TritonClient) -> None:
        self.name = name
        self.version = version or route.remote_version
        self.route = route
        self.client = client

    @property
    def error(self) -> str | None:
        """Remote models keep no load state here."""
        return None

    def load(self) -> None:
        """Nothing to load: Triton holds the model."""

    async def metadata(self) -> ModelMetadata:
        """Triton's model metadata under the local name."""
        document = await self.client.call(
            f"metadata of '{self.route.remote_name}'",
            lambda c: c.get_model_metadata(
                self.route.remote_name, self.version, headers=self.client.settings.headers, **self.client._as_json()
            ),
        )
        return ModelMetadata(
            self.name,
            tuple(document.get("versions", [])),
            document.get("platform", ""),
            tuple(_spec(entry) for entry in document.get("inputs", [])),
            tuple(_spec(entry) for entry in document.get("outputs", [])),
        )

    async def config(self) -> dict[str, Any]:
        """Triton's model configuration, as JSON."""
        document = await self.client.call(
            f"configuration of '{self.route.remote_name}'",
            lambda c: c.get_model_config(
                self.route.remote_name, self.version, headers=self.client.settings.headers, **self.client._as_json()
            ),
        )
        return dict(document.get("config", document))

    async def ready(self) -> bool:
        """Whether Triton reports the model ready (False when Triton does not answer)."""
        return await self.client.probe(
            lambda c: c.is_model_ready(self.route.remote_name, self.version, headers=self.client.settings.headers)
        )

    def _inputs(self, call: InferCall) -> list[Any]:
        module = self.client.module
        inputs = []
        for tensor in call.inputs:
            item = module.InferInput(tensor.name, list(tensor.shape), tensor.datatype)
            if self.client.settings.protocol == "http" and tensor.datatype != "BYTES":
                # The numpy view of the request body goes in as it is: tritonclient's body join is the one copy.
                data = np.ascontiguousarray(tensor.data)
                item._raw_data = memoryview(data).cast("B")
                item._parameters["binary_data_size"] = data.nbytes
            else:
                item.set_data_from_numpy(_for_client(tensor))
            inputs.append(item)
        return inputs

    def _outputs(self, call: InferCall) -> list[Any] | None:
        if not call.outputs:
            return None
        module = self.client.module
        if self.client.settings.protocol == "http":
            return [module.InferRequestedOutput(o.name, binary_data=True) for o in call.outputs]
        return [module.InferRequestedOutput(o.name) for o in call.outputs]

    async def infer(self, call: InferCall) -> InferResult:
        """Forward one inference (never retried: it is not known to be idempotent)."""
        inputs, outputs = self._inputs(call), self._outputs(call)
        settings = self.client.settings
        result = await self.client.call(
            f"inference on '{self.route.remote_name}'",
            lambda c: c.infer(
                self.route.remote_name,
                inputs,
                model_version=self.version,
                outputs=outputs,
                request_id=call.id or "",
                headers=settings.headers,
            ),
            idempotent=False,
        )
        response = result.get_response(**self.client._as_json())
        tensors = []
        for entry in response.get("outputs", []):
            array = result.as_numpy(entry["name"])
            shape = tuple(int(d) for d in entry.get("shape", array.shape))
            tensors.append(Tensor(entry["name"], entry["datatype"], shape, np.asarray(array).reshape(shape)))
        return InferResult(self.name, str(response.get("model_version", self.version)), tuple(tensors), call.id)


def _for_client(tensor: Tensor) -> np.ndarray:
    """BYTES as an object array of bytes, as tritonclient serialises them."""
    if tensor.datatype != "BYTES":
        return np.ascontiguousarray(tensor.data)
    items = [item.encode() if isinstance(item, str) else bytes(item) for item in tensor.data.ravel()]
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array.reshape(tensor.shape)


def index_entries(routes: dict[str, TritonRoute], rows: list[dict[str, Any]]) -> list[ModelIndexEntry]:
    """Triton index rows under every local name routed to them (a pinned route keeps only its version)."""
    entries = []
    for local, route in routes.items():
        for row in rows:
            if row.get("name") != route.remote_name:
                continue
            version = str(row.get("version", ""))
            if route.remote_version and version and version != route.remote_version:
                continue
            entries.append(ModelIndexEntry(local, version, str(row.get("state", "")), str(row.get("reason", ""))))
    return entries
