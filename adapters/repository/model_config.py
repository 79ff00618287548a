"""Triton ``config.pbtxt`` parsed with Triton's own schema (``model_config.proto``).

The schema module ships in tritonclient as ``tritonclient.grpc.model_config_pb2``. Importing
it the ordinary way runs ``tritonclient/grpc/__init__.py``, which pulls in grpcio (an optional
dependency, and a large part of a cold start). The module itself needs only protobuf, so it is
loaded from its file under its canonical name; a later ``import tritonclient.grpc`` reuses it.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from google.protobuf import text_format

from adapters.errors import InvalidInput

_MODULE = "tritonclient.grpc.model_config_pb2"


@cache
def model_config_pb2() -> ModuleType:
    """Triton's ``model_config_pb2`` module, without importing grpc."""
    if _MODULE in sys.modules:
        return sys.modules[_MODULE]
    package = importlib.util.find_spec("tritonclient")
    if package is None or not package.submodule_search_locations:
        raise ImportError("tritonclient is not installed")
    path = Path(next(iter(package.submodule_search_locations))) / "grpc" / "model_config_pb2.py"
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = module
    spec.loader.exec_module(module)
    return module


def parse_model_config(text: str, source: str = "config.pbtxt") -> Any:
    """Parse protobuf text into a Triton ``ModelConfig`` message; InvalidInput on a syntax error."""
    config = model_config_pb2().ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise InvalidInput(f"{source}: {exc}") from None
    return config


def load_model_config(path: Path, source: str | None = None) -> Any:
    """Read and parse a ``config.pbtxt`` file; errors name it as ``source`` (default: its path)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{source or path}: not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInput(f"{source or path} cannot be read: {exc.strerror}") from None
    return parse_model_config(text, source or str(path))


def config_to_dict(config: Any) -> dict[str, Any]:
    """A ModelConfig as the JSON Triton returns from ``GET /v2/models/{m}/config``."""
    from google.protobuf import json_format

    document = json_format.MessageToDict(config, preserving_proto_field_name=True)
    for key in ("input", "output"):
        for entry in document.get(key, []):
            if "dims" in entry:  # int64 fields come out as strings in proto3 JSON; Triton prints numbers
                entry["dims"] = [int(d) for d in entry["dims"]]
    return document


def string_parameter(config: Any, key: str) -> str | None:
    """``parameters { key: "..." value { string_value: "..." } }`` of a ModelConfig."""
    if config is None or key not in config.parameters:
        return None
    return str(config.parameters[key].string_value)
