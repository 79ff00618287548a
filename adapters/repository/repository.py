"""A Triton-layout model repository: ``<repo>/<model>/[config.pbtxt]`` and ``<repo>/<model>/<version>/model.onnx``.

Versions follow ``version_policy`` when config.pbtxt gives one (latest / all / specific);
without one every version directory present is served. The default version (used by
version-less URLs) is the highest, unless config names another with
``parameters { key: "default_version" value { string_value: "N" } }``.
Default versions load eagerly (``load_defaults``); the others on first use. Every file a model reads
(config.pbtxt, its ``label_filename`` files, each version's model file) must resolve inside the model's directory
(``confined.inside_model``); a model naming one outside is not ready, and says which setting.

Given a model name (``oip serve --model_name``, as KServe passes the InferenceService's), a repository that is one
model's own files (``one_model``: config.pbtxt, version directories, or a model file at its top) is served as that
model, whatever name config.pbtxt gives (KServe's storage initializer puts a model's files at /mnt/models, and the
InferenceService names it). A model file at the top, without version directories, is version 1: config.pbtxt's
``default_model_filename``, else model.onnx, else the only ``.onnx`` file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.base import ModelBackend
from adapters.errors import InvalidInput, ModelNotFound, ModelNotReady
from adapters.repository.confined import inside_model
from adapters.repository.model_config import load_model_config, string_parameter
from adapters.repository.shadow import ShadowPlan, shadow_plan
from adapters.types import ModelIndexEntry

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.pbtxt"
DEFAULT_MODEL_FILE = "model.onnx"
DEFAULT_VERSION_PARAMETER = "default_version"

BackendFactory = Callable[[str, str, Path, Any], ModelBackend]


@dataclass
class ModelEntry:
    """One model directory: its config, the versions it serves and their backends."""

    name: str
    directory: Path
    config: Any = None
    versions: tuple[str, ...] = ()
    default_version: str | None = None
    error: str | None = None
    backends: dict[str, ModelBackend] = field(default_factory=dict)
    #: config.pbtxt's ``parameters`` as strings, read once (requests look them up).
    parameters: dict[str, str] = field(default_factory=dict)
    #: The model file at the top of the model's directory, served as version 1 (no version directories); None:
    #: each version's file is in its version directory.
    flat_file: str | None = None
    #: config.pbtxt's ``shadow_version`` and its rate and timeout (``shadow.py``); None: no shadow.
    shadow: ShadowPlan | None = None


def _version_dirs(directory: Path) -> list[int]:
    """The version directories: names of ASCII digits (``str.isdigit`` also takes ``²``, which ``int`` refuses)."""
    return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isascii() and p.name.isdigit())


def select_versions(present: list[int], config: Any) -> list[int]:
    """Apply a Triton ``version_policy`` to the version directories present (ascending)."""
    if config is None or not config.HasField("version_policy"):
        return present
    policy = config.version_policy
    kind = policy.WhichOneof("policy_choice")
    if kind == "latest":
        count = max(int(policy.latest.num_versions), 1)
        return present[-count:]
    if kind == "specific":
        wanted = {int(v) for v in policy.specific.versions}
        return [v for v in present if v in wanted]
    return present


def _model_file_name(entry: ModelEntry) -> str:
    return (entry.config.default_model_filename if entry.config is not None else "") or DEFAULT_MODEL_FILE


def model_file(entry: ModelEntry, version: str) -> Path:
    """The model file of one version: config.pbtxt's ``default_model_filename``, else model.onnx (a flat model's:
    its one file, ``flat_file``)."""
    if entry.flat_file is not None:
        return entry.directory / entry.flat_file
    return entry.directory / version / _model_file_name(entry)


def one_model(root: Path) -> bool:
    """Whether ``root`` is one model's own files rather than a repository of model directories: it holds
    config.pbtxt or a ``.onnx`` file, or its only directories are version directories."""
    if (root / CONFIG_FILE).is_file() or any(p.suffix == ".onnx" and p.is_file() for p in root.iterdir()):
        return True
    directories = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return bool(directories) and len(_version_dirs(root)) == len(directories)


def _flat_file(entry: ModelEntry) -> str:
    """The model file at the top of a model's directory: config.pbtxt's ``default_model_filename``, else
    model.onnx, else its only ``.onnx`` file; InvalidInput when there is none to choose."""
    named = entry.config.default_model_filename if entry.config is not None else ""
    if named or (entry.directory / DEFAULT_MODEL_FILE).is_file():
        return named or DEFAULT_MODEL_FILE
    found = sorted(p.name for p in entry.directory.iterdir() if p.suffix == ".onnx" and p.is_file())
    if len(found) != 1:
        raise InvalidInput(
            f"model '{entry.name}' has no version directory, and {len(found)} .onnx files at its top: name its file "
            "model.onnx, or set default_model_filename in config.pbtxt"
        )
    return found[0]


def _check_files(entry: ModelEntry) -> None:
    """Every file config.pbtxt names, and every version's model file, is inside the model's directory."""
    directory, config = entry.directory, entry.config
    if config is not None:
        for output in config.output:
            if output.label_filename:
                inside_model(directory, output.label_filename, f"label_filename of output '{output.name}'")
    setting = "default_model_filename" if config is not None and config.default_model_filename else "model.onnx"
    if entry.flat_file is not None:
        inside_model(directory, entry.flat_file, setting)
        return
    for version in entry.versions:
        inside_model(directory, _model_file_name(entry), f"{setting} of version {version}", version)


def _scan_model(directory: Path, default_override: str | None = None, name: str | None = None) -> ModelEntry:
    """The model in ``directory``, called ``name`` (default: the directory's name)."""
    entry = ModelEntry(name or directory.name, directory)
    try:
        config_path = directory / CONFIG_FILE
        if config_path.is_file():
            inside_model(directory, CONFIG_FILE, CONFIG_FILE)
            entry.config = load_model_config(config_path, f"{directory.name}/{CONFIG_FILE}")
            entry.parameters = {key: value.string_value for key, value in entry.config.parameters.items()}
            # One model's own files are named by the deployment (KServe's InferenceService), whatever config says.
            if entry.config.name and entry.config.name != entry.name and name is None:
                raise InvalidInput(
                    f"{directory.name}/{CONFIG_FILE}: name '{entry.config.name}' differs from the directory name "
                    f"'{directory.name}'"
                )
        versions = [str(v) for v in select_versions(_version_dirs(directory), entry.config)]
        if not versions and name is not None and not _version_dirs(directory):
            entry.flat_file = _flat_file(entry)
            versions = ["1"]
        if not versions:
            raise InvalidInput(f"model '{entry.name}' has no version directory to serve")
        entry.versions = tuple(versions)
        _check_files(entry)
        default = default_override or string_parameter(entry.config, DEFAULT_VERSION_PARAMETER) or versions[-1]
        if default not in versions:
            source = "the deployment's default version" if default_override else "default_version"
            raise InvalidInput(f"model '{entry.name}': {source} {default} is not among {versions}")
        entry.default_version = default
        entry.shadow = shadow_plan(entry.name, entry.parameters, versions, default)
    except InvalidInput as exc:
        entry.error = str(exc)
        logger.error("model %s unavailable: %s", entry.name, exc)
    return entry


class ModelRepository:
    """Models found under one local directory, each backed by ``backend_factory`` per version."""

    def __init__(
        self,
        root: Path,
        backend_factory: BackendFactory,
        default_versions: Mapping[str, str] | None = None,
        model_name: str | None = None,
    ) -> None:
        """``default_versions`` (model -> version) overrides config.pbtxt's ``default_version``; with
        ``model_name``, a ``root`` that is one model's own files (``one_model``) is that model."""
        if not root.is_dir():
            raise FileNotFoundError(f"model repository {root} is not a directory")
        self.root = root
        self._factory = backend_factory
        defaults = default_versions or {}
        self._models: dict[str, ModelEntry]
        if model_name and one_model(root):
            self._models = {model_name: _scan_model(root, defaults.get(model_name), model_name)}
            return
        self._models = {
            p.name: _scan_model(p, defaults.get(p.name))
            for p in sorted(root.iterdir())
            if p.is_dir() and not p.name.startswith(".")
        }

    def names(self) -> list[str]:
        """Model names, sorted."""
        return list(self._models)

    def entry(self, name: str) -> ModelEntry:
        """The model called ``name``; ModelNotFound otherwise."""
        entry = self._models.get(name)
        if entry is None:
            raise ModelNotFound.unknown_model(name, sorted(self._models))
        return entry

    def resolve_version(self, name: str, version: str | None) -> str:
        """The version a URL means: the given one if served, else the model's default."""
        entry = self.entry(name)
        if entry.error is not None:
            raise ModelNotReady(entry.error)
        if version is None or version == "":
            assert entry.default_version is not None
            return entry.default_version
        if version not in entry.versions:
            raise ModelNotFound.unknown_version(name, version, entry.versions)
        return version

    def backend(self, name: str, version: str | None = None) -> ModelBackend:
        """The backend serving ``name`` at ``version`` (default version when None), created on first use."""
        resolved = self.resolve_version(name, version)
        entry = self._models[name]
        backend = entry.backends.get(resolved)
        if backend is None:
            backend = self._factory(name, resolved, model_file(entry, resolved), entry.config)
            entry.backends[resolved] = backend
        return backend

    def existing_backend(self, name: str, version: str | None = None) -> ModelBackend | None:
        """The backend ``backend`` would return when it has been created already; None for one not yet created and
        for an unknown or broken model or version. Creates nothing, so that any thread may ask."""
        entry = self._models.get(name)
        if entry is None or entry.error is not None:
            return None
        resolved = entry.default_version if version is None or version == "" else version
        return entry.backends.get(resolved) if resolved is not None else None

    def load_defaults(self) -> None:
        """Load every model's default version now (Lambda's init phase, or server start)."""
        for name, entry in self._models.items():
            if entry.error is None:
                self.backend(name).load()

    def states(self) -> list[ModelIndexEntry]:
        """Every served version with its state, without waiting (the start-up log's model table): READY for a
        version whose backend loaded, UNLOADED for one that loads on first use, UNAVAILABLE with the reason."""
        return self._rows(lambda backend: backend.error is None)

    async def index(self) -> list[ModelIndexEntry]:
        """Triton's repository index: every served version with its state (READY, UNLOADED, UNAVAILABLE)."""
        backends = [backend for entry in self._models.values() for backend in entry.backends.values()]
        ready = {id(backend): await backend.ready() for backend in backends}
        return self._rows(lambda backend: ready[id(backend)])

    def _rows(self, ready: Callable[[ModelBackend], bool]) -> list[ModelIndexEntry]:
        """The index's rows, a loaded version READY when ``ready`` says so, else UNAVAILABLE with its reason."""
        rows: list[ModelIndexEntry] = []
        for name, entry in self._models.items():
            if entry.error is not None:
                rows.append(ModelIndexEntry(name, "", "UNAVAILABLE", entry.error))
                continue
            for version in entry.versions:
                backend = entry.backends.get(version)
                if backend is None:
                    rows.append(ModelIndexEntry(name, version, "UNLOADED"))
                elif ready(backend):
                    rows.append(ModelIndexEntry(name, version, "READY"))
                else:
                    rows.append(ModelIndexEntry(name, version, "UNAVAILABLE", backend.error or "not loaded"))
        return rows
