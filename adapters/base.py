"""The interface every model backend implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from adapters.types import InferCall, InferResult, ModelMetadata


@runtime_checkable
class ModelBackend(Protocol):
    """One servable model version: in-process (ONNX) or remote (Triton)."""

    name: str
    version: str

    @property
    def error(self) -> str | None:
        """Why the backend cannot serve (load failure), or None."""
        ...

    def load(self) -> None:
        """Prepare to serve (create sessions, open clients); failures are kept in ``error``."""
        ...

    async def metadata(self) -> ModelMetadata:
        """Inputs, outputs and platform; ``versions`` is filled by the repository."""
        ...

    async def ready(self) -> bool:
        """Whether ``infer`` can be called now."""
        ...

    async def infer(self, call: InferCall) -> InferResult:
        """Run one inference; raises ``V2Error`` subclasses only."""
        ...
