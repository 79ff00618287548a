"""The ``model_versions`` extension: each served model version as AI Platform's ``Version`` resource.

Field names are the seed's (``projects.models.versions``); fields that mean nothing here (``machineType``,
``packageUris``, ``etag``, ``acceleratorConfig``, ...) are omitted rather than faked. ``state`` is observed,
never caused: reading a resource does not load the version.

- ``READY`` once the version's session exists, ``CREATING`` while it loads, ``FAILED`` with ``errorMessage``
  when loading failed, ``UNKNOWN`` ("the version state is unspecified") for a version not loaded yet: it
  loads on first use.
- ``deploymentUri`` is where the version lives in the repository: under the object store's URI
  (``s3://bucket/prefix/iris/1``), or its path inside a local repository (``iris/1``).
- ``description`` and ``labels`` come from config.pbtxt ``parameters`` (``labels`` in gcloud's ``--labels``
  syntax, ``team=vision,stage=prod``); ``isDefault`` from ``default_version`` or ``OIP_DEFAULT_VERSIONS``.
- ``autoScaling`` and ``requestLoggingConfig`` are what the deployment configured (the environment
  template.yaml sets), present only when the deployment configured them.
"""

from __future__ import annotations

import functools
import platform
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlparse

from adapters.errors import InvalidInput, ModelNotReady, Unsupported
from adapters.repository.model_config import string_parameter
from adapters.repository.repository import ModelEntry, ModelRepository, model_file
from adapters.router import ModelRouter

if TYPE_CHECKING:
    from handler.config.settings import Settings

EXTENSION: Final = "model_versions"
DESCRIPTION_PARAMETER: Final = "description"
LABELS_PARAMETER: Final = "labels"

#: gcloud's label rules: lowercase letters, digits, ``_`` and ``-``; keys start with a letter; at most 63 chars.
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")


def rfc3339(timestamp: float) -> str:
    """A POSIX time as an RFC 3339 UTC timestamp (``2024-05-01T12:00:00.123456Z``)."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def repository_location(uri: str) -> str:
    """What ``deploymentUri`` starts with: an object store's URI (``s3://bucket/prefix/``), or nothing for a local
    repository, whose versions are shown by their path inside it (never by the server's filesystem path)."""
    parsed = urlparse(uri)
    if parsed.scheme and parsed.scheme != "file" and parsed.netloc:
        return uri.rstrip("/") + "/"
    return ""


def parse_labels(text: str, model: str = "") -> dict[str, str]:
    """gcloud's ``--labels`` syntax, ``key=value,key2=value2``; InvalidInput naming the bad label otherwise."""
    labels: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not _LABEL_KEY.fullmatch(key) or not _LABEL_VALUE.fullmatch(value):
            raise InvalidInput(
                f"model '{model}': label '{item}' in config.pbtxt is not key=value with lowercase letters, digits, "
                "'_' or '-' (keys start with a letter, both at most 63 characters)"
            )
        labels[key] = value
    return labels


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # a slow import: when a resource is first read

    try:
        return version(name)
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Deployment:
    """How the deployment configured scaling and request logging (AI Platform's ``autoScaling`` and
    ``requestLoggingConfig``), from the environment template.yaml sets."""

    min_nodes: int | None = None
    max_nodes: int | None = None
    sampling_percentage: float = 0.0

    @classmethod
    def from_settings(cls, settings: Settings) -> Deployment:
        """``OIP_AUTOSCALING_MIN_NODES``, ``OIP_AUTOSCALING_MAX_NODES`` and ``OIP_REQUEST_LOG_SAMPLING`` (%, when
        ``OIP_REQUEST_LOG_STREAM`` names a stream)."""
        sampling = settings.request_log_sampling if settings.request_log_stream else 0.0
        return cls(settings.autoscaling_min_nodes, settings.autoscaling_max_nodes, sampling)

    def fields(self) -> dict[str, Any]:
        """``autoScaling`` and ``requestLoggingConfig`` where configured."""
        document: dict[str, Any] = {}
        scaling = {k: v for k, v in (("minNodes", self.min_nodes), ("maxNodes", self.max_nodes)) if v is not None}
        if scaling:
            document["autoScaling"] = scaling
        if self.sampling_percentage > 0:
            # The seed's samplingPercentage is a fraction from 0 to 1; the template's parameter is a percentage.
            document["requestLoggingConfig"] = {"samplingPercentage": self.sampling_percentage / 100}
        return document


@dataclass
class VersionUsage:
    """When each model version last served a prediction in this process (``lastUseTime``)."""

    last_use: dict[tuple[str, str], float] = field(default_factory=dict)

    def touch(self, name: str, model_version: str) -> None:
        """Record a prediction now."""
        self.last_use[(name, model_version)] = time.time()


class VersionCatalog:
    """Version resources of the local repository's models."""

    def __init__(
        self,
        router: ModelRouter,
        usage: VersionUsage,
        repository_uri: str,
        server_version: str,
        deployment: Deployment | None = None,
    ) -> None:
        self.router = router
        self.usage = usage
        self.location = repository_location(repository_uri)
        self.deployment = deployment if deployment is not None else Deployment()
        self.server_version = server_version
        self.python_version = ".".join(platform.python_version_tuple()[:2])

    @functools.cached_property
    def runtime_version(self) -> str:
        """``runtimeVersion``: ours, and onnxruntime's where it is installed."""
        onnxruntime = _package_version("onnxruntime")
        return f"oip-serverless {self.server_version}" + (f", onnxruntime {onnxruntime}" if onnxruntime else "")

    @property
    def repository(self) -> ModelRepository:
        return self.router.repository

    def _entry(self, name: str) -> ModelEntry:
        if self.router.route(name) is not None:
            raise Unsupported(
                f"model '{name}' is served by Triton; its versions are Triton's (POST /v2/repository/index)"
            )
        entry = self.repository.entry(name)
        if entry.error is not None:
            raise ModelNotReady(entry.error)
        return entry

    async def list(self, name: str) -> list[dict[str, Any]]:
        """Every served version of ``name``, ascending."""
        entry = self._entry(name)
        return [await self._resource(entry, v) for v in entry.versions]

    async def get(self, name: str, model_version: str) -> dict[str, Any]:
        """One version; ModelNotFound for a version not served."""
        entry = self._entry(name)
        self.repository.resolve_version(name, model_version)
        return await self._resource(entry, model_version)

    async def _state(self, entry: ModelEntry, model_version: str) -> dict[str, Any]:
        backend = entry.backends.get(model_version)
        if backend is None:
            return {"state": "UNKNOWN"}
        if backend.error is not None:
            return {"state": "FAILED", "errorMessage": backend.error}
        return {"state": "READY" if await backend.ready() else "CREATING"}

    async def _resource(self, entry: ModelEntry, model_version: str) -> dict[str, Any]:
        config = entry.config
        document: dict[str, Any] = {"name": f"models/{entry.name}/versions/{model_version}"}
        description = string_parameter(config, DESCRIPTION_PARAMETER)
        if description:
            document["description"] = description
        document["isDefault"] = model_version == entry.default_version
        document["deploymentUri"] = f"{self.location}{entry.name}/{model_version}"
        created = _mtime(model_file(entry, model_version))
        if created is not None:
            document["createTime"] = rfc3339(created)
        last_use = self.usage.last_use.get((entry.name, model_version))
        if last_use is not None:
            document["lastUseTime"] = rfc3339(last_use)
        document["runtimeVersion"] = self.runtime_version
        document.update(await self._state(entry, model_version))
        labels = string_parameter(config, LABELS_PARAMETER)
        if labels:
            document["labels"] = parse_labels(labels, entry.name)
        document["framework"] = "ONNX"
        document["pythonVersion"] = self.python_version
        document.update(self.deployment.fields())
        return document


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None
