"""Triton's extensions that keep state between requests, which this stateless server does not honour.

Each has one message, answered the same way over REST (501) and gRPC (UNIMPLEMENTED), saying what to do instead:
a client written for Triton (its shared-memory examples, ``load_model``, trace and log settings) learns why at
its first call rather than meeting a bare "no such endpoint" or "Method not implemented!".
"""

from __future__ import annotations

from typing import Final

from adapters.errors import Unsupported

_INLINE: Final = "send tensors in the request instead, in binary with the binary tensor data extension"

MESSAGES: Final[dict[str, str]] = {
    "model_repository": (
        "this server is stateless: models load from the repository at start-up (default versions) or on first "
        "use, and cannot be loaded or unloaded on request"
    ),
    "system_shared_memory": (
        "system shared memory is not supported: a registered region is state kept between requests, which this "
        f"server does not keep (and a Lambda function shares no memory with its client); {_INLINE}"
    ),
    "cuda_shared_memory": (
        "CUDA shared memory is not supported: this server runs models on CPU and keeps no state between "
        f"requests; {_INLINE}"
    ),
    "trace": (
        "Triton's trace extension is not served: tracing is set at start-up (OIP_OTEL for OpenTelemetry, "
        "OIP_TRACING for AWS X-Ray), not changed on request"
    ),
    "logging": "log settings are fixed at start-up (oip serve --log-level, OIP_LOG_LEVEL), not changed on request",
}


def not_honoured(extension: str) -> Unsupported:
    """The error for a request to one of Triton's stateful extensions (a key of ``MESSAGES``)."""
    return Unsupported(MESSAGES[extension])
