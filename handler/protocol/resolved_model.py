"""``ResolvedModel``: the model one request names, looked up once and handed down the request's steps.

``DataPlane.resolve`` finds the backend (or the error that stands for it: an unknown model or version, a model
that does not load) and whether Triton serves the name; the tensor counts, the content types' defaults, the run
and classification all read it instead of looking the name up again. Resolving never raises: the error is raised
by the first step that needs the backend, so a request gets the error it got before it was resolved once.
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
    """A model name and version as one request asked for them, resolved (``DataPlane.resolve``).

    Its fields are plain attributes, read on every request: ``backend`` and a local model's ``parameters`` are set
    when the lookup found the model; when it did not, reading either raises the lookup's V2Error (``error``:
    ModelNotFound, ModelNotReady) instead."""

    __slots__ = ("backend", "error", "known", "name", "parameters", "passes_through", "remote", "version")

    #: The backend that answers.
    backend: ModelBackend
    #: config.pbtxt's ``parameters`` of a local model version, as strings; empty for one served by Triton.
    parameters: Mapping[str, str]

    def __init__(self, router: ModelRouter, name: str, version: str | None) -> None:
        self.name = name
        self.version = version
        #: Triton serves it (``router.route``).
        self.remote = router.route(name) is not None
        #: Its inference bodies may go to Triton as they are (``router.passes_through``).
        self.passes_through = self.remote and router.passthrough is not None
        if self.remote:
            self.parameters = _NONE
        #: The lookup's error; None when a backend answers.
        self.error: V2Error | None = None
        try:
            self.backend = router.backend(name, version)
        except V2Error as exc:
            self.error = exc
            #: Whether a backend answers for it (else ``backend`` raises).
            self.known = False
            return
        self.known = True
        if not self.remote:  # the version was resolved with the backend: its model's parameters are the version's
            self.parameters = router.repository.entry(name).parameters

    def __getattr__(self, attribute: str) -> NoReturn:
        """``backend`` or ``parameters`` of a model the lookup did not find: the lookup's V2Error."""
        if attribute in ("backend", "parameters") and self.error is not None:
            raise self.error
        raise AttributeError(f"'ResolvedModel' object has no attribute '{attribute}'")
