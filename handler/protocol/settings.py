"""Server settings, read once from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: ``host:port`` for the V2 gRPC API beside HTTP in each ``oip serve`` worker (set by ``oip serve --grpc-port``).
GRPC_ADDRESS_ENV = "OIP_GRPC_ADDRESS"
#: The directory through which the workers of one ``oip serve`` share their statistics counters.
STATS_DIR_ENV = "OIP_STATS_DIR"

#: Lambda's synchronous invocation payload limit (6 MB).
LAMBDA_SYNC_PAYLOAD_BYTES = 6 * 1024 * 1024
#: The most inputs, and the most outputs, a request may name when its model's own counts are not known.
MAX_REQUEST_TENSORS = 1024

#: The demo repository shipped beside the packages (``models/``).
DEMO_REPOSITORY = Path(__file__).resolve().parents[2] / "models"


@dataclass(frozen=True)
class Settings:
    """What the server reads from its environment (names in brackets)."""

    #: [MODEL_REPOSITORY] a local directory or ``s3://bucket/prefix``; when unset, [OIP_DEFAULT_REPOSITORY] (what
    #: a container image ships, yielding to a platform's own location), else the demo repository.
    model_repository: str = str(DEMO_REPOSITORY)
    #: [OIP_MAX_BODY_BYTES] largest request body accepted, after decompression.
    max_body_bytes: int = LAMBDA_SYNC_PAYLOAD_BYTES
    #: [OIP_MAX_TENSOR_BYTES] largest tensor a request's shape may ask the server to hold.
    max_tensor_bytes: int = 64 * 1024 * 1024
    #: [OIP_SERVER_NAME] name reported by ``GET /v2``.
    server_name: str = "oip-serverless"
    #: [OIP_EAGER_LOAD] load default model versions at start-up ("0" defers to first use).
    eager_load: bool = True
    #: [OIP_DEFAULT_VERSIONS] ``model=version,...``: default versions over config.pbtxt's ``default_version``.
    default_versions: str = ""
    #: [OIP_MAX_REQUEST_TENSORS] most inputs, and most requested outputs, one request may name where the model's
    #: own counts do not apply (a model served by Triton, a request-level content type that maps inputs).
    max_request_tensors: int = MAX_REQUEST_TENSORS
    # What ``oip serve`` (uvicorn) allows a connection; Lambda's front door (API Gateway) sets its own.
    #: [OIP_MAX_HEADER_BYTES] largest request head (request line and headers); larger ones get 431.
    max_header_bytes: int = 32 * 1024
    #: [OIP_MAX_HEADERS] most header fields in a request; more get 431.
    max_headers: int = 100
    #: [OIP_HEADER_TIMEOUT] seconds a client has to send a request's whole head, from the connection or the
    #: request's first byte: 408 and the connection closed after that (a gRPC connection: its HTTP/2 handshake).
    header_timeout: float = 10.0
    #: [OIP_BODY_TIMEOUT] seconds a request body may pause between two reads before the connection is closed.
    body_timeout: float = 30.0
    #: [OIP_KEEP_ALIVE_TIMEOUT] seconds an idle keep-alive connection stays open after an answer.
    keep_alive_timeout: int = 5
    #: [OIP_MAX_CONNECTIONS] open connections (or requests in progress) per worker before new requests get 503.
    max_connections: int = 1024

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Settings from environment variables, then explicit overrides (None means unset)."""
        env = os.environ
        values: dict[str, object] = {
            "model_repository": (
                env.get("MODEL_REPOSITORY") or env.get("OIP_DEFAULT_REPOSITORY") or cls.model_repository
            ),
            "max_body_bytes": int(env.get("OIP_MAX_BODY_BYTES", cls.max_body_bytes)),
            "max_tensor_bytes": int(env.get("OIP_MAX_TENSOR_BYTES", cls.max_tensor_bytes)),
            "server_name": env.get("OIP_SERVER_NAME", cls.server_name),
            "eager_load": env.get("OIP_EAGER_LOAD", "1") not in ("0", "false", "False"),
            "default_versions": env.get("OIP_DEFAULT_VERSIONS", ""),
            "max_request_tensors": int(env.get("OIP_MAX_REQUEST_TENSORS", cls.max_request_tensors)),
            "max_header_bytes": int(env.get("OIP_MAX_HEADER_BYTES", cls.max_header_bytes)),
            "max_headers": int(env.get("OIP_MAX_HEADERS", cls.max_headers)),
            "header_timeout": float(env.get("OIP_HEADER_TIMEOUT", cls.header_timeout)),
            "body_timeout": float(env.get("OIP_BODY_TIMEOUT", cls.body_timeout)),
            "keep_alive_timeout": int(env.get("OIP_KEEP_ALIVE_TIMEOUT", cls.keep_alive_timeout)),
            "max_connections": int(env.get("OIP_MAX_CONNECTIONS", cls.max_connections)),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
