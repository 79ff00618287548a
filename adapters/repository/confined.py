"""Files a model reads stay inside its directory: config.pbtxt, its ``label_filename`` files and model files.

Names are resolved (links followed) against the model's resolved directory, so an absolute name, ``..`` segments
and links to elsewhere are all refused alike; a model directory that is itself a link is served from its target.
Messages name the setting, not the file: neither its contents nor the server's paths.
"""

from __future__ import annotations

from pathlib import Path

from adapters.errors import InvalidInput


def inside_model(directory: Path, name: str, what: str, version: str = "") -> Path:
    """``directory / [version /] name`` when it resolves inside ``directory``; InvalidInput naming ``what``
    otherwise (an absolute ``name`` is taken as it is, as ``pathlib`` joins it)."""
    path = directory / version / name if version else directory / name
    try:
        inside = "\x00" not in name and path.resolve().is_relative_to(directory.resolve())
    except (OSError, RuntimeError):  # a loop of links
        inside = False
    if not inside:
        raise InvalidInput(
            f"model '{directory.name}': {what} names a file outside the model's directory (files a model reads, "
            "links followed, must be inside it)"
        )
    return path
