"""Remote models on an NVIDIA Triton Inference Server: infer, metadata, configuration and readiness forwarded.

Tensors go to Triton in binary through tritonclient's public API; outputs come back binary and are re-encoded
as the caller asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from adapters import deadline as deadlines
from adapters.errors import Unsupported
from adapters.triton.client import TritonClient
from adapters.triton.passthrough import Forwarded, TritonPassthrough
from adapters.triton.settings import TritonRoute
from adapters.types import InferCall, InferResult, ModelIndexEntry, ModelMetadata, Tensor, TensorSpec


def _spec(entry: dict[str, Any]) -> TensorSpec:
    return TensorSpec(entry["name"], entry["datatype"], tuple(int(d) for d in entry.get("shape", [])))


class TritonBackend:
    """A model served by Triton: infer, metadata and readiness are forwarded."""

    def __init__(
        self,
        name: str,
        version: str,
        route: TritonRoute,
        client: TritonClient,
        passthrough: TritonPassthrough | None = None,
    ) -> None:
        self.name = name
        self.version = version or route.remote_version
        self.route = route
        self.client = client
        self.passthrough = passthrough

    @property
    def error(self) -> str | None:
        """Remote models keep no load state here."""
        return None

    def load(self) -> None:
        """Nothing to load: Triton holds the model."""

    async def metadata(self) -> ModelMetadata:
        """Triton's model metadata under the local name."""
        document = await self.client.model_metadata(self.route.remote_name, self.version)
        return ModelMetadata(
            self.name,
            tuple(document.get("versions", [])),
            document.get("platform", ""),
            tuple(_spec(entry) for entry in document.get("inputs", [])),
            tuple(_spec(entry) for entry in document.get("outputs", [])),
        )

    async def config(self) -> dict[str, Any]:
        """Triton's model configuration, as JSON."""
        return await self.client.model_config(self.route.remote_name, self.version)

    async def ready(self) -> bool:
        """Whether Triton reports the model ready (False when Triton does not answer)."""
        return await self.client.model_ready(self.route.remote_name, self.version)

    def _inputs(self, call: InferCall) -> list[Any]:
        module = self.client.module
        inputs = []
        for tensor in call.inputs:
            item = module.InferInput(tensor.name, list(tensor.shape), tensor.datatype)
            if self.client.settings.protocol == "http":
                item.set_data_from_numpy(_for_client(tensor), binary_data=True)
            else:
                item.set_data_from_numpy(_for_client(tensor))
            inputs.append(item)
        return inputs

    def _outputs(self, call: InferCall) -> list[Any] | None:
        if not call.outputs:
            return None
        module = self.client.module
        # Triton's classification extension: Triton itself answers the top N of a forwarded output.
        counts = [int(o.parameters.get("classification", 0) or 0) for o in call.outputs]
        if self.client.settings.protocol == "http":
            return [
                module.InferRequestedOutput(o.name, binary_data=True, class_count=n)
                for o, n in zip(call.outputs, counts, strict=True)
            ]
        return [module.InferRequestedOutput(o.name, class_count=n) for o, n in zip(call.outputs, counts, strict=True)]

    async def infer(self, call: InferCall) -> InferResult:
        """Forward one inference (never retried: it is not known to be idempotent)."""
        inputs, outputs = self._inputs(call), self._outputs(call)
        parameters = call.parameters
        priority, timeout_us = deadlines.request_priority(parameters), deadlines.request_timeout_us(parameters)
        result, response = await self.client.infer(
            self.route.remote_name, self.version, inputs, outputs, call.id or "", priority, timeout_us
        )
        tensors = []
        for entry in response.get("outputs", []):
            array = result.as_numpy(entry["name"])
            shape = tuple(int(d) for d in entry.get("shape", array.shape))
            tensors.append(Tensor(entry["name"], entry["datatype"], shape, np.asarray(array).reshape(shape)))
        return InferResult(self.name, str(response.get("model_version", self.version)), tuple(tensors), call.id)

    async def forward(self, body: bytes, headers: Mapping[str, str]) -> Forwarded:
        """An inference body passed through to Triton's HTTP endpoint as is, under the remote name and version."""
        if self.passthrough is None:
            raise Unsupported("pass-through forwarding needs OIP_TRITON_PROTOCOL=http")
        return await self.passthrough.forward(self.route.remote_name, self.version, body, headers)


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
