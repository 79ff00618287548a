"""Class labels for Triton's classification extension: the file an output's ``label_filename`` names.

"label_filename: The label file associated with this output. Should be specified only for outputs that
represent classifications." (model_config.proto). One label per line, in class-index order, beside
config.pbtxt in the model's directory, which the file must not leave (``confined.inside_model``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from adapters.errors import InvalidInput, ModelNotReady
from adapters.repository.confined import inside_model


@cache
def _read(directory: Path, name: str) -> tuple[str, ...]:
    try:
        path = inside_model(directory, name, "label_filename")
    except InvalidInput as exc:
        raise ModelNotReady(exc.message) from None
    try:
        return tuple(path.read_text(encoding="utf-8").splitlines())
    except UnicodeDecodeError:
        raise ModelNotReady(f"label file {directory.name}/{name} is not UTF-8 text") from None
    except OSError as exc:
        raise ModelNotReady(f"label file {directory.name}/{name} cannot be read: {exc.strerror}") from None


def output_labels(directory: Path, config: Any, output: str) -> tuple[str, ...] | None:
    """The labels of ``output``, or None when config.pbtxt gives it no ``label_filename``."""
    if config is None:
        return None
    for entry in config.output:
        if entry.name == output and entry.label_filename:
            return _read(directory, entry.label_filename)
    return None
