"""``ProbeAnswers``: what the server answers to a probe's GET (its health, its metadata, a model's metadata and
readiness) told from any thread, without the event loop, when telling it needs no waiting: the status and body the
app's routes answer (handler/rest/health.py, handler/rest/metadata.py), byte for byte.

The thread that accepts ``oip serve``'s connections (handler/cli/acceptor.py) answers a connection's probes with
them, as Triton's HTTP threads answer health and metadata whatever its models are doing: a load balancer, a
kubelet or a dashboard polling a worker whose event loop is past its capacity is answered at once. A path answered
here is matched as Starlette matches the app's routes; anything that would wait or fail (a model forwarded to
Triton, a version not yet loaded, an unknown model, a target with a query or an escape) is None, and the event
loop answers it as usual."""

from __future__ import annotations

import re
from typing import Final

import orjson

from handler.protocol.dataplane import DataPlane
from handler.rest.health import LIVE, READY, health_answer, model_ready_answer
from handler.rest.metadata import metadata_document
from handler.runtime.drain import draining

#: The key of a worker's lifespan state under which the app hands its ``ProbeAnswers`` to the worker's acceptors.
PROBES: Final = "oip.probes"

#: ``/v2/models/{model_name}[/versions/{model_version}][/ready]``, the model routes a probe asks, for names of
#: letters, digits, ``_``, ``.`` and ``-``: any other (an escape, which Starlette decodes), or a query, is left to
#: the app.
_MODEL: Final = re.compile(r"/v2/models/([\w.-]+)(?:/versions/([\w.-]+))?(/ready)?", re.ASCII)
#: ``GET /v2/models/stats`` is the statistics extension's, matched before a model called ``stats``.
_STATISTICS: Final = "/v2/models/stats"


class ProbeAnswers:
    """A probe's answers from any thread, as status and JSON body (see the module's docstring). Readiness is
    answered here when every model is local and its default version loaded at start-up (``OIP_EAGER_LOAD``): telling
    it then reads what is loaded and creates nothing."""

    def __init__(self, dataplane: DataPlane, eager_load: bool) -> None:
        self.dataplane = dataplane
        self.ready_at_once = eager_load and dataplane.serves_only_locally()
        self._server = orjson.dumps(dataplane.server_metadata("rest"))

    def answer(self, path: str) -> tuple[int, bytes] | None:
        """The answer to ``GET path``; None for any other path, and for an answer that must wait or fails."""
        if path == LIVE:
            return health_answer("live", self.dataplane.live())
        if path == READY:
            return self._ready()
        if path == "/v2":
            return 200, self._server
        model = _MODEL.fullmatch(path)
        if model is None or path == _STATISTICS:
            return None
        name, version, ready = model.groups()
        metadata = self.dataplane.loaded_metadata(name, version)
        if metadata is None:
            return None
        if ready:  # loaded, so ready: the model readiness route's answer
            return model_ready_answer(name, True)
        return 200, orjson.dumps(metadata_document(metadata))

    def _ready(self) -> tuple[int, bytes] | None:
        if draining():
            return health_answer("ready", False)
        if not self.ready_at_once:
            return None
        ready = self.dataplane.local_ready()
        return None if ready is None else health_answer("ready", ready)
