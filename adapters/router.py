"""Which backend serves a model name: the local repository, or Triton (by explicit route or in proxy mode).

Explicitly routed names go to Triton even when a local model has the same name; in proxy mode every name
not found locally is forwarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from adapters.base import ModelBackend
from adapters.errors import ModelNotReady
from adapters.repository.repository import ModelRepository
from adapters.types import ModelIndexEntry, ModelMetadata

if TYPE_CHECKING:  # the Triton client modules are imported only when models are routed to Triton
    from adapters.triton.backend import TritonBackend
    from adapters.triton.client import TritonClient
    from adapters.triton.passthrough import Forwarded, TritonPassthrough
    from adapters.triton.settings import TritonRoute, TritonSettings


class ModelRouter:
    """Local models and remote (Triton) models behind one lookup."""

    def __init__(self, repository: ModelRepository, triton: TritonSettings | None = None) -> None:
        self.repository = repository
        self.triton = triton if triton is not None and triton.enabled else None
        self.client: TritonClient | None = None
        #: Inference bodies pass through to Triton as they are when it is reached over HTTP (unless turned off).
        self.passthrough: TritonPassthrough | None = None
        self._remote: dict[tuple[str, str], TritonBackend] = {}
        if self.triton is not None:
            from adapters.triton.client import TritonClient
            from adapters.triton.passthrough import TritonPassthrough

            self.client = TritonClient(self.triton)
            if self.triton.protocol == "http" and self.triton.passthrough:
                self.passthrough = TritonPassthrough(self.client)

    def route(self, name: str) -> TritonRoute | None:
        """The Triton route of ``name``, or None when a local model serves it."""
        if self.triton is None:
            return None
        if name in self.triton.routes:
            return self.triton.routes[name]
        if self.triton.proxy_all and name not in self.repository.names():
            from adapters.triton.settings import TritonRoute

            return TritonRoute(name)
        return None

    def names(self) -> list[str]:
        """Local model names and explicitly routed remote ones."""
        remote = list(self.triton.routes) if self.triton is not None else []
        return [*self.repository.names(), *(name for name in remote if name not in self.repository.names())]

    def backend(self, name: str, version: str | None = None) -> ModelBackend:
        """The backend for a model name and version (None: the default version)."""
        route = self.route(name)
        if route is None:
            return self.repository.backend(name, version)
        assert self.client is not None
        from adapters.triton.backend import TritonBackend  # imported with the client, in __init__

        if self.triton is not None and name not in self.triton.routes:
            # Proxy mode: any name may arrive, so nothing is cached per name (the objects are cheap).
            return TritonBackend(name, version or "", route, self.client, self.passthrough)
        key = (name, version or "")
        backend = self._remote.get(key)
        if backend is None:
            backend = self._remote[key] = TritonBackend(name, version or "", route, self.client, self.passthrough)
        return backend

    def passes_through(self, name: str) -> bool:
        """Whether inference bodies for ``name`` can go to Triton as they are (a routed model, over HTTP)."""
        return self.passthrough is not None and self.route(name) is not None

    async def forward(self, name: str, version: str | None, body: bytes, headers: dict[str, str]) -> Forwarded:
        """Pass an inference body through to the Triton model that ``name`` routes to (see ``passes_through``)."""
        from adapters.triton.backend import TritonBackend

        backend = self.backend(name, version)
        assert isinstance(backend, TritonBackend)
        return await backend.forward(body, headers)

    async def metadata(self, name: str, version: str | None = None) -> ModelMetadata:
        """Model metadata listing every version that may be requested."""
        metadata = await self.backend(name, version).metadata()
        if self.route(name) is not None:
            return metadata
        return replace(metadata, name=name, versions=self.repository.entry(name).versions)

    async def ready(self) -> bool:
        """Local default versions loaded, and Triton answering when models are routed to it."""
        for name in self.repository.names():
            if self.route(name) is not None:
                continue
            try:
                if not await self.repository.backend(name).ready():
                    return False
            except ModelNotReady:
                return False
        if self.client is not None:
            return await self.client.server_ready()
        return True

    async def index(self) -> list[ModelIndexEntry]:
        """Local rows, then the routed models' rows from Triton's own index."""
        rows = [row for row in await self.repository.index() if self.route(row.name) is None]
        if self.client is not None and self.triton is not None:
            try:
                remote_rows = await self.client.index()
            except ModelNotReady as exc:
                return rows + [ModelIndexEntry(name, "", "UNAVAILABLE", exc.message) for name in self.triton.routes]
            from adapters.triton.backend import index_entries
            from adapters.triton.settings import TritonRoute

            routes = dict(self.triton.routes)
            if self.triton.proxy_all:
                local = set(self.repository.names())
                routes |= {
                    r["name"]: TritonRoute(r["name"]) for r in remote_rows if r.get("name") not in local | set(routes)
                }
            rows += index_entries(routes, remote_rows)
        return rows

    def local_config(self, name: str, version: str | None = None) -> Any:
        """config.pbtxt of a local model (None when it has none)."""
        self.repository.resolve_version(name, version)
        return self.repository.entry(name).config

    def local_parameters(self, name: str, version: str | None = None) -> Mapping[str, str]:
        """config.pbtxt's ``parameters`` of a local model, as strings (empty when it has none)."""
        self.repository.resolve_version(name, version)
        return self.repository.entry(name).parameters

    async def remote_config(self, name: str, version: str | None = None) -> dict[str, Any] | None:
        """Triton's configuration of a routed model; None for a local model."""
        backend = self.backend(name, version)
        if self.route(name) is None:
            return None
        from adapters.triton.backend import TritonBackend

        assert isinstance(backend, TritonBackend)
        return await backend.config()
