"""A model backend with a bug: it raises exceptions no error table translates, as a bug in our code or a library's
would. The tests check that clients get a generic answer with an error id, and that the log holds the details."""

from __future__ import annotations

from adapters.types import InferCall, InferResult, ModelMetadata, TensorSpec


class BuggyBackend:
    """Serves any model: ``infer`` always fails, ``metadata`` fails for the model named ``buggy_metadata``."""

    error = None

    def __init__(self, name: str, version: str, *_: object) -> None:
        self.name, self.version = name, version

    def load(self) -> None:
        pass

    async def ready(self) -> bool:
        return True

    async def metadata(self) -> ModelMetadata:
        if self.name == "buggy_metadata":
            raise KeyError("secret metadata detail at /srv/secret/path")
        spec = TensorSpec("x", "FP32", (1,))
        return ModelMetadata(self.name, (self.version,), "test", (spec,), (spec,))

    async def infer(self, call: InferCall) -> InferResult:
        raise KeyError("secret internal detail at /srv/secret/path")
