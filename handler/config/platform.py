"""Which platform ``oip serve`` runs on, from the environment alone (read by handler/config/settings.py), and which
model a platform route targets.

- **SageMaker** (``SAGEMAKER_BIND_TO_PORT`` set, or ``OIP_PLATFORM=sagemaker``): listen on 0.0.0.0 at
  ``SAGEMAKER_BIND_TO_PORT`` (8080 by default); the repository is ``/opt/ml/model`` (where SageMaker unpacks
  ``model.tar.gz``) unless ``MODEL_REPOSITORY`` names another.
- **Vertex AI** (any ``AIP_HTTP_PORT``, ``AIP_HEALTH_ROUTE``, ``AIP_PREDICT_ROUTE``, or ``OIP_PLATFORM=vertex``):
  listen on 0.0.0.0 at ``AIP_HTTP_PORT`` (8080); serve ``AIP_HEALTH_ROUTE`` and ``AIP_PREDICT_ROUTE``; the
  repository is ``AIP_STORAGE_URI`` unless ``MODEL_REPOSITORY`` names another.
- Otherwise a plain server on ``OIP_HOST``:``OIP_PORT`` (127.0.0.1:8000).

A platform's port beats ``OIP_PORT`` (an image may bake ``OIP_PORT`` in; the platform decides where it
sends traffic); explicit ``oip serve --host/--port`` beat both.

The model behind ``/invocations`` and the Vertex predict route: the one ``X-Amzn-SageMaker-Custom-Attributes``
names (SageMaker only), else ``OIP_DEFAULT_MODEL`` (``name`` or ``name:version``; SageMaker also reads
Triton's ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``), else the repository's only model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from adapters.errors import InvalidInput
from handler.config.variables import PORT, Choice, Text, raw

SERVER: Final = "server"
SAGEMAKER: Final = "sagemaker"
VERTEX: Final = "vertex"
SAGEMAKER_MODEL_DIR: Final = "/opt/ml/model"
PLATFORM_PORT: Final = 8080
#: The variable that sets the HTTP port on each platform (``OIP_PORT`` on a plain server).
PORT_VARIABLES: Final = {SAGEMAKER: "SAGEMAKER_BIND_TO_PORT", VERTEX: "AIP_HTTP_PORT"}


@dataclass(frozen=True)
class Platform:
    """Where and what ``oip serve`` serves, as the platform's environment says (``Settings.platform``)."""

    name: str = SERVER
    host: str = "127.0.0.1"
    port: int = 8000
    #: None: ``Settings`` decides (``OIP_DEFAULT_REPOSITORY`` or the demo repository).
    model_repository: str | None = None
    health_route: str | None = None
    predict_route: str | None = None
    #: ``name`` or ``name:version``, from ``OIP_DEFAULT_MODEL`` (or Triton's SageMaker variable).
    default_model: str | None = None

    def address(self, host: str | None = None, port: int | None = None) -> tuple[str, int]:
        """Explicit ``--host``/``--port`` over the platform's."""
        return host or self.host, port if port is not None else self.port

    def repository_options(self, option: str | None = "--model-repository") -> str:
        """Where an operator of this platform sets the model repository, for a message naming the setting:
        ``option`` (a command's, None for none), ``MODEL_REPOSITORY``, and the platform's own location."""
        names = [option] if option else []
        names.append("MODEL_REPOSITORY")
        if self.name == VERTEX:
            names.append("AIP_STORAGE_URI")
        elif self.name == SAGEMAKER:
            names.append(f"SageMaker's model data in {SAGEMAKER_MODEL_DIR}")
        return ", ".join(names)

    @property
    def port_variable(self) -> str:
        """The variable that sets ``oip serve``'s HTTP port on this platform (``--port`` beats it)."""
        return PORT_VARIABLES.get(self.name, "OIP_PORT")


def read_platform(env: Mapping[str, str]) -> Platform:
    """Where and what ``oip serve`` serves, as the platform's variables say (``Settings.platform``)."""
    chosen = Choice((SERVER, SAGEMAKER, VERTEX)).read_variable(env, "OIP_PLATFORM", "")
    if not chosen:
        if raw(env, "SAGEMAKER_BIND_TO_PORT"):
            chosen = SAGEMAKER
        elif any(raw(env, key) for key in ("AIP_HTTP_PORT", "AIP_HEALTH_ROUTE", "AIP_PREDICT_ROUTE")):
            chosen = VERTEX
        else:
            chosen = SERVER
    default_model = raw(env, "OIP_DEFAULT_MODEL")
    repository = raw(env, "MODEL_REPOSITORY")
    if chosen == SAGEMAKER:
        return Platform(
            SAGEMAKER,
            "0.0.0.0",
            PORT.read_variable(env, "SAGEMAKER_BIND_TO_PORT", PLATFORM_PORT),
            repository or SAGEMAKER_MODEL_DIR,
            default_model=default_model or raw(env, "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"),
        )
    if chosen == VERTEX:
        return Platform(
            VERTEX,
            "0.0.0.0",
            PORT.read_variable(env, "AIP_HTTP_PORT", PLATFORM_PORT),
            repository or raw(env, "AIP_STORAGE_URI"),
            raw(env, "AIP_HEALTH_ROUTE"),
            raw(env, "AIP_PREDICT_ROUTE"),
            default_model,
        )
    host = Text().read_variable(env, "OIP_HOST", "127.0.0.1")
    return Platform(SERVER, host, PORT.read_variable(env, "OIP_PORT", 8000), default_model=default_model)


def split_model(text: str) -> tuple[str, str | None]:
    """``name`` or ``name:version``."""
    name, _, version = text.strip().partition(":")
    return name, version or None


def custom_attributes(header: str | None) -> dict[str, str]:
    """``X-Amzn-SageMaker-Custom-Attributes``: ``key=value`` pairs separated by ``,`` or ``;``."""
    pairs: dict[str, str] = {}
    for item in (header or "").replace(";", ",").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            pairs[key.strip().lower()] = value.strip()
    return pairs


def target_model(
    names: list[str], default_model: str | None, attributes: Mapping[str, str] | None = None
) -> tuple[str, str | None]:
    """The (model, version) a platform route serves: named in the request, configured, or the only one."""
    attributes = attributes or {}
    if attributes.get("model"):
        name, version = split_model(attributes["model"])
        return name, attributes.get("version") or version
    if default_model:
        name, version = split_model(default_model)
        return name, attributes.get("version") or version
    if len(names) == 1:
        return names[0], attributes.get("version") or None
    raise InvalidInput(
        f"this server has {len(names)} models ({', '.join(names) or 'none'}); name one with OIP_DEFAULT_MODEL "
        "or, on SageMaker, with the header X-Amzn-SageMaker-Custom-Attributes: model=<name>[,version=<v>]"
    )
