"""``ResolvedModel``: the model one request names, looked up once and handed down the request's steps.

``DataPlane.resolve`` finds the backend (or the error that stands for it: an unknown model or version, a model
that does not load) and whether Triton serves the name; the tensor counts, the content types' defaults, the run
and classification all read it instead of looking the name up again. Resolving never raises: the error is raised
by the first step that needs the backend, so a request gets the error it got before it was resolved once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from adapters.base import ModelBackend
from adapters.errors import V2Error

if TYPE_CHECKING:
    from adapters.router import ModelRouter

#: What a model served by Triton has of config.pbtxt's ``parameters`` here: none.
_NONE: Mapping[str, str] = {}


class ResolvedModel:
    """A model name and version as one request asked for them, resolved (``DataPlane.resolve``)."""

    __slots__ = ("_backend", "_error", "_parameters", "_router", "name", "passes_through", "remote", "version")

    def __init__(self, router: ModelRouter, name: str, version: str | None) -> None:
        self.name = name
        self.version = version
        #: Triton serves it (``router.route``).
        self.remote = router.route(name) is not None
        #: Its inference bodies may go to Triton as they are (``router.passes_through``).
        self.passes_through = self.remote and router.passthrough is not None
        self._router = router
        self._backend: ModelBackend | None = None
        self._error: V2Error | None = None
        self._parameters: Mapping[str, str] | None = _NONE if self.remote else None
        try:
            self._backend = router.backend(name, version)
        except V2Error as exc:
            self._error = exc

    @property
    def backend(self) -> ModelBackend:
        """The backend that answers; the lookup's V2Error (ModelNotFound, ModelNotReady) when there is none."""
        if self._backend is None:
            assert self._error is not None
            raise self._error
        return self._backend

    @property
    def known(self) -> bool:
        """Whether a backend answers for it (else ``backend`` raises)."""
        return self._backend is not None

    @property
    def parameters(self) -> Mapping[str, str]:
        """config.pbtxt's ``parameters`` of a local model version, as strings; empty for one served by Triton
        (the lookup's V2Error for an unknown local model or version)."""
        parameters = self._parameters
        if parameters is None:
            self.backend  # noqa: B018 - the lookup's error, if it had one
            parameters = self._parameters = self._router.local_parameters(self.name, self.version)
        return parameters
