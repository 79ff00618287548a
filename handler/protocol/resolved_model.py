"""``ResolvedModel``: the model one request names, looked up once and handed down the request's steps.

``DataPlane.resolve`` (``resolve_model``) finds the backend (or the error that stands for it: an unknown model or
version, a model that does not load) and whether Triton serves the name; the tensor counts, the content types'
defaults, the run and classification all read it instead of looking the name up again. Resolving never raises:
the error is raised by the first step that needs the backend, so a request gets the error it got before it was
resolved once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn

from adapters.base import ModelBackend
from adapters.errors import V2Error

if TYPE_CHECKING:
    from adapters.router import ModelRouter

#: What a model served by Triton has of config.pbtxt's ``parameters`` here: none.
_NONE: Mapping[str, str] = {}


class ResolvedModel:
    """A model name and version as one request asked for them, resolved (``resolve_model``).

    Its fields are plain attributes, read on every request: ``backend`` and a local model's ``parameters`` are those
    the lookup found. A model it did not find is an ``UnresolvedModel``, whose ``backend`` and ``parameters`` raise
    the lookup's V2Error instead."""

    __slots__ = ("backend", "known", "name", "parameters", "passes_through", "remote", "version")

    #: The backend that answers.
    backend: ModelBackend
    #: config.pbtxt's ``parameters`` of a local model version, as strings; empty for one served by Triton.
    parameters: Mapping[str, str]

    def __init__(
        self,
        name: str,
        version: str | None,
        remote: bool,
        passes_through: bool,
        backend: ModelBackend,
        parameters: Mapping[str, str],
    ) -> None:
        self.name = name
        self.version = version
        #: Triton serves it (``router.route``).
        self.remote = remote
        #: Its inference bodies may go to Triton as they are (``router.passes_through``).
        self.passes_through = passes_through
        #: Whether a backend answers for it (else ``backend`` raises).
        self.known = True
        self.backend = backend
        self.parameters = parameters


class UnresolvedModel(ResolvedModel):
    """A model the lookup did not find: reading its ``backend`` or ``parameters`` raises ``error`` (ModelNotFound,
    ModelNotReady)."""

    __slots__ = ("error",)

    def __init__(self, name: str, version: str | None, remote: bool, passes_through: bool, error: V2Error) -> None:
        # not ResolvedModel's: its backend and parameters are the properties below, which nothing sets
        self.name, self.version, self.remote, self.passes_through = name, version, remote, passes_through
        self.known = False
        #: The lookup's error.
        self.error = error

    @property  # type: ignore[override]
    def backend(self) -> NoReturn:
        raise self.error

    @property  # type: ignore[override]
    def parameters(self) -> NoReturn:
        raise self.error


def resolve_model(router: ModelRouter, name: str, version: str | None) -> ResolvedModel:
    """The model ``name`` (``version``: None for its default) as ``router`` finds it; never raises."""
    remote = router.route(name) is not None
    passes_through = remote and router.passthrough is not None
    try:
        backend = router.backend(name, version)
    except V2Error as exc:
        return UnresolvedModel(name, version, remote, passes_through, exc)
    # the version was resolved with the backend: a local model's parameters are the version's
    parameters = _NONE if remote else router.repository.entry(name).parameters
    return ResolvedModel(name, version, remote, passes_through, backend, parameters)
